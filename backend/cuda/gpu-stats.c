/* gpu-stats.c: what ran where, for --stats (backend/cuda/gpu.h). */
#include "backend/cuda/gpu-impl.h"

#include "base/units.h"

void eng_gpu_print_stats(const struct eng_gpu *g, FILE *out)
{
    char a[32], b[32];
    fprintf(out, "gpu: %lld matrices (%s) in VRAM, %lld gpu-tier matrices on the host; "
            "%llu passes wholly on the GPU, %llu matmuls offloaded; MoE layers: %llu in VRAM, "
            "%llu through the expert cache, %llu on the CPU (--gpu-experts %s, "
            "--offload-min-batch %d)\n",
            (long long)g->n_up, fl_format_size(g->up_bytes, a, sizeof(a)), (long long)g->n_kept,
            (unsigned long long)g->n_pass, (unsigned long long)g->n_matmul, (unsigned long long)g->n_moe_vram,
            (unsigned long long)g->n_moe_cache, (unsigned long long)g->n_moe_cpu,
            eng_gpu_experts_name(g->o.experts), g->o.min_batch);
    if (!g->xc)
        return;
    fl_cuda_xcache_sync(g->xc, NULL); /* count the copies still in flight */
    const struct fl_cuda_xcache_stats st = fl_cuda_xcache_stats(g->xc);
    const double n = st.copies ? (double)st.copies : 1.0;
    fprintf(out, "gpu expert cache (%s): %d slots of %s; %llu hits, %llu misses, %llu evictions; "
            "%llu host->GPU expert copies, %s, per expert %.1f us mean, %.1f us max "
            "(host read included)\n",
            g->o.experts == ENG_GPU_EXPERTS_UNIFIED ? "unified" : "copy",
            fl_cuda_xcache_slots(g->xc), fl_format_size(g->slot_bytes, b, sizeof(b)),
            (unsigned long long)st.lru.hits, (unsigned long long)st.lru.misses,
            (unsigned long long)st.lru.evictions, (unsigned long long)st.copies,
            fl_format_size(st.copy_bytes, a, sizeof(a)), (double)st.copy_ns_total / n / 1e3,
            (double)st.copy_ns_max / 1e3);
    fprintf(out, "gpu host experts page-locked for direct copies: %s in %d ranges\n",
            fl_format_size(g->pinned_bytes, a, sizeof(a)), g->n_pins);
}

/* gpu-none.c: the GPU backend in a build without CUDA: no device, and
 * opening one says why, so callers need no #ifdef to find out. */
#include "backend/cuda/gpu.h"

#include <errno.h>

#include "backend/cpu/cpu-backend.h"

bool eng_gpu_detect(uint64_t *vram_free, const char **why)
{
    *vram_free = 0;
    *why = "built without CUDA";
    return false;
}

int eng_gpu_open(const struct eng_model *m, const struct gguf_file *g,
                 const struct placement_plan *plan, const struct eng_gpu_options *o,
                 struct eng_gpu **out, struct fl_err *err)
{
    (void)m, (void)g, (void)plan, (void)o, (void)out;
    return fl_err_set(err, -ENODEV, "no GPU: faultline was built without CUDA");
}

/* Nothing below can be reached with a GPU: no eng_gpu exists in this build. */
void eng_gpu_close(struct eng_gpu *gpu) { (void)gpu; }

const struct eng_backend *eng_gpu_pick(struct eng_ctx *c)
{
    (void)c;
    return &eng_cpu_backend;
}

int eng_gpu_error(const struct eng_gpu *gpu, struct fl_err *err)
{
    (void)gpu, (void)err;
    return 0;
}

void eng_gpu_print_stats(const struct eng_gpu *gpu, FILE *out) { (void)gpu, (void)out; }

void eng_gpu_rs_copy(struct eng_gpu *gpu, int dst, int src) { (void)gpu, (void)dst, (void)src; }

uint64_t eng_gpu_ops(const struct eng_gpu *gpu)
{
    (void)gpu;
    return 0;
}

uint64_t eng_gpu_passes(const struct eng_gpu *gpu)
{
    (void)gpu;
    return 0;
}

uint64_t eng_gpu_moe_on_cpu(const struct eng_gpu *gpu)
{
    (void)gpu;
    return 0;
}

bool eng_gpu_holds_expert(void *gpu, int layer, int expert)
{
    (void)gpu, (void)layer, (void)expert;
    return false;
}

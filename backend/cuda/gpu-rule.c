/* gpu-rule.c: the GPU flags and the rule for where a MoE layer's experts
 * run (backend/cuda/gpu.h): plain C that every build has, tested without a
 * device. */
#include "backend/cuda/gpu.h"

#include <errno.h>
#include <string.h>

static const char *const mode_names[] = { "none", "copy", "unified", "cpu" };

int eng_gpu_experts_parse(const char *v, enum eng_gpu_experts *out)
{
    for (int i = ENG_GPU_EXPERTS_COPY; v && i <= ENG_GPU_EXPERTS_CPU; i++)
        if (!strcmp(v, mode_names[i])) {
            *out = (enum eng_gpu_experts)i;
            return 0;
        }
    return -EINVAL;
}

const char *eng_gpu_experts_name(enum eng_gpu_experts m)
{
    return (unsigned)m <= ENG_GPU_EXPERTS_CPU ? mode_names[m] : "?";
}

enum eng_gpu_where eng_gpu_decide(enum eng_gpu_experts mode, bool kernels_ok, bool in_vram,
                                  bool have_cache, int64_t n_tok, int min_batch)
{
    if (!kernels_ok)
        return ENG_GPU_RUN_CPU;
    if (in_vram)
        return ENG_GPU_RUN_VRAM;
    if (!have_cache || mode == ENG_GPU_EXPERTS_NONE)
        return ENG_GPU_RUN_CPU;
    /* llama.cpp's offload rule: a big enough batch pays for the copies */
    if (n_tok >= (min_batch > 0 ? min_batch : ENG_GPU_MIN_BATCH_DEFAULT))
        return ENG_GPU_RUN_CACHE;
    return mode == ENG_GPU_EXPERTS_CPU ? ENG_GPU_RUN_CPU : ENG_GPU_RUN_CACHE;
}

/* arch.c: the architecture registry. */
#include <string.h>

#include "model/arch.h"

extern const struct eng_arch eng_arch_llama;
extern const struct eng_arch eng_arch_qwen3moe;
extern const struct eng_arch eng_arch_deepseek2; /* model/arch-deepseek2.c */
extern const struct eng_arch eng_arch_deepseek32; /* model/arch-deepseek2.c */
extern const struct eng_arch eng_arch_glm_dsa;   /* model/arch-deepseek2.c */
extern const struct eng_arch eng_arch_kimi_linear; /* model/arch-deepseek2.c */
extern const struct eng_arch eng_arch_kimi_k3;   /* model/arch-kimi-k3.c */
extern const struct eng_arch eng_arch_gpt_oss;   /* model/arch-gpt-oss.c */
extern const struct eng_arch eng_arch_glm4moe;   /* model/arch-glm4moe.c */
extern const struct eng_arch eng_arch_minimax_m2; /* model/arch-minimax-m2.c */
extern const struct eng_arch eng_arch_minimax_m3; /* model/arch-minimax-m3.c */
extern const struct eng_arch eng_arch_qwen35moe; /* model/arch-qwen35moe.c */
extern const struct eng_arch eng_arch_qwen3next; /* model/arch-qwen35moe.c */

static const struct eng_arch *const archs[] = {
    &eng_arch_llama,
    &eng_arch_qwen3moe,
    &eng_arch_deepseek2,
    &eng_arch_deepseek32,
    &eng_arch_glm_dsa,
    &eng_arch_kimi_linear,
    &eng_arch_kimi_k3,
    &eng_arch_gpt_oss,
    &eng_arch_glm4moe,
    &eng_arch_minimax_m2,
    &eng_arch_minimax_m3,
    &eng_arch_qwen35moe,
    &eng_arch_qwen3next,
};

const struct eng_arch *eng_arch_find(const char *name)
{
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
        if (!strcmp(archs[i]->name, name))
            return archs[i];
    return NULL;
}

const char *eng_arch_names(void)
{
    static char names[256];
    if (!names[0]) {
        for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
            if (i)
                strncat(names, ", ", sizeof(names) - strlen(names) - 1);
            strncat(names, archs[i]->name, sizeof(names) - strlen(names) - 1);
        }
    }
    return names;
}

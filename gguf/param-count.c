/* param-count.c: parameters of a model file and llama-bench's size label. */
#include "gguf/param-count.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gguf/tensor-names.h"

/* "<arch>.<key>" as an integer; 0 when absent or not one. */
static int64_t arch_int(const struct gguf_file *f, const char *arch, const char *key)
{
    char full[160];
    int64_t v = 0;
    snprintf(full, sizeof(full), "%s.%s", arch, key);
    if (gguf_get_int(f, full, &v) || v < 0)
        return 0;
    return v;
}

static uint64_t n_elements(const struct gguf_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        n *= (uint64_t)t->ne[d];
    return n;
}

void gguf_param_count(const struct gguf_file *f, struct gguf_param_count *out)
{
    *out = (struct gguf_param_count){ .arch = "" };
    if (gguf_get_str(f, "general.architecture", &out->arch))
        out->arch = "";
    int64_t stack_experts = 0; /* an expert weight's last dimension */
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        const uint64_t n = n_elements(t);
        out->n_params += n;
        out->n_bytes += t->nbytes;
        if (!fl_tensor_is_expert(t->name))
            continue;
        out->n_expert_params += n;
        if (!stack_experts && t->n_dims == 3)
            stack_experts = t->ne[2];
    }
    out->n_layer = arch_int(f, out->arch, "block_count");
    if (!out->n_expert_params) {
        out->n_active = out->n_params;
        return;
    }
    out->n_expert = arch_int(f, out->arch, "expert_count");
    if (!out->n_expert)
        out->n_expert = stack_experts > 0 ? stack_experts : 1;
    out->n_expert_used = arch_int(f, out->arch, "expert_used_count");
    if (!out->n_expert_used || out->n_expert_used > out->n_expert)
        out->n_expert_used = out->n_expert;
    /* experts * used stays far below 2^64: 1e13 parameters times 1e3 experts */
    out->n_active = out->n_params - out->n_expert_params +
                    out->n_expert_params * (uint64_t)out->n_expert_used / (uint64_t)out->n_expert;
}

char *gguf_count_label(uint64_t n, char *buf, size_t cap)
{
    static const struct { double scale; const char *unit; } units[] = {
        { 1e12, "T" }, { 1e9, "B" }, { 1e6, "M" }, { 1e3, "K" }, { 1, "" },
    };
    size_t u = 0;
    /* 999.7M is written 1B, not 1000M */
    while (u + 1 < sizeof(units) / sizeof(units[0]) && (double)n < units[u].scale * 0.9995)
        u++;
    const double v = (double)n / units[u].scale;
    char num[32];
    snprintf(num, sizeof(num), v < 9.95 ? "%.1f" : "%.0f", v);
    const size_t len = strlen(num);
    if (len > 2 && !strcmp(num + len - 2, ".0"))
        num[len - 2] = '\0';
    snprintf(buf, cap, "%s%s", num, units[u].unit);
    return buf;
}

/* The sizes llama.cpp's loader names by architecture and block count
 * (src/models/<arch>.cpp), with the total in billions that the name stands
 * for; moe: 0 dense only, 8 only with 8 experts (llama's Mixtral split),
 * -1 either. Several names for one depth: the nearest to the count. */
static const struct known_size {
    const char *arch;
    int64_t n_layer;
    int moe;
    const char *label;
    double billions;
} known[] = {
    { "llama", 16, 0, "1B", 1 },       { "llama", 22, 0, "1B", 1 },
    { "llama", 26, 0, "3B", 3 },       { "llama", 28, 0, "3B", 3 },
    { "llama", 30, 0, "256M", 0.256 }, { "llama", 32, 0, "3B", 3 },
    { "llama", 32, 0, "7B", 7 },       { "llama", 32, 0, "8B", 8 },
    { "llama", 36, 0, "8B", 8 },       { "llama", 40, 0, "13B", 13 },
    { "llama", 48, 0, "34B", 34 },     { "llama", 60, 0, "30B", 30 },
    { "llama", 80, 0, "65B", 65 },     { "llama", 80, 0, "70B", 70 },
    { "llama", 32, 8, "8x7B", 56 },    { "llama", 56, 8, "8x22B", 176 },
    { "qwen3moe", 48, -1, "30B.A3B", 30 }, { "qwen3moe", 94, -1, "235B.A22B", 235 },
    { "deepseek2", 27, -1, "16B", 16 },    { "deepseek2", 47, -1, "30B.A3B", 30 },
    { "deepseek2", 60, -1, "236B", 236 },  { "deepseek2", 61, -1, "671B", 671 },
    { "gpt-oss", 24, -1, "20B", 20 },      { "gpt-oss", 36, -1, "120B", 120 },
};

/* A known name within 0.7x..1.4x of the counted total, the nearest; NULL. */
static const char *known_label(const struct gguf_param_count *c)
{
    const char *best = NULL;
    double best_off = INFINITY;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        const struct known_size *k = &known[i];
        const bool moe_ok = k->moe < 0 || (k->moe == 0 ? c->n_expert == 0 : c->n_expert == k->moe);
        if (strcmp(k->arch, c->arch) || k->n_layer != c->n_layer || !moe_ok)
            continue;
        const double ratio = (double)c->n_params / (k->billions * 1e9);
        const double off = fabs(log(ratio));
        if (ratio >= 0.7 && ratio <= 1.4 && off < best_off) {
            best = k->label;
            best_off = off;
        }
    }
    return best;
}

char *gguf_size_label(const struct gguf_param_count *c, char *buf, size_t cap)
{
    const char *k = known_label(c);
    if (k) {
        snprintf(buf, cap, "%s", k);
        return buf;
    }
    char total[32], active[32];
    gguf_count_label(c->n_params, total, sizeof(total));
    if (!c->n_expert_params)
        snprintf(buf, cap, "%s", total);
    else
        snprintf(buf, cap, "%s.A%s", total, gguf_count_label(c->n_active, active, sizeof(active)));
    return buf;
}

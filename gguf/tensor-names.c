/* tensor-names.c: see gguf/tensor-names.h. */
#include "gguf/tensor-names.h"

#include <stddef.h>
#include <string.h>

/* Past "blk.<il>." when name is a block tensor (*il its index), else NULL. */
static const char *block_rest(const char *name, int *il)
{
    if (strncmp(name, "blk.", 4))
        return NULL;
    const char *s = name + 4;
    long n = 0;
    if (*s < '0' || *s > '9')
        return NULL;
    for (; *s >= '0' && *s <= '9'; s++) {
        n = n * 10 + (*s - '0');
        if (n > FL_TENSOR_MAX_BLOCK)
            return NULL;
    }
    if (*s != '.')
        return NULL;
    *il = (int)n;
    return s + 1;
}

int fl_tensor_block(const char *name)
{
    int il = -1;
    return block_rest(name, &il) ? il : -1;
}

static const char *const part_names[] = { "gate", "up", "down", "gate_up" };

int fl_tensor_expert_part(const char *name, bool *bias)
{
    int il;
    const char *rest = block_rest(name, &il);
    if (!rest || strncmp(rest, "ffn_", 4))
        return -1;
    for (int p = 0; p < 4; p++) {
        const size_t n = strlen(part_names[p]);
        const char *s = rest + 4;
        if (strncmp(s, part_names[p], n) || strncmp(s + n, "_exps.", 6))
            continue;
        s += n + 6;
        if (!strcmp(s, "weight") || !strcmp(s, "bias")) {
            if (bias)
                *bias = s[0] == 'b';
            return p;
        }
    }
    return -1;
}

/* ".ffn_(up|down|gate|gate_up)_(ch|)exps" at s. */
static bool expert_at(const char *s)
{
    if (strncmp(s, ".ffn_", 5))
        return false;
    s += 5;
    for (int p = 0; p < 4; p++) {
        const size_t n = strlen(part_names[p]);
        if (!strncmp(s, part_names[p], n) &&
            (!strncmp(s + n, "_exps", 5) || !strncmp(s + n, "_chexps", 7)))
            return true;
    }
    return false;
}

bool fl_tensor_is_expert(const char *name)
{
    /* anywhere in the name, as the regex searches */
    for (const char *s = strstr(name, ".ffn_"); s; s = strstr(s + 1, ".ffn_"))
        if (expert_at(s))
            return true;
    return false;
}

bool fl_tensor_is_weight(const char *name)
{
    const size_t n = strlen(name);
    return n >= 7 && !strcmp(name + n - 7, ".weight");
}

/* A block tensor's base name (between "blk.<il>." and ".weight"/".bias")
 * is `base`. */
static bool base_is(const char *rest, const char *base)
{
    const size_t n = strlen(base);
    return !strncmp(rest, base, n) && (!strcmp(rest + n, ".weight") || !strcmp(rest + n, ".bias"));
}

/* Block matrices only products read. */
static const char *const projections[] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_a", "attn_q_b", "attn_kv_a_mqa",
    "attn_k_b", "attn_v_b", "ffn_gate", "ffn_up", "ffn_down", "ffn_gate_shexp",
    "ffn_up_shexp", "ffn_down_shexp",
};

static enum fl_tensor_role block_role(const char *rest)
{
    if (base_is(rest, "ffn_gate_inp"))
        return FL_TENSOR_ROUTER;
    if (base_is(rest, "exp_probs_b"))
        return FL_TENSOR_SEL_BIAS;
    for (size_t i = 0; i < sizeof(projections) / sizeof(projections[0]); i++)
        if (base_is(rest, projections[i]))
            return FL_TENSOR_PROJECTION;
    const char *dot = strchr(rest, '.');
    const size_t n = dot ? (size_t)(dot - rest) : strlen(rest);
    if (n >= 4 && !strncmp(rest + n - 4, "norm", 4))
        return FL_TENSOR_NORM;
    return FL_TENSOR_OTHER;
}

enum fl_tensor_role fl_tensor_role(const char *name)
{
    if (fl_tensor_is_expert(name))
        return FL_TENSOR_EXPERTS;
    int il;
    const char *rest = block_rest(name, &il);
    if (rest)
        return block_role(rest);
    if (base_is(name, "token_embd"))
        return FL_TENSOR_TOKEN_EMBD;
    if (base_is(name, "output"))
        return FL_TENSOR_OUTPUT;
    if (base_is(name, "output_norm"))
        return FL_TENSOR_OUTPUT_NORM;
    return FL_TENSOR_OTHER;
}

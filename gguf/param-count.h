/* param-count.h: how many parameters a model file holds, counted from its
 * tensor table the way llama.cpp counts them (every tensor's elements, as
 * llama_model_n_params; every tensor's bytes, as llama_model_size), the
 * parameters one token uses in a MoE (the routed experts weighted by
 * expert_used_count / expert_count), and llama-bench's size label for the
 * model column ("30B.A3B", "8x7B", "1.5B"). The one place the project
 * counts parameters: bench prints them, tests check them. */
#ifndef FL_GGUF_PARAM_COUNT_H
#define FL_GGUF_PARAM_COUNT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

struct gguf_param_count {
    uint64_t n_params;        /* elements of every tensor */
    uint64_t n_bytes;         /* bytes of every tensor */
    uint64_t n_expert_params; /* elements of the routed expert tensors (fl_tensor_is_expert) */
    uint64_t n_active;        /* per token: the rest + experts * n_expert_used / n_expert */
    int64_t n_expert, n_expert_used; /* 0 for a dense model */
    int64_t n_layer;          /* <arch>.block_count; 0 when absent */
    const char *arch;         /* general.architecture; "" when absent */
};

/* Counts f's tensors. The expert counts come from <arch>.expert_count and
 * <arch>.expert_used_count; a file with expert tensors and no
 * expert_count takes it from the stacks' last dimension; without
 * expert_used_count every expert counts as active (nothing says fewer). */
void gguf_param_count(const struct gguf_file *f, struct gguf_param_count *out);

/* llama-bench's size label: the name llama.cpp gives the architecture's
 * known sizes (by block count) when the counted total is near that size
 * (a generated model with a real model's depth is not that model);
 * otherwise one made from the counts, total and, for a MoE, ".A" and the
 * active count, each in its own unit as llama.cpp's "2.8T.A50B"
 * ("31B.A3.3B", "1.2M.A562K"). Never "?B". Returns buf. */
char *gguf_size_label(const struct gguf_param_count *c, char *buf, size_t cap);

/* A count as the labels write it: 1 decimal below 10 of its unit (".0"
 * dropped), whole above, units K, M, B, T ("1.5B", "109M", "3B"). */
char *gguf_count_label(uint64_t n, char *buf, size_t cap);

#endif

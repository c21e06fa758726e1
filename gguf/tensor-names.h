/* tensor-names.h: what a GGUF tensor's name says — the one place the
 * project reads llama.cpp's tensor names. Block tensors are named
 * "blk.<il>.<base>.<weight|bias>", the others "<base>.<weight|bias>"
 * (token_embd, output_norm, output). Architectures find their tensors by
 * full name (model/model.h's eng_model_tensor); everything that asks what a
 * name *is* — the pager's expert layout, placement's built-in rules, the
 * CPU's repacking, the GPU's uploads — asks here. */
#ifndef FL_TENSOR_NAMES_H
#define FL_TENSOR_NAMES_H

#include <stdbool.h>

/* The highest block index a name may carry (above any real model). */
#define FL_TENSOR_MAX_BLOCK 65535

/* The block index of "blk.<il>.<...>", -1 for any other name. */
int fl_tensor_block(const char *name);

/* The parts of a routed expert stack "blk.<il>.ffn_<part>_exps.<weight|bias>"
 * (shape [ne0, ne1, n_expert], biases [ne0, n_expert]: expert e's slice is
 * one contiguous byte range). */
enum fl_expert_part { FL_EXPERT_GATE = 0, FL_EXPERT_UP, FL_EXPERT_DOWN, FL_EXPERT_GATE_UP };

/* A routed expert stack's part (*bias: the .bias of it), or -1. */
int fl_tensor_expert_part(const char *name, bool *bias);

/* Any expert tensor: routed stacks (_exps) and GroveMoE's chunked ones
 * (_chexps), weights and biases — what llama.cpp's LLM_FFN_EXPS_REGEX
 * "\.ffn_(up|down|gate|gate_up)_(ch|)exps" matches, and so what --cpu-moe,
 * --n-cpu-moe and their disk twins move. Shared experts (_shexp) are not. */
bool fl_tensor_is_expert(const char *name);

/* A pattern a user's -ot rule can use for the same set. */
#define FL_TENSOR_EXPERT_REGEX "\\.ffn_(up|down|gate|gate_up)_(ch|)exps"

enum fl_tensor_role {
    FL_TENSOR_OTHER = 0,
    FL_TENSOR_TOKEN_EMBD,  /* token_embd: rows looked up one at a time */
    FL_TENSOR_OUTPUT,      /* output: the head's matrix */
    FL_TENSOR_OUTPUT_NORM, /* output_norm */
    FL_TENSOR_NORM,        /* a block's RMSNorm weight (attn_norm, ffn_norm, attn_q_norm, ...) */
    FL_TENSOR_ROUTER,      /* ffn_gate_inp: a MoE layer's router (weight, bias) */
    FL_TENSOR_SEL_BIAS,    /* exp_probs_b: the router's selection bias */
    FL_TENSOR_EXPERTS,     /* fl_tensor_is_expert */
    FL_TENSOR_PROJECTION,  /* a block's matrix only products read: attention projections
                              (incl. MLA's), dense FFN and shared-expert matrices */
};

/* What the name says the tensor is. */
enum fl_tensor_role fl_tensor_role(const char *name);

/* Ends in ".weight". */
bool fl_tensor_is_weight(const char *name);

#endif

/* inspect-model.h: what `faultline inspect` reports about one GGUF file,
 * gathered once and printed as text (inspect.c) or JSON (inspect-doc.c). */
#ifndef FL_INSPECT_MODEL_H
#define FL_INSPECT_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf/gguf.h"
#include "gguf/moe-layout.h"
#include "gguf/tensor-types.h"

struct inspect_tokenizer {
    const char *model, *pre;  /* NULL when absent */
    int64_t n_vocab, n_merges; /* -1 when absent */
    int64_t bos, eos;          /* -1 when absent */
};

struct inspect_type_bytes {
    uint32_t type;
    int64_t n_tensors;
    uint64_t bytes;
};

struct inspect_model {
    struct gguf_file *f;
    const char *arch, *model_name; /* NULL when absent */
    struct inspect_tokenizer tok;
    uint64_t tensor_bytes;
    int n_types;                   /* entries of types[], by type id */
    struct inspect_type_bytes types[FL_TYPE_COUNT];
    struct moe_layout *moe;
    /* Linear attention (Gated DeltaNet): layers with an ssm_a tensor and
     * the F32 recurrent state one sequence keeps for all of them (conv
     * window + delta-rule matrices), from the ssm.* keys; 0 when none. */
    int n_rs_layers;
    const char *rs_kind;     /* "Gated DeltaNet" or "Kimi Delta Attention" */
    uint64_t rs_bytes_per_seq;
    /* DeepSeek sparse attention: layers with a lightning indexer (an
     * indexer.attn_q_b tensor) and the positions each query reads
     * (attention.indexer.top_k); 0 when none. */
    int n_indexer_layers;
    int64_t indexer_top_k;
    int64_t indexer_block;   /* MiniMax's: positions per block (0: DeepSeek's, per position) */
};

int inspect_model_load(const char *path, struct inspect_model *m, struct fl_err *err);
void inspect_model_free(struct inspect_model *m);

/* Element i of a numeric array as a scalar value. */
void inspect_arr_elem(const struct gguf_value *arr, uint64_t i, struct gguf_value *out);
/* "[128, 64, 16]" */
void inspect_format_shape(const struct gguf_tensor *t, char *buf, size_t len);

/* The report as one JSON document; 0, -ENOMEM or -EIO. */
int inspect_print_json(FILE *out, const struct inspect_model *m, bool tensors);

#endif

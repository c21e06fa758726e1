/* gen-tokenizer.c: the tokenizer a generated model carries: gen's built-in
 * byte-level BPE vocabulary (gen-vocab.c), or every tokenizer.* key of
 * another GGUF file (--vocab: a real model's or llama.cpp's vocab files),
 * so a synthetic model tokenizes, formats chats and fills in the middle as
 * that model does. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gen/gen-internal.h"
#include "gguf/gguf-writer.h"

#define GEN_MAX_VOCAB (1 << 21)

static bool is_tokenizer_key(const char *key)
{
    return strncmp(key, "tokenizer.", 10) == 0;
}

int64_t gen_vocab_size(const struct gen_params *p)
{
    const struct gguf_value *t = NULL;
    if (p->vocab && gguf_get_arr(p->vocab, "tokenizer.ggml.tokens", &t) == 0)
        return (int64_t)t->arr.n;
    return gen_vocab_n_tokens;
}

/* Whether the writer can say v as it is (it writes 32-bit scalars, bools,
 * strings and flat arrays). */
static bool writable(const struct gguf_value *v)
{
    switch (v->type) {
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: case GGUF_VT_BOOL:
    case GGUF_VT_STRING:
        return true;
    case GGUF_VT_ARRAY:
        return v->arr.type != GGUF_VT_ARRAY;
    default:
        return false;
    }
}

int gen_vocab_check(const struct gen_params *p, struct fl_err *err)
{
    if (!p->vocab)
        return 0;
    const struct gguf_value *t = NULL;
    const char *model = NULL;
    if (gguf_get_str(p->vocab, "tokenizer.ggml.model", &model) ||
        gguf_get_arr(p->vocab, "tokenizer.ggml.tokens", &t) || t->arr.type != GGUF_VT_STRING)
        return fl_err_set(err, -EINVAL, "--vocab %s: no tokenizer (tokenizer.ggml.model and "
                          "tokenizer.ggml.tokens)", gguf_name(p->vocab));
    if (t->arr.n < 1 || t->arr.n > GEN_MAX_VOCAB)
        return fl_err_set(err, -EINVAL, "--vocab %s: %llu tokens (1..%d)", gguf_name(p->vocab),
                          (unsigned long long)t->arr.n, GEN_MAX_VOCAB);
    for (int64_t i = 0; i < gguf_n_kv(p->vocab); i++) {
        const char *key = gguf_kv_key(p->vocab, i);
        if (is_tokenizer_key(key) && !writable(gguf_kv_value(p->vocab, i)))
            return fl_err_set(err, -EINVAL, "--vocab %s: %s is a %s, which gen does not write",
                              gguf_name(p->vocab), key,
                              gguf_vtype_name(gguf_kv_value(p->vocab, i)->type));
    }
    return 0;
}

static int copy_strings(struct gguf_writer *w, const char *key, const struct gguf_value *v)
{
    const struct gguf_str *s = v->arr.elems;
    const char **list = malloc(sizeof(*list) * (v->arr.n ? v->arr.n : 1));
    if (!list)
        return -ENOMEM;
    for (uint64_t i = 0; i < v->arr.n; i++)
        list[i] = s[i].data;
    const int rc = gguf_writer_kv_str_arr(w, key, list, v->arr.n);
    free(list);
    return rc;
}

static int copy_kv(struct gguf_writer *w, const char *key, const struct gguf_value *v)
{
    switch (v->type) {
    case GGUF_VT_UINT32: return gguf_writer_kv_u32(w, key, v->u32);
    case GGUF_VT_INT32: return gguf_writer_kv_i32(w, key, v->i32);
    case GGUF_VT_FLOAT32: return gguf_writer_kv_f32(w, key, v->f32);
    case GGUF_VT_BOOL: return gguf_writer_kv_bool(w, key, v->b);
    case GGUF_VT_STRING: return gguf_writer_kv_str(w, key, v->str.data);
    case GGUF_VT_ARRAY:
        return v->arr.type == GGUF_VT_STRING ? copy_strings(w, key, v)
                                             : gguf_writer_kv_arr(w, key, v->arr.type,
                                                                  v->arr.elems, v->arr.n);
    default: return -EINVAL; /* gen_vocab_check refused it */
    }
}

int gen_vocab_write(const struct gen_params *p, const char *pre, struct gguf_writer *w)
{
    int rc = 0;
    if (p->vocab) {
        for (int64_t i = 0; i < gguf_n_kv(p->vocab) && !rc; i++)
            if (is_tokenizer_key(gguf_kv_key(p->vocab, i)))
                rc = copy_kv(w, gguf_kv_key(p->vocab, i), gguf_kv_value(p->vocab, i));
        return rc;
    }
    rc = gguf_writer_kv_str(w, "tokenizer.ggml.model", "gpt2");
    if (!rc) rc = gguf_writer_kv_str(w, "tokenizer.ggml.pre", pre);
    if (!rc) rc = gguf_writer_kv_str_arr(w, "tokenizer.ggml.tokens", gen_vocab_tokens,
                                         gen_vocab_n_tokens);
    if (!rc) rc = gguf_writer_kv_arr(w, "tokenizer.ggml.token_type", GGUF_VT_INT32,
                                     gen_vocab_token_type, gen_vocab_n_tokens);
    if (!rc) rc = gguf_writer_kv_str_arr(w, "tokenizer.ggml.merges", gen_vocab_merges,
                                         gen_vocab_n_merges);
    if (!rc) rc = gguf_writer_kv_u32(w, "tokenizer.ggml.bos_token_id", gen_vocab_eos_id);
    if (!rc) rc = gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", gen_vocab_eos_id);
    return rc;
}

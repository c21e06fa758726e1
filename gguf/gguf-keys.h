/* gguf-keys.h: the metadata keys faultline knows, their expected types and a
 * readable label for each.
 *
 * Keys under the architecture's prefix ("qwen3moe.block_count") are listed by
 * their suffix. gguf_open/gguf_parse reject a file in which a known key holds
 * the wrong kind of value, so code reading these keys through gguf_get_* can
 * trust the kind (it still checks ranges that depend on the model). */
#ifndef FL_GGUF_KEYS_H
#define FL_GGUF_KEYS_H

#include "base/error.h"
#include "gguf/gguf.h"

enum gguf_key_kind {
    GGUF_KEY_STR,       /* a string */
    GGUF_KEY_U32,       /* exactly a u32 (general.alignment) */
    GGUF_KEY_COUNT,     /* an integer of any width in 0..UINT32_MAX (sizes, counts, token ids) */
    GGUF_KEY_FLOAT,     /* f32 or f64 */
    GGUF_KEY_BOOL,
    GGUF_KEY_PER_LAYER, /* a COUNT, or an array of block_count COUNTs (one per layer) */
    GGUF_KEY_STR_ARR,   /* array of strings */
    GGUF_KEY_F32_ARR,   /* array of f32 */
    GGUF_KEY_I32_ARR,   /* array of i32 */
    GGUF_KEY_INT_ARR,   /* array of integers of any width */
};

struct gguf_key_info {
    const char *name;  /* full key, or the suffix after "<arch>." */
    enum gguf_key_kind kind;
    const char *label; /* what it means, for people */
    bool per_token;    /* an array with one element per token in tokenizer.ggml.tokens */
};

/* The entry for key in a file of architecture arch (may be NULL), or NULL. */
const struct gguf_key_info *gguf_key_info(const char *arch, const char *key);

/* What a kind of key must hold, in words: "an unsigned integer", ... */
const char *gguf_key_kind_name(enum gguf_key_kind kind);

/* Checks every known key in f; 0, or -EINVAL with "NAME: key ... at byte N". */
int gguf_keys_check(const struct gguf_file *f, struct fl_err *err);

#endif

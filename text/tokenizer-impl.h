/* tokenizer-impl.h: what tokenizer.c, tokenizer-spm.c and tokenizer-bpe.c
 * share. Not part of the interface; include text/tokenizer.h instead. */
#ifndef FL_TOKENIZER_IMPL_H
#define FL_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

#define FL_TOK_MAX_REGEX 8

/* Token attributes (llama.cpp's llama_token_attr subset that tokenizing and
 * rendering depend on). A token has exactly one of these. */
enum {
    FL_ATTR_UNDEFINED = 0,
    FL_ATTR_UNKNOWN = 1 << 0,
    FL_ATTR_UNUSED = 1 << 1,
    FL_ATTR_NORMAL = 1 << 2,
    FL_ATTR_CONTROL = 1 << 3,
    FL_ATTR_USER_DEFINED = 1 << 4,
    FL_ATTR_BYTE = 1 << 5,
};

/* A growable list of token ids. */
struct fl_tokvec {
    int32_t *v;
    size_t n, cap;
};

int fl_tokvec_push(struct fl_tokvec *tv, int32_t id);

struct fl_tokenizer {
    enum fl_tok_model model;
    int32_t n_vocab;
    char **text;          /* NUL-terminated copies */
    uint32_t *text_len;
    float *score;
    uint8_t *type;        /* enum fl_token_type as stored */
    uint8_t *attr;        /* FL_ATTR_* */
    char **piece;         /* rendered bytes (special = true, no lstrip) */
    uint32_t *piece_len;
    bool *eog;

    int32_t *hash;        /* open addressing over text: id or -1 */
    uint32_t hash_mask;

    uint64_t *merge_key;  /* (left id << 32 | right id), or UINT64_MAX */
    int32_t *merge_rank;
    uint32_t merge_mask;

    int32_t *special;     /* CONTROL/USER_DEFINED/UNKNOWN ids, longest text first */
    int32_t n_special;

    int32_t byte_token[256]; /* the token for each raw byte, or FL_TOKEN_NULL */

    int32_t bos, eos, eot, eom, unk, pad;
    int32_t fim[FL_FIM_N];
    bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges;

    char pre[64];
    int n_regex;
    void *regex[FL_TOK_MAX_REGEX]; /* pcre2_code_8 * */
    char warning[256];
};

int32_t fl_tok_find(const struct fl_tokenizer *tok, const char *s, size_t len);
int32_t fl_tok_merge_rank(const struct fl_tokenizer *tok, int32_t left, int32_t right);

/* Tokenizes one raw-text fragment (no special tokens in it) and appends. */
int fl_spm_tokenize(const struct fl_tokenizer *tok, const char *text, size_t len,
                    struct fl_tokvec *out);
int fl_bpe_tokenize(const struct fl_tokenizer *tok, const char *text, size_t len,
                    struct fl_tokvec *out);

/* BPE set-up: resolves tokenizer.ggml.pre into regexes and flags. */
int fl_bpe_setup_pre(struct fl_tokenizer *tok, const char *pre, struct fl_err *err);
void fl_bpe_free_regex(struct fl_tokenizer *tok);
/* Renders a byte-level BPE token text back to bytes (llama_decode_text). */
char *fl_bpe_decode_text(const char *text, size_t len, uint32_t *out_len);
/* The pre-tokenizer alone: *norm_out is the text as tokenized (malformed
 * UTF-8 replaced), word i ends at byte (*ends)[i] of it. For tests. */
int fl_bpe_split(const struct fl_tokenizer *tok, const char *text, size_t len, char **norm_out,
                 size_t **ends, size_t *n_words);
/* The token for raw byte b in a byte-level vocabulary. */
int32_t fl_bpe_byte_token(const struct fl_tokenizer *tok, uint8_t b);

#endif

/* tokenizer.c: loading a tokenizer from GGUF metadata, special tokens,
 * tokenize / token_to_piece / detokenize with llama.cpp's semantics (see
 * its llama-vocab.cpp). The two merge algorithms live in tokenizer-spm.c
 * and tokenizer-bpe.c. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "text/tokenizer-impl.h"
#include "text/unicode.h"

#define KEY(k) "tokenizer.ggml." k

/* ---- small containers --------------------------------------------------- */

int fl_tokvec_push(struct fl_tokvec *tv, int32_t id)
{
    if (tv->n == tv->cap) {
        size_t cap = tv->cap ? tv->cap * 2 : 64;
        int32_t *v = realloc(tv->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        tv->v = v;
        tv->cap = cap;
    }
    tv->v[tv->n++] = id;
    return 0;
}

/* Up to 40 bytes of a file's string for a one-line message: control bytes
 * (a newline in a hostile file's token) shown as '?'. */
static const char *shown(char out[41], const char *s)
{
    size_t n = 0;
    for (; s[n] && n < 40; n++)
        out[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    out[n] = '\0';
    return out;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint32_t table_size(uint64_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

int32_t fl_tok_find(const struct fl_tokenizer *tok, const char *s, size_t len)
{
    for (uint32_t i = (uint32_t)hash_bytes(s, len) & tok->hash_mask;; i = (i + 1) & tok->hash_mask) {
        int32_t id = tok->hash[i];
        if (id < 0)
            return FL_TOKEN_NULL;
        if (tok->text_len[id] == len && memcmp(tok->text[id], s, len) == 0)
            return id;
    }
}

int32_t fl_tok_merge_rank(const struct fl_tokenizer *tok, int32_t left, int32_t right)
{
    if (!tok->merge_key)
        return -1;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint32_t i = (uint32_t)mix64(key) & tok->merge_mask;; i = (i + 1) & tok->merge_mask) {
        if (tok->merge_key[i] == UINT64_MAX)
            return -1;
        if (tok->merge_key[i] == key)
            return tok->merge_rank[i];
    }
}

/* ---- loading ------------------------------------------------------------ */

static int load_tokens(struct fl_tokenizer *tok, const struct gguf_file *f, struct fl_err *err)
{
    const struct gguf_value *v;
    int rc = gguf_get_arr(f, KEY("tokens"), &v);
    if (rc == -ENOENT)
        return fl_err_set(err, -ENOENT, "%s: no tokenizer.ggml.tokens", gguf_name(f));
    if (rc || v->arr.type != GGUF_VT_STRING || v->arr.n == 0 || v->arr.n > INT32_MAX / 4)
        return fl_err_set(err, -EINVAL, "%s: tokenizer.ggml.tokens is not a non-empty string array",
                          gguf_name(f));
    tok->n_vocab = (int32_t)v->arr.n;
    size_t n = (size_t)tok->n_vocab;
    tok->text = calloc(n, sizeof(*tok->text));
    tok->text_len = calloc(n, sizeof(*tok->text_len));
    tok->score = calloc(n, sizeof(*tok->score));
    tok->type = calloc(n, 1);
    tok->attr = calloc(n, 1);
    tok->eog = calloc(n, sizeof(*tok->eog));
    if (!tok->text || !tok->text_len || !tok->score || !tok->type || !tok->attr || !tok->eog)
        return -ENOMEM;
    const struct gguf_str *s = v->arr.elems;
    for (size_t i = 0; i < n; i++) {
        if (s[i].len > UINT32_MAX / 2)
            return fl_err_set(err, -EINVAL, "%s: token %zu is too long", gguf_name(f), i);
        /* llama.cpp names empty tokens so that they stay distinct. */
        char name[32];
        const char *src = s[i].data;
        size_t len = s[i].len;
        if (len == 0) {
            len = (size_t)snprintf(name, sizeof(name), "[EMPTY_%zu]", i);
            src = name;
        }
        if (!(tok->text[i] = malloc(len + 1)))
            return -ENOMEM;
        memcpy(tok->text[i], src, len);
        tok->text[i][len] = 0;
        tok->text_len[i] = (uint32_t)len;
    }
    return 0;
}

static int build_hash(struct fl_tokenizer *tok, const char *name, struct fl_err *err)
{
    uint32_t cap = table_size((uint64_t)tok->n_vocab);
    tok->hash = malloc(cap * sizeof(*tok->hash));
    if (!tok->hash)
        return -ENOMEM;
    memset(tok->hash, 0xff, cap * sizeof(*tok->hash));
    tok->hash_mask = cap - 1;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        uint32_t i = (uint32_t)hash_bytes(tok->text[id], tok->text_len[id]) & tok->hash_mask;
        for (; tok->hash[i] >= 0; i = (i + 1) & tok->hash_mask) {
            int32_t o = tok->hash[i];
            if (tok->text_len[o] == tok->text_len[id] &&
                memcmp(tok->text[o], tok->text[id], tok->text_len[id]) == 0)
                return fl_err_set(err, -EINVAL, "%s: tokens %d and %d are both '%s'", name, o,
                                  id, shown((char[41]){ 0 }, tok->text[id]));
        }
        tok->hash[i] = id;
    }
    return 0;
}

static int load_scores_types(struct fl_tokenizer *tok, const struct gguf_file *f,
                             struct fl_err *err)
{
    const struct gguf_value *v;
    int rc = gguf_get_arr(f, KEY("scores"), &v);
    if (rc == 0) {
        if (v->arr.type != GGUF_VT_FLOAT32 || v->arr.n != (uint64_t)tok->n_vocab)
            return fl_err_set(err, -EINVAL, "%s: tokenizer.ggml.scores has %llu entries (%s), tokens %d",
                              gguf_name(f), (unsigned long long)v->arr.n,
                              gguf_vtype_name(v->arr.type), tok->n_vocab);
        memcpy(tok->score, v->arr.elems, (size_t)tok->n_vocab * sizeof(float));
    } else if (rc != -ENOENT) {
        return fl_err_set(err, -EINVAL, "%s: tokenizer.ggml.scores is not an array", gguf_name(f));
    }
    memset(tok->type, FL_TOKTYPE_NORMAL, (size_t)tok->n_vocab);
    rc = gguf_get_arr(f, KEY("token_type"), &v);
    if (rc == 0) {
        if (v->arr.type != GGUF_VT_INT32 || v->arr.n != (uint64_t)tok->n_vocab)
            return fl_err_set(err, -EINVAL, "%s: tokenizer.ggml.token_type has %llu entries (%s), tokens %d",
                              gguf_name(f), (unsigned long long)v->arr.n,
                              gguf_vtype_name(v->arr.type), tok->n_vocab);
        const int32_t *t = v->arr.elems;
        for (int32_t i = 0; i < tok->n_vocab; i++)
            tok->type[i] = (uint8_t)(t[i] >= 0 && t[i] <= FL_TOKTYPE_BYTE ? t[i] : 0);
    } else if (rc != -ENOENT) {
        return fl_err_set(err, -EINVAL, "%s: tokenizer.ggml.token_type is not an array", gguf_name(f));
    }
    static const uint8_t attr_of[] = { FL_ATTR_UNDEFINED, FL_ATTR_NORMAL, FL_ATTR_UNKNOWN,
                                       FL_ATTR_CONTROL, FL_ATTR_USER_DEFINED, FL_ATTR_UNUSED,
                                       FL_ATTR_BYTE };
    for (int32_t i = 0; i < tok->n_vocab; i++)
        tok->attr[i] = attr_of[tok->type[i]];
    return 0;
}

/* Merges are "left right" (split at the first space after the first byte);
 * rank = index, the first occurrence of a pair wins. Both sides must be
 * tokens: a merge that names anything else is a broken vocabulary. */
static int load_merges(struct fl_tokenizer *tok, const struct gguf_file *f, struct fl_err *err)
{
    const struct gguf_value *v;
    int rc = gguf_get_arr(f, KEY("merges"), &v);
    if (rc == -ENOENT)
        return fl_err_set(err, -EINVAL, "%s: BPE vocabulary without tokenizer.ggml.merges", gguf_name(f));
    if (rc || v->arr.type != GGUF_VT_STRING || v->arr.n > INT32_MAX / 4)
        return fl_err_set(err, -EINVAL, "%s: tokenizer.ggml.merges is not a string array", gguf_name(f));
    uint32_t cap = table_size(v->arr.n);
    tok->merge_key = malloc(cap * sizeof(*tok->merge_key));
    tok->merge_rank = malloc(cap * sizeof(*tok->merge_rank));
    if (!tok->merge_key || !tok->merge_rank)
        return -ENOMEM;
    memset(tok->merge_key, 0xff, cap * sizeof(*tok->merge_key));
    tok->merge_mask = cap - 1;
    const struct gguf_str *s = v->arr.elems;
    for (uint64_t r = 0; r < v->arr.n; r++) {
        const char *sp = s[r].len > 1 ? memchr(s[r].data + 1, ' ', s[r].len - 1) : NULL;
        if (!sp)
            return fl_err_set(err, -EINVAL, "%s: merge %llu '%s' has no space", gguf_name(f),
                              (unsigned long long)r, shown((char[41]){ 0 }, s[r].data));
        int32_t a = fl_tok_find(tok, s[r].data, (size_t)(sp - s[r].data));
        int32_t b = fl_tok_find(tok, sp + 1, s[r].len - (size_t)(sp + 1 - s[r].data));
        if (a < 0 || b < 0)
            return fl_err_set(err, -EINVAL, "%s: merge %llu '%s' names a token not in the vocabulary",
                              gguf_name(f), (unsigned long long)r, shown((char[41]){ 0 }, s[r].data));
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint32_t i = (uint32_t)mix64(key) & tok->merge_mask;
        while (tok->merge_key[i] != UINT64_MAX && tok->merge_key[i] != key)
            i = (i + 1) & tok->merge_mask;
        if (tok->merge_key[i] == UINT64_MAX) {
            tok->merge_key[i] = key;
            tok->merge_rank[i] = (int32_t)r;
        }
    }
    return 0;
}

static int get_bool(const struct gguf_file *f, const char *key, bool *out, struct fl_err *err)
{
    int rc = gguf_get_bool(f, key, out);
    if (rc == -ENOENT || rc == 0)
        return 0;
    return fl_err_set(err, -EINVAL, "%s: %s is not a bool", gguf_name(f), key);
}

/* Special ids from the file override the model's defaults; an id the file
 * gives that is out of range is an error (llama.cpp only warns). */
static int load_special_ids(struct fl_tokenizer *tok, const struct gguf_file *f, struct fl_err *err)
{
    struct { const char *key; int32_t *id; } ids[] = {
        { KEY("bos_token_id"), &tok->bos },     { KEY("eos_token_id"), &tok->eos },
        { KEY("eot_token_id"), &tok->eot },     { KEY("eom_token_id"), &tok->eom },
        { KEY("unknown_token_id"), &tok->unk }, { KEY("padding_token_id"), &tok->pad },
        { KEY("fim_pre_token_id"), &tok->fim[FL_FIM_PRE] },
        { KEY("fim_suf_token_id"), &tok->fim[FL_FIM_SUF] },
        { KEY("fim_mid_token_id"), &tok->fim[FL_FIM_MID] },
        { KEY("fim_pad_token_id"), &tok->fim[FL_FIM_PAD] },
        { KEY("fim_rep_token_id"), &tok->fim[FL_FIM_REP] },
        { KEY("fim_sep_token_id"), &tok->fim[FL_FIM_SEP] },
        /* the older names, read after the new ones as llama.cpp does */
        { KEY("prefix_token_id"), &tok->fim[FL_FIM_PRE] },
        { KEY("suffix_token_id"), &tok->fim[FL_FIM_SUF] },
        { KEY("middle_token_id"), &tok->fim[FL_FIM_MID] },
    };
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        if (*ids[i].id >= tok->n_vocab)
            *ids[i].id = FL_TOKEN_NULL; /* a default the vocabulary is too small for */
        int64_t v;
        int rc = gguf_get_int(f, ids[i].key, &v);
        if (rc == -ENOENT)
            continue;
        if (rc)
            return fl_err_set(err, -EINVAL, "%s: %s is not an integer", gguf_name(f), ids[i].key);
        if (v < 0 || v >= tok->n_vocab)
            return fl_err_set(err, -EINVAL, "%s: %s = %lld is outside the vocabulary (%d tokens)",
                              gguf_name(f), ids[i].key, (long long)v, tok->n_vocab);
        *ids[i].id = (int32_t)v;
    }
    /* A BOS/EOS the file asks for must exist; one only implied by the model
     * or pre-tokenizer defaults is dropped when the vocabulary lacks it. */
    if (tok->bos < 0)
        tok->add_bos = false;
    if (tok->eos < 0)
        tok->add_eos = false;
    int rc = get_bool(f, KEY("add_bos_token"), &tok->add_bos, err);
    if (!rc)
        rc = get_bool(f, KEY("add_eos_token"), &tok->add_eos, err);
    if (!rc)
        rc = get_bool(f, KEY("add_space_prefix"), &tok->add_space_prefix, err);
    if (!rc && tok->add_bos && tok->bos < 0)
        rc = fl_err_set(err, -EINVAL, "%s: add_bos_token is set but there is no BOS token", gguf_name(f));
    if (!rc && tok->add_eos && tok->eos < 0)
        rc = fl_err_set(err, -EINVAL, "%s: add_eos_token is set but there is no EOS token", gguf_name(f));
    return rc;
}

static bool text_in(const char *text, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(text, *list) == 0)
            return true;
    return false;
}

/* FIM tokens the file does not name, known by their text (llama.cpp's
 * lists); they are CONTROL whatever the file says. The pad, repository and
 * file separator tokens end a generation. */
static void find_fim(struct fl_tokenizer *tok)
{
    static const char *const names[FL_FIM_N][10] = {
        [FL_FIM_PRE] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>",
                         "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>", NULL },
        [FL_FIM_SUF] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>",
                         "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>", NULL },
        [FL_FIM_MID] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
                         "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>", NULL },
        [FL_FIM_PAD] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL },
        [FL_FIM_REP] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
                         NULL },
        [FL_FIM_SEP] = { "<|file_sep|>", NULL },
    };
    for (int32_t id = 0; id < tok->n_vocab; id++)
        for (int r = 0; r < FL_FIM_N; r++)
            if (tok->fim[r] < 0 && text_in(tok->text[id], names[r])) {
                tok->fim[r] = id;
                tok->attr[id] |= FL_ATTR_CONTROL;
            }
    for (int r = FL_FIM_PAD; r <= FL_FIM_SEP; r++)
        if (tok->fim[r] >= 0)
            tok->eog[tok->fim[r]] = true;
}

/* End-of-turn tokens are known by their text (llama.cpp does the same); a
 * token so named that is not CONTROL is made CONTROL. */
static void mark_eog(struct fl_tokenizer *tok)
{
    static const char *const eot_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
        "<end_of_utterance>", NULL };
    static const char *const eog_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
        "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[", NULL };
    static const char *const harmony_names[] = {
        "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL };
    int32_t end_id = FL_TOKEN_NULL;
    bool has_return = false, has_call = false;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        const char *t = tok->text[id];
        if (tok->eot < 0 && text_in(t, eot_names)) {
            tok->eot = id;
            tok->attr[id] |= FL_ATTR_CONTROL;
        }
        if (text_in(t, eog_names)) {
            tok->eog[id] = true;
            tok->attr[id] |= FL_ATTR_CONTROL;
            has_return |= strcmp(t, "<|return|>") == 0;
            has_call |= strcmp(t, "<|call|>") == 0;
            if (strcmp(t, "<|end|>") == 0)
                end_id = id;
        }
        /* Harmony (gpt-oss) renders these structural tokens always. */
        if (text_in(t, harmony_names))
            tok->attr[id] = FL_ATTR_USER_DEFINED;
    }
    int32_t always[] = { tok->eos, tok->eot, tok->eom };
    for (size_t i = 0; i < 3; i++)
        if (always[i] >= 0)
            tok->eog[always[i]] = true;
    /* In Harmony, <|end|> closes a message, not the generation. */
    if (has_return && has_call && end_id >= 0) {
        tok->eog[end_id] = false;
        tok->attr[end_id] = FL_ATTR_USER_DEFINED;
    }
}

static int by_length_desc(const void *a, const void *b, void *arg)
{
    const struct fl_tokenizer *tok = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = tok->text_len[x], ly = tok->text_len[y];
    return lx != ly ? (lx > ly ? -1 : 1) : (x > y) - (x < y);
}

/* The texts matched in raw input before tokenizing, longest first. */
static int collect_special(struct fl_tokenizer *tok)
{
    tok->special = malloc((size_t)tok->n_vocab * sizeof(*tok->special));
    if (!tok->special)
        return -ENOMEM;
    for (int32_t id = 0; id < tok->n_vocab; id++)
        if (tok->attr[id] & (FL_ATTR_CONTROL | FL_ATTR_USER_DEFINED | FL_ATTR_UNKNOWN))
            tok->special[tok->n_special++] = id;
    qsort_r(tok->special, (size_t)tok->n_special, sizeof(*tok->special), by_length_desc, tok);
    return 0;
}

static int find_byte_tokens(struct fl_tokenizer *tok)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        if (tok->model == FL_TOK_BPE) {
            tok->byte_token[b] = fl_bpe_byte_token(tok, (uint8_t)b);
            continue;
        }
        char name[7] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0 };
        char one = (char)b;
        int32_t id = fl_tok_find(tok, name, 6);
        tok->byte_token[b] = id >= 0 ? id : fl_tok_find(tok, &one, 1);
    }
    return 0;
}

static char *unescape_spaces(const char *t, size_t len, uint32_t *out_len)
{
    char *p = malloc(len + 1);
    size_t n = 0;
    if (!p)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (i + 2 < len && memcmp(t + i, "\xe2\x96\x81", 3) == 0) {
            p[n++] = ' ';
            i += 2;
        } else {
            p[n++] = t[i];
        }
    }
    p[n] = 0;
    *out_len = (uint32_t)n;
    return p;
}

/* What each token renders as (special = true, no lstrip), computed once. */
static int render_piece(const struct fl_tokenizer *tok, int32_t id, char **out, uint32_t *len)
{
    const char *t = tok->text[id];
    uint32_t n = tok->text_len[id];
    uint8_t a = tok->attr[id];
    if (a & (FL_ATTR_UNKNOWN | FL_ATTR_CONTROL | FL_ATTR_USER_DEFINED)) {
        *out = strdup(t);
        *len = n;
    } else if (a & FL_ATTR_NORMAL) {
        *out = tok->model == FL_TOK_SPM ? unescape_spaces(t, n, len) : fl_bpe_decode_text(t, n, len);
    } else if (a & FL_ATTR_BYTE) {
        char hx[3] = { n > 3 ? t[3] : 0, n > 4 ? t[4] : 0, 0 };
        if (!(*out = malloc(2)))
            return -ENOMEM;
        (*out)[0] = (char)strtol(hx, NULL, 16);
        (*out)[1] = 0;
        *len = 1;
    } else {
        *out = strdup(""); /* unused / undefined tokens render as nothing */
        *len = 0;
    }
    return *out ? 0 : -ENOMEM;
}

static int render_pieces(struct fl_tokenizer *tok)
{
    tok->piece = calloc((size_t)tok->n_vocab, sizeof(*tok->piece));
    tok->piece_len = calloc((size_t)tok->n_vocab, sizeof(*tok->piece_len));
    if (!tok->piece || !tok->piece_len)
        return -ENOMEM;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        int rc = render_piece(tok, id, &tok->piece[id], &tok->piece_len[id]);
        if (rc)
            return rc;
    }
    return 0;
}

static void set_defaults(struct fl_tokenizer *tok)
{
    tok->eot = tok->eom = tok->unk = tok->pad = FL_TOKEN_NULL;
    for (int r = 0; r < FL_FIM_N; r++)
        tok->fim[r] = FL_TOKEN_NULL;
    if (tok->model == FL_TOK_SPM) {
        tok->bos = 1;
        tok->eos = 2;
        tok->unk = 0;
        tok->add_bos = true;
        tok->add_space_prefix = true;
    } else {
        tok->bos = tok->eos = 11; /* llama.cpp's gpt2 defaults */
    }
}

static int load_all(struct fl_tokenizer *tok, const struct gguf_file *f, struct fl_err *err)
{
    int rc = load_tokens(tok, f, err);
    if (!rc)
        rc = build_hash(tok, gguf_name(f), err);
    if (!rc)
        rc = load_scores_types(tok, f, err);
    if (!rc && tok->model == FL_TOK_BPE) {
        const char *pre = NULL;
        rc = load_merges(tok, f, err);
        if (!rc && gguf_get_str(f, KEY("pre"), &pre) != 0)
            pre = NULL;
        if (!rc)
            rc = fl_bpe_setup_pre(tok, pre, err);
    }
    if (!rc)
        rc = load_special_ids(tok, f, err);
    if (!rc) {
        mark_eog(tok);
        find_fim(tok);
        rc = collect_special(tok);
    }
    if (!rc)
        rc = find_byte_tokens(tok);
    if (!rc)
        rc = render_pieces(tok);
    return rc;
}

int fl_tokenizer_load(const struct gguf_file *f, struct fl_tokenizer **out, struct fl_err *err)
{
    const char *model;
    *out = NULL;
    int rc = gguf_get_str(f, KEY("model"), &model);
    if (rc == -ENOENT)
        return fl_err_set(err, -ENOENT, "%s: no tokenizer (tokenizer.ggml.model is absent)", gguf_name(f));
    if (rc)
        return fl_err_set(err, -EINVAL, "%s: tokenizer.ggml.model is not a string", gguf_name(f));
    struct fl_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok)
        return fl_err_set(err, -ENOMEM, "%s: out of memory loading the tokenizer", gguf_name(f));
    if (strcmp(model, "llama") == 0) {
        tok->model = FL_TOK_SPM;
        snprintf(tok->pre, sizeof(tok->pre), "default");
    } else if (strcmp(model, "gpt2") == 0) {
        tok->model = FL_TOK_BPE;
    } else {
        free(tok);
        return fl_err_set(err, -EINVAL, "%s: tokenizer model '%s' is not supported (llama, gpt2)",
                          gguf_name(f), shown((char[41]){ 0 }, model));
    }
    set_defaults(tok);
    rc = load_all(tok, f, err);
    if (rc) {
        if (rc == -ENOMEM)
            fl_err_set(err, rc, "%s: out of memory loading the tokenizer", gguf_name(f));
        fl_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return 0;
}

void fl_tokenizer_free(struct fl_tokenizer *tok)
{
    if (!tok)
        return;
    for (int32_t i = 0; i < tok->n_vocab; i++) {
        if (tok->text)
            free(tok->text[i]);
        if (tok->piece)
            free(tok->piece[i]);
    }
    free(tok->text);
    free(tok->piece);
    free(tok->piece_len);
    free(tok->text_len);
    free(tok->score);
    free(tok->type);
    free(tok->attr);
    free(tok->eog);
    free(tok->hash);
    free(tok->merge_key);
    free(tok->merge_rank);
    free(tok->special);
    fl_bpe_free_regex(tok);
    free(tok);
}

/* ---- accessors ---------------------------------------------------------- */

const char *fl_tokenizer_warning(const struct fl_tokenizer *tok)
{
    return tok->warning[0] ? tok->warning : NULL;
}

enum fl_tok_model fl_tokenizer_model(const struct fl_tokenizer *tok) { return tok->model; }
const char *fl_tokenizer_pre(const struct fl_tokenizer *tok) { return tok->pre; }
int32_t fl_n_vocab(const struct fl_tokenizer *tok) { return tok->n_vocab; }
int32_t fl_token_bos(const struct fl_tokenizer *tok) { return tok->bos; }
int32_t fl_token_eos(const struct fl_tokenizer *tok) { return tok->eos; }
int32_t fl_token_eot(const struct fl_tokenizer *tok) { return tok->eot; }
int32_t fl_token_unk(const struct fl_tokenizer *tok) { return tok->unk; }
int32_t fl_token_pad(const struct fl_tokenizer *tok) { return tok->pad; }
int32_t fl_token_fim(const struct fl_tokenizer *tok, enum fl_fim_role role)
{
    return role >= 0 && role < FL_FIM_N ? tok->fim[role] : FL_TOKEN_NULL;
}
bool fl_tokenizer_add_bos(const struct fl_tokenizer *tok) { return tok->add_bos; }
bool fl_tokenizer_add_eos(const struct fl_tokenizer *tok) { return tok->add_eos; }

bool fl_token_is_eog(const struct fl_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_vocab && tok->eog[id];
}

const char *fl_token_text(const struct fl_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_vocab ? tok->text[id] : NULL;
}

enum fl_token_type fl_token_type_of(const struct fl_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_vocab ? (enum fl_token_type)tok->type[id] : FL_TOKTYPE_UNDEFINED;
}

int32_t fl_token_lookup(const struct fl_tokenizer *tok, const char *text, size_t len)
{
    return fl_tok_find(tok, text, len);
}

/* ---- tokenize ----------------------------------------------------------- */

/* A piece of the input: raw text [off, off+len) or a special token. */
struct frag {
    int32_t id; /* FL_TOKEN_NULL for raw text */
    size_t off, len;
};

struct frags {
    struct frag *v;
    size_t n, cap;
};

static int frags_push(struct frags *f, int32_t id, size_t off, size_t len)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        struct frag *v = realloc(f->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (struct frag){ id, off, len };
    return 0;
}

/* Splits every raw fragment of in at each occurrence of token id's text. */
static int split_on(const struct fl_tokenizer *tok, int32_t id, const char *text,
                    const struct frags *in, struct frags *out)
{
    const char *s = tok->text[id];
    size_t sl = tok->text_len[id];
    int rc = 0;
    out->n = 0;
    for (size_t k = 0; k < in->n && !rc; k++) {
        struct frag f = in->v[k];
        if (f.id >= 0) {
            rc = frags_push(out, f.id, 0, 0);
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        const char *hit;
        while (!rc && (hit = memmem(text + pos, end - pos, s, sl))) {
            size_t at = (size_t)(hit - text);
            if (at > pos)
                rc = frags_push(out, FL_TOKEN_NULL, pos, at - pos);
            if (!rc)
                rc = frags_push(out, id, 0, 0);
            pos = at + sl;
        }
        if (!rc && pos < end)
            rc = frags_push(out, FL_TOKEN_NULL, pos, end - pos);
    }
    return rc;
}

/* llama.cpp's tokenizer_st_partition: user-defined tokens are always cut
 * out of the text; control and unknown ones only with parse_special. */
static int partition(const struct fl_tokenizer *tok, const char *text, size_t len,
                     bool parse_special, struct frags *out)
{
    struct frags a = { 0 }, b = { 0 };
    int rc = len ? frags_push(&a, FL_TOKEN_NULL, 0, len) : 0;
    for (int32_t i = 0; i < tok->n_special && !rc; i++) {
        int32_t id = tok->special[i];
        if (!parse_special && (tok->attr[id] & (FL_ATTR_CONTROL | FL_ATTR_UNKNOWN)))
            continue;
        rc = split_on(tok, id, text, &a, &b);
        struct frags t = a;
        a = b;
        b = t;
    }
    free(b.v);
    if (rc)
        free(a.v);
    else
        *out = a;
    return rc;
}

/* SPM: a space is prefixed to text that starts the input or follows a
 * special token, and every space becomes U+2581. */
static int spm_fragment(const struct fl_tokenizer *tok, const char *text, size_t len,
                        bool prefix, struct fl_tokvec *out)
{
    char *buf = malloc(3 * (len + 1));
    size_t n = 0;
    if (!buf)
        return -ENOMEM;
    for (size_t i = 0; i < len + prefix; i++) {
        char c = prefix ? (i == 0 ? ' ' : text[i - 1]) : text[i];
        if (c == ' ') {
            memcpy(buf + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            buf[n++] = c;
        }
    }
    int rc = fl_spm_tokenize(tok, buf, n, out);
    free(buf);
    return rc;
}

static int tokenize_frags(const struct fl_tokenizer *tok, const char *text, const struct frags *fr,
                          bool add_special, struct fl_tokvec *tv)
{
    int rc = 0;
    bool prev_special = true;
    if (add_special && tok->add_bos)
        rc = fl_tokvec_push(tv, tok->bos);
    for (size_t k = 0; k < fr->n && !rc; k++) {
        const struct frag *f = &fr->v[k];
        if (f->id >= 0) {
            rc = fl_tokvec_push(tv, f->id);
            prev_special = true;
        } else if (tok->model == FL_TOK_SPM) {
            rc = spm_fragment(tok, text + f->off, f->len, tok->add_space_prefix && prev_special, tv);
            prev_special = false;
        } else {
            rc = fl_bpe_tokenize(tok, text + f->off, f->len, tv);
        }
    }
    if (!rc && add_special && tok->add_eos)
        rc = fl_tokvec_push(tv, tok->eos);
    return rc;
}

/* The tokens of text in a vector the caller frees. */
static int tokenize_vec(const struct fl_tokenizer *tok, const char *text, size_t len,
                        bool add_special, bool parse_special, struct fl_tokvec *tv)
{
    struct frags fr = { 0 };
    int rc = partition(tok, text, len, parse_special, &fr);
    if (!rc)
        rc = tokenize_frags(tok, text, &fr, add_special, tv);
    free(fr.v);
    if (!rc && tv->n > INT_MAX)
        rc = -EOVERFLOW;
    return rc;
}

int fl_tokenize(const struct fl_tokenizer *tok, const char *text, size_t len,
                bool add_special, bool parse_special, int32_t *out, int max)
{
    if (!tok || (!text && len) || max < 0 || (!out && max > 0))
        return -EINVAL;
    struct fl_tokvec tv = { 0 };
    int rc = tokenize_vec(tok, text, len, add_special, parse_special, &tv);
    if (!rc) {
        rc = (int)tv.n;
        if (out && tv.n > (size_t)max)
            rc = -ENOSPC;
        else if (out && tv.n)
            memcpy(out, tv.v, tv.n * sizeof(*out));
    }
    free(tv.v);
    return rc;
}

int fl_tokenize_alloc(const struct fl_tokenizer *tok, const char *text, size_t len,
                      bool add_special, bool parse_special, int32_t **out)
{
    *out = NULL;
    if (!tok || (!text && len))
        return -EINVAL;
    struct fl_tokvec tv = { 0 };
    int rc = tokenize_vec(tok, text, len, add_special, parse_special, &tv);
    if (rc) {
        free(tv.v);
        return rc;
    }
    *out = tv.v ? tv.v : malloc(sizeof(int32_t)); /* never NULL on success */
    if (!*out)
        return -ENOMEM;
    return (int)tv.n;
}

/* ---- rendering ---------------------------------------------------------- */

int fl_token_to_piece(const struct fl_tokenizer *tok, int32_t id, char *buf, size_t cap,
                      bool lstrip, bool special)
{
    if (!tok || id < 0 || id >= tok->n_vocab || (!buf && cap))
        return -EINVAL;
    if (!special && (tok->attr[id] & (FL_ATTR_UNKNOWN | FL_ATTR_CONTROL)))
        return 0;
    const char *p = tok->piece[id];
    size_t n = tok->piece_len[id];
    if (lstrip && n && p[0] == ' ') {
        p++;
        n--;
    }
    if (!buf)
        return (int)n;
    if (n > cap)
        return -ENOSPC;
    memcpy(buf, p, n);
    return (int)n;
}

/* llama.cpp's clean-up for BPE vocabularies that ask for it: drop the space
 * before ? ! . , and before 's 'm 're 've, and the spaces around a lone '. */
static size_t clean_spaces(char *t, size_t total)
{
    size_t n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') && n > 0)
            n--;
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < total && t[i - 1] == ' ' && t[i + 1] == ' ') {
            n--;
            t[++i] = 0;
        }
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < total) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm')
                n--;
            else if (i + 2 < total && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e')))
                n--;
        }
        t[n++] = x;
    }
    return n;
}

static int render_all(const struct fl_tokenizer *tok, const int32_t *ids, int n_ids,
                      bool remove_special, bool unparse_special, char **out, size_t *out_len)
{
    bool remove_space = tok->add_space_prefix;
    if (remove_special && tok->add_bos && n_ids > 0 && ids[0] == tok->bos) {
        remove_space = false;
        ids++;
        n_ids--;
    }
    if (remove_special && tok->add_eos && n_ids > 0 && ids[n_ids - 1] == tok->eos)
        n_ids--;
    size_t total = 0;
    for (int i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n_vocab)
            return -EINVAL;
        total += tok->piece_len[ids[i]];
    }
    char *t = malloc(total + 1);
    if (!t)
        return -ENOMEM;
    size_t n = 0;
    for (int i = 0; i < n_ids; i++) {
        int k = fl_token_to_piece(tok, ids[i], t + n, total - n, remove_space, unparse_special);
        remove_space = false;
        n += (size_t)k;
    }
    if (tok->model == FL_TOK_BPE && tok->clean_spaces)
        n = clean_spaces(t, n);
    t[n] = 0;
    *out = t;
    *out_len = n;
    return 0;
}

int fl_detokenize(const struct fl_tokenizer *tok, const int32_t *ids, int n_ids,
                  char *buf, size_t cap, bool remove_special, bool unparse_special)
{
    if (!tok || n_ids < 0 || (!ids && n_ids) || (!buf && cap))
        return -EINVAL;
    char *t;
    size_t n;
    int rc = render_all(tok, ids, n_ids, remove_special, unparse_special, &t, &n);
    if (rc)
        return rc;
    if (n > INT_MAX - 1)
        rc = -EOVERFLOW;
    else if (!buf)
        rc = (int)n;
    else if (n >= cap)
        rc = -ENOSPC;
    else {
        memcpy(buf, t, n + 1);
        rc = (int)n;
    }
    free(t);
    return rc;
}

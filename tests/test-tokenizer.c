/* test-tokenizer.c: tokenizers against llama.cpp's own outputs.
 *
 *   - the reference prompts p1..p3 of tests/data/ref with the five tiny
 *     models: ids as llama.cpp evaluated them (the tests/data/ref summaries), and
 *     detokenizing gives the prompt bytes back;
 *   - llama.cpp's vocab test vectors (tests/data/vocab/ggml-vocab-*.gguf with
 *     .inp/.out, add_special = false, as its test-tokenizer-0 runs them);
 *   - hand-built vocabularies: inconsistent data is a clear error, special
 *     tokens, byte fallback, pieces and detokenize rules;
 *   - chat prompts ("chat" suite): their control tokens parsed (the
 *     formats' strings: tests/test-chat.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/chat.h"
#include "gguf/gguf.h"
#include "text/tokenizer-impl.h" /* fl_bpe_split, for the pre-tokenizer cases */
#include "text/tokenizer.h"
#include "tests/check.h"

static struct fl_tokenizer *load(const char *path)
{
    struct gguf_file *g;
    struct fl_tokenizer *tok = NULL;
    struct fl_err err = { { 0 } };
    if (gguf_open(path, &g, &err) != 0) {
        CHECK(0, "gguf_open %s: %s", path, err.msg);
        return NULL;
    }
    int rc = fl_tokenizer_load(g, &tok, &err);
    CHECK(rc == 0, "fl_tokenizer_load %s: %d %s", path, rc, err.msg);
    gguf_close(g); /* the tokenizer keeps its own copies */
    return tok;
}

/* Tokenizes text; returns a malloc'd array and its length in *n. */
static int32_t *tokenize(const struct fl_tokenizer *tok, const char *text, size_t len,
                         bool add_special, bool parse_special, int *n)
{
    int need = fl_tokenize(tok, text, len, add_special, parse_special, NULL, 0);
    if (need < 0) {
        *n = need;
        return NULL;
    }
    int32_t *ids = malloc(((size_t)need + 1) * sizeof(*ids));
    int got = fl_tokenize(tok, text, len, add_special, parse_special, ids, need);
    CHECK(got == need, "tokenize twice: %d then %d", need, got);
    if (need > 0)
        CHECK(fl_tokenize(tok, text, len, add_special, parse_special, ids, need - 1) == -ENOSPC,
              "too small a buffer is -ENOSPC");
    *n = got;
    return ids;
}

static int parse_ids(const char *s, int32_t *ids, int max)
{
    int n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s || n == max)
            return n;
        ids[n++] = (int32_t)v;
        s = end;
    }
}

static bool same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(*a)) == 0);
}

static void print_ids(const char *what, const int32_t *ids, int n)
{
    printf("    %s:", what);
    for (int i = 0; i < n; i++)
        printf(" %d", ids[i]);
    printf("\n");
}

/* The "prompt: " and "tokens: " lines of a tests/data/ref summary. */
static void check_ref_prompt(const struct fl_tokenizer *tok, const char *model, int p)
{
    char path[512];
    size_t len;
    snprintf(path, sizeof(path), "tests/data/ref/%s.p%d.txt", model, p);
    char *txt = check_read_file(path, &len);
    CHECK(txt, "cannot read %s", path);
    if (!txt)
        return;
    char *pl = strstr(txt, "prompt: "), *tl = strstr(txt, "\ntokens: ");
    CHECK(pl && tl, "%s: no prompt/tokens lines", path);
    if (!pl || !tl) {
        free(txt);
        return;
    }
    pl += 8;
    size_t plen = (size_t)(strchr(pl, '\n') - pl);
    int32_t want[256];
    int n_want = parse_ids(tl + 9, want, 256), n;
    int32_t *got = tokenize(tok, pl, plen, true, false, &n);
    bool ok = got && same_ids(got, n, want, n_want);
    CHECK(ok, "%s p%d: ids differ", model, p);
    if (!ok) {
        print_ids("want", want, n_want);
        print_ids("got ", got, n);
    }
    /* Back to the exact bytes: render without the BOS the file adds. */
    int skip = (n > 0 && fl_tokenizer_add_bos(tok) && got[0] == fl_token_bos(tok)) ? 1 : 0;
    char back[1024];
    int bl = got ? fl_detokenize(tok, got + skip, n - skip, back, sizeof(back), false, true) : -1;
    bool same = bl >= 0 && (size_t)bl == plen && plen < sizeof(back) && memcmp(back, pl, plen) == 0;
    CHECK(same, "%s p%d: detokenized to '%s'", model,
          p, bl >= 0 ? back : "(error)");
    printf("  %s p%d: %d tokens%s\n", model, p, n, ok ? " ok" : "");
    free(got);
    free(txt);
}

static void test_ref_models(void)
{
    static const char *const models[] = { "qwen3moe-tiny-F16", "qwen3moe-tiny-Q8_0",
                                          "mixtral-tiny-Q4_K_M", "deepseek2-tiny-F16",
                                          "gpt-oss-tiny-MXFP4" };
    printf("reference prompts (tests/data/ref)\n");
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        char path[512];
        snprintf(path, sizeof(path), "tests/data/%s.gguf", models[m]);
        struct fl_tokenizer *tok = load(path);
        if (!tok)
            continue;
        for (int p = 1; p <= 3; p++)
            check_ref_prompt(tok, models[m], p);
        fl_tokenizer_free(tok);
    }
}

/* llama.cpp's test-tokenizer-0 format: inputs separated by
 * "\n__ggml_vocab_test__\n", one line of ids per input. */
static void test_vocab(const char *name)
{
    char path[512], inp_path[520], out_path[520];
    size_t li = 0, lo = 0;
    snprintf(path, sizeof(path), "tests/data/vocab/ggml-vocab-%s.gguf", name);
    snprintf(inp_path, sizeof(inp_path), "%s.inp", path);
    snprintf(out_path, sizeof(out_path), "%s.out", path);
    char *inp = check_read_file(inp_path, &li), *out = check_read_file(out_path, &lo);
    struct fl_tokenizer *tok = load(path);
    CHECK(inp && out, "cannot read %s .inp/.out", path);
    int cases = 0, passed = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    char *ip = inp, *op = out;
    while (tok && inp && out && ip <= inp + li && *op) {
        char *next = strstr(ip, sep);
        size_t len = next ? (size_t)(next - ip) : strlen(ip);
        char *eol = strchr(op, '\n');
        if (eol)
            *eol = 0;
        int32_t want[4096];
        int n_want = parse_ids(op, want, 4096), n;
        int32_t *got = tokenize(tok, ip, len, false, false, &n);
        cases++;
        if (got && same_ids(got, n, want, n_want)) {
            passed++;
        } else {
            CHECK(0, "%s case %d: '%.*s'", name, cases, (int)len, ip);
            print_ids("want", want, n_want);
            print_ids("got ", got, n);
        }
        free(got);
        if (!next || !eol)
            break;
        ip = next + strlen(sep);
        op = eol + 1;
    }
    printf("  %s: %d/%d cases (pre '%s')\n", name, passed, cases,
           tok ? fl_tokenizer_pre(tok) : "?");
    CHECK(cases > 20, "%s: only %d cases read", name, cases);
    fl_tokenizer_free(tok);
    free(inp);
    free(out);
}

static void test_vocabs(void)
{
    static const char *const names[] = { "gpt-2", "starcoder", "deepseek-coder", "deepseek-llm",
                                         "llama-spm", "phi-3" };
    printf("llama.cpp vocab test vectors (tests/data/vocab)\n");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        test_vocab(names[i]);
}

/* Fill-in-the-middle tokens known by their text: each role's token is the
 * one whose stored text is the family's name for it. */
static void test_fim(void)
{
    static const struct { const char *name, *text[FL_FIM_N]; } v[] = {
        { "starcoder", { "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", NULL, NULL } },
        { "deepseek-coder", { "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", NULL, NULL, NULL } },
        { "gpt-2", { NULL } },
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "tests/data/vocab/ggml-vocab-%s.gguf", v[i].name);
        struct fl_tokenizer *tok = load(path);
        for (int r = 0; tok && r < FL_FIM_N; r++) {
            const int32_t id = fl_token_fim(tok, (enum fl_fim_role)r);
            const char *t = id >= 0 ? fl_token_text(tok, id) : NULL;
            CHECK(v[i].text[r] ? t && !strcmp(t, v[i].text[r]) : id == FL_TOKEN_NULL,
                  "%s: FIM role %d is %d (%s)", v[i].name, r, id, t ? t : "none");
            if (r >= FL_FIM_PAD && id >= 0)
                CHECK(fl_token_is_eog(tok, id), "%s: %s ends a generation", v[i].name, t);
        }
        fl_tokenizer_free(tok);
    }
    printf("  FIM tokens: StarCoder's, DeepSeek-Coder's, none in gpt-2's\n");
}

/* ---- hand-built GGUF files --------------------------------------------- */

struct gb {
    unsigned char *p;
    size_t n, cap;
    uint64_t n_kv;
};

static void gb_raw(struct gb *b, const void *src, size_t len)
{
    if (b->n + len > b->cap) {
        b->cap = (b->n + len) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, len);
    b->n += len;
}

static void gb_u32(struct gb *b, uint32_t v) { gb_raw(b, &v, 4); }
static void gb_u64(struct gb *b, uint64_t v) { gb_raw(b, &v, 8); }

static void gb_str(struct gb *b, const char *s)
{
    gb_u64(b, strlen(s));
    gb_raw(b, s, strlen(s));
}

static void kv_head(struct gb *b, const char *key, uint32_t type)
{
    gb_str(b, key);
    gb_u32(b, type);
    b->n_kv++;
}

static void kv_str(struct gb *b, const char *key, const char *v)
{
    kv_head(b, key, GGUF_VT_STRING);
    gb_str(b, v);
}

static void kv_u32(struct gb *b, const char *key, uint32_t v)
{
    kv_head(b, key, GGUF_VT_UINT32);
    gb_u32(b, v);
}

static void kv_bool(struct gb *b, const char *key, bool v)
{
    uint8_t x = v;
    kv_head(b, key, GGUF_VT_BOOL);
    gb_raw(b, &x, 1);
}

static void kv_strs(struct gb *b, const char *key, const char *const *v, size_t n)
{
    kv_head(b, key, GGUF_VT_ARRAY);
    gb_u32(b, GGUF_VT_STRING);
    gb_u64(b, n);
    for (size_t i = 0; i < n; i++)
        gb_str(b, v[i]);
}

static void kv_nums(struct gb *b, const char *key, uint32_t type, const void *v, size_t n)
{
    kv_head(b, key, GGUF_VT_ARRAY);
    gb_u32(b, type);
    gb_u64(b, n);
    gb_raw(b, v, n * 4);
}

/* Wraps the key/values in a GGUF v3 header without tensors and loads a
 * tokenizer from it. Returns fl_tokenizer_load's result. */
static int gb_load(struct gb *kvs, struct fl_tokenizer **tok, struct fl_err *err)
{
    struct gb f = { 0 };
    gb_raw(&f, "GGUF", 4);
    gb_u32(&f, 3);
    gb_u64(&f, 0);
    gb_u64(&f, kvs->n_kv);
    gb_raw(&f, kvs->p, kvs->n);
    while (f.n % 32)
        gb_raw(&f, "", 1);
    struct gguf_file *g = NULL;
    /* The GGUF reader already rejects some inconsistencies (array lengths
     * of known keys); either layer's error is the clear error wanted. */
    int rc = gguf_parse(f.p, f.n, f.n, "hand-built", &g, err);
    if (rc == 0) {
        rc = fl_tokenizer_load(g, tok, err);
        gguf_close(g);
    }
    free(f.p);
    free(kvs->p);
    *kvs = (struct gb){ 0 };
    return rc;
}

/* SPM: <unk> <s> </s>, byte tokens for 'A', 0xC3, 0xA9, then pieces. */
static const char *const spm_tokens[] = { "<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>",
                                          "\xe2\x96\x81", "a", "b", "\xe2\x96\x81\x61", "ab",
                                          "\xe2\x96\x81\x61\x62" };
static const float spm_scores[] = { 0, 0, 0, 0, 0, 0, -1, -2, -2, -1.5f, -0.5f, -3 };
static const int32_t spm_types[] = { 2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1 };
#define N_SPM 12

enum { BAD_NONE, BAD_SCORES, BAD_TYPES, BAD_BOS, BAD_MODEL, BAD_DUP, BAD_NO_TOKENS };

static void spm_kvs(struct gb *b, int bad)
{
    const char *toks[N_SPM];
    memcpy(toks, spm_tokens, sizeof(toks));
    if (bad == BAD_DUP)
        toks[8] = "a";
    kv_str(b, "tokenizer.ggml.model", bad == BAD_MODEL ? "bert" : "llama");
    if (bad != BAD_NO_TOKENS)
        kv_strs(b, "tokenizer.ggml.tokens", toks, N_SPM);
    kv_nums(b, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, spm_scores, N_SPM - (bad == BAD_SCORES));
    kv_nums(b, "tokenizer.ggml.token_type", GGUF_VT_INT32, spm_types, N_SPM - (bad == BAD_TYPES) * 2);
    kv_u32(b, "tokenizer.ggml.bos_token_id", bad == BAD_BOS ? 99 : 1);
    kv_u32(b, "tokenizer.ggml.eos_token_id", 2);
    kv_bool(b, "tokenizer.ggml.add_bos_token", true);
}

static void expect_ids(const struct fl_tokenizer *tok, const char *text, bool add, bool parse,
                       const int32_t *want, int n_want, const char *what)
{
    int n;
    int32_t *got = tokenize(tok, text, strlen(text), add, parse, &n);
    bool ok = got && same_ids(got, n, want, n_want);
    CHECK(ok, "%s: '%s'", what, text);
    if (!ok) {
        print_ids("want", want, n_want);
        print_ids("got ", got, n);
    }
    free(got);
}

static void expect_text(const struct fl_tokenizer *tok, const int32_t *ids, int n, bool rm,
                        bool unparse, const char *want, const char *what)
{
    char buf[256];
    int len = fl_detokenize(tok, ids, n, buf, sizeof(buf), rm, unparse);
    CHECK(len == (int)strlen(want) && strcmp(buf, want) == 0, "%s: got '%s' (%d), want '%s'",
          what, len >= 0 ? buf : "", len, want);
    CHECK(fl_detokenize(tok, ids, n, NULL, 0, rm, unparse) == len, "%s: size query", what);
}

static void test_spm_hand(void)
{
    struct gb b = { 0 };
    struct fl_tokenizer *tok = NULL;
    struct fl_err err = { { 0 } };
    spm_kvs(&b, BAD_NONE);
    int rc = gb_load(&b, &tok, &err);
    CHECK(rc == 0, "hand-built SPM: %s", err.msg);
    if (rc)
        return;
    /* "▁ab": ab (-0.5) merges before ▁a (-1.5), then ▁ab (-3) */
    expect_ids(tok, "ab", true, false, (int32_t[]){ 1, 11 }, 2, "spm merges by score");
    /* "▁aA": ▁a, and A is no piece -> its byte token */
    expect_ids(tok, "aA", true, false, (int32_t[]){ 1, 9, 3 }, 3, "spm byte fallback");
    expect_ids(tok, "\xc3\xa9", false, false, (int32_t[]){ 6, 4, 5 }, 3, "spm multi-byte fallback");
    /* no byte token for '<', 's', '>': the unknown token stands in */
    expect_ids(tok, "<s>ab", true, false, (int32_t[]){ 1, 6, 0, 0, 0, 10 }, 6, "spm <s> as text");
    /* parsed, <s> is a token and the text after it gets the space prefix */
    expect_ids(tok, "<s>ab", true, true, (int32_t[]){ 1, 1, 11 }, 3, "spm <s> parsed");
    expect_ids(tok, "", true, false, (int32_t[]){ 1 }, 1, "spm empty text is just BOS");
    expect_ids(tok, "", false, false, NULL, 0, "spm empty text");
    expect_text(tok, (int32_t[]){ 9, 3 }, 2, false, false, "aA", "spm first piece loses its space");
    expect_text(tok, (int32_t[]){ 1, 9, 3 }, 3, true, false, " aA", "spm after a removed BOS");
    expect_text(tok, (int32_t[]){ 1, 9, 3 }, 3, false, true, "<s> aA", "spm BOS rendered");
    expect_text(tok, (int32_t[]){ 6, 4, 5, 2 }, 4, false, false, "\xc3\xa9", "spm bytes, EOS hidden");
    char piece[8];
    CHECK(fl_token_to_piece(tok, 9, piece, sizeof(piece), false, false) == 2 &&
              memcmp(piece, " a", 2) == 0, "piece of ▁a is ' a'");
    CHECK(fl_token_to_piece(tok, 9, piece, sizeof(piece), true, false) == 1, "lstrip drops it");
    CHECK(fl_token_to_piece(tok, 1, piece, sizeof(piece), false, false) == 0, "control hidden");
    CHECK(fl_token_to_piece(tok, 1, piece, 2, false, true) == -ENOSPC, "small buffer -ENOSPC");
    CHECK(fl_token_to_piece(tok, 12, piece, 8, false, true) == -EINVAL, "bad id -EINVAL");
    CHECK(fl_token_is_eog(tok, 2) && !fl_token_is_eog(tok, 1), "EOS ends generation, BOS not");
    CHECK(fl_token_bos(tok) == 1 && fl_token_eos(tok) == 2 && fl_token_unk(tok) == 0,
          "special ids");
    CHECK(fl_n_vocab(tok) == N_SPM, "n_vocab");
    printf("  hand-built SPM vocabulary ok\n");
    fl_tokenizer_free(tok);
}

/* Byte-level BPE: Ġ is the space symbol (U+0120), Ċ the newline (U+010A). */
static const char *const bpe_tokens[] = { "a", "b", "c", "\xc4\xa0", "ab", "\xc4\xa0\x61\x62",
                                          "<|endoftext|>", "<|im_start|>", "\xc4\x8a", "!",
                                          "\xe4\xb8\xad" /* not in the byte alphabet */ };
static const int32_t bpe_types[] = { 1, 1, 1, 1, 1, 1, 3, 3, 1, 1, 1 };
#define N_BPE 11

static void bpe_kvs(struct gb *b, const char *pre, bool bad_merge)
{
    const char *merges[] = { "a b", bad_merge ? "\xc4\xa0 zz" : "\xc4\xa0 ab" };
    kv_str(b, "tokenizer.ggml.model", "gpt2");
    if (pre)
        kv_str(b, "tokenizer.ggml.pre", pre);
    kv_strs(b, "tokenizer.ggml.tokens", bpe_tokens, N_BPE);
    kv_nums(b, "tokenizer.ggml.token_type", GGUF_VT_INT32, bpe_types, N_BPE);
    kv_strs(b, "tokenizer.ggml.merges", merges, 2);
    kv_u32(b, "tokenizer.ggml.eos_token_id", 6);
}

static void test_bpe_hand(void)
{
    struct gb b = { 0 };
    struct fl_tokenizer *tok = NULL;
    struct fl_err err = { { 0 } };
    bpe_kvs(&b, "gpt-2", false);
    int rc = gb_load(&b, &tok, &err);
    CHECK(rc == 0, "hand-built BPE: %s", err.msg);
    if (rc)
        return;
    CHECK(fl_tokenizer_warning(tok) == NULL, "gpt-2 pre: no warning");
    expect_ids(tok, "ab ab", true, false, (int32_t[]){ 4, 5 }, 2, "bpe merges by rank");
    expect_ids(tok, "abc", false, false, (int32_t[]){ 4, 2 }, 2, "bpe leftover symbol");
    /* unparsed, the control text has no tokens and vanishes (as in llama.cpp) */
    expect_ids(tok, "<|endoftext|>ab", false, false, (int32_t[]){ 4 }, 1, "bpe control as text");
    expect_ids(tok, "<|endoftext|>ab", false, true, (int32_t[]){ 6, 4 }, 2, "bpe control parsed");
    expect_ids(tok, "a\n", false, false, (int32_t[]){ 0, 8 }, 2, "bpe newline symbol");
    expect_text(tok, (int32_t[]){ 4, 5, 9 }, 3, false, false, "ab ab!", "bpe render");
    /* gpt-2 vocabularies clean " !" to "!" as llama.cpp does */
    expect_text(tok, (int32_t[]){ 4, 3, 9 }, 3, false, false, "ab!", "bpe clean-up");
    expect_text(tok, (int32_t[]){ 7, 4, 6 }, 3, false, true, "<|im_start|>ab<|endoftext|>",
                "bpe specials rendered");
    expect_text(tok, (int32_t[]){ 7, 4, 6 }, 3, false, false, "ab", "bpe specials hidden");
    expect_text(tok, (int32_t[]){ 10 }, 1, false, false, "[UNK_BYTE_0xe4b8ad\xe4\xb8\xad]",
                "bpe symbol outside the byte alphabet");
    CHECK(fl_token_is_eog(tok, 6) && fl_token_eot(tok) == 6, "<|endoftext|> is EOT/EOG");
    CHECK(fl_token_bos(tok) == FL_TOKEN_NULL, "gpt2's default BOS 11 is out of range: none");
    fl_tokenizer_free(tok);

    bpe_kvs(&b, "no-such-pre", false);
    rc = gb_load(&b, &tok, &err);
    CHECK(rc == 0 && fl_tokenizer_warning(tok) && strcmp(fl_tokenizer_pre(tok), "default") == 0,
          "unknown pre: default with a warning");
    if (rc == 0) {
        printf("  unknown pre warns: %s\n", fl_tokenizer_warning(tok));
        expect_ids(tok, "ab ab", false, false, (int32_t[]){ 4, 5 }, 2, "default pre");
        fl_tokenizer_free(tok);
    }
    printf("  hand-built BPE vocabulary ok\n");
}

static void expect_error(struct gb *b, int want_rc, const char *what)
{
    struct fl_tokenizer *tok = NULL;
    struct fl_err err = { { 0 } };
    int rc = gb_load(b, &tok, &err);
    CHECK(rc == want_rc && !tok && err.msg[0], "%s: rc %d (want %d), '%s'", what, rc, want_rc,
          err.msg);
    printf("  %s -> %s\n", what, err.msg);
    fl_tokenizer_free(tok);
}

static void test_bad_vocab(void)
{
    struct gb b = { 0 };
    spm_kvs(&b, BAD_SCORES);
    expect_error(&b, -EINVAL, "scores shorter than tokens");
    spm_kvs(&b, BAD_TYPES);
    expect_error(&b, -EINVAL, "token types shorter than tokens");
    spm_kvs(&b, BAD_BOS);
    expect_error(&b, -EINVAL, "BOS id out of range");
    spm_kvs(&b, BAD_MODEL);
    expect_error(&b, -EINVAL, "unsupported model");
    spm_kvs(&b, BAD_DUP);
    expect_error(&b, -EINVAL, "duplicate token");
    spm_kvs(&b, BAD_NO_TOKENS);
    expect_error(&b, -ENOENT, "no token list");
    bpe_kvs(&b, "gpt-2", true);
    expect_error(&b, -EINVAL, "merge naming an absent token");
    kv_str(&b, "general.architecture", "llama");
    expect_error(&b, -ENOENT, "no tokenizer at all");
}

/* A chat prompt tokenized with parse_special keeps its control tokens. */
static void test_chat_tokens(void)
{
    struct fl_tokenizer *tok = load("tests/data/gpt-oss-tiny-MXFP4.gguf");
    if (!tok)
        return;
    const struct fl_chat_msg m[] = { { .role = "user", .content = "Hi<|endoftext|>" } };
    char *text = NULL;
    CHECK(fl_chat_apply(FL_CHAT_CHATML, m, 1, true, &text) > 0, "chatml render");
    int n_parsed, n_plain;
    int32_t *parsed = tokenize(tok, text, strlen(text), true, true, &n_parsed);
    int32_t *plain = tokenize(tok, text, strlen(text), true, false, &n_plain);
    int eot_parsed = 0, eot_plain = 0;
    for (int i = 0; i < n_parsed; i++)
        eot_parsed += parsed[i] == 1024;
    for (int i = 0; i < n_plain; i++)
        eot_plain += plain[i] == 1024;
    CHECK(eot_parsed == 1 && eot_plain == 0, "<|endoftext|> parsed %d times, plain %d times",
          eot_parsed, eot_plain);
    char back[512];
    int bl = fl_detokenize(tok, parsed, n_parsed, back, sizeof(back), false, true);
    CHECK(bl > 0 && strcmp(back, text) == 0, "chat prompt round trip: '%s'", back);
    printf("  chat prompt with a control token: %d tokens parsed, %d plain\n", n_parsed, n_plain);
    free(parsed);
    free(plain);
    free(text);
    fl_tokenizer_free(tok);
}

/* ---- pre-tokenizer splits ------------------------------------------------ */

/* Words (joined by \x01) that llama.cpp's unicode_regex_split gives for
 * mixed inputs: malformed UTF-8, surrogates, non-ASCII spaces (NBSP, NEL,
 * U+3000), marks, '~', digits of other scripts. Produced with llama.cpp's
 * own unicode.cpp at the reference commit. */
static const struct {
    const char *pre, *text, *words;
} split_cases[] = {
    { "gpt-2", " \na\n\xed\xa0\x80k\xf0\xa0\x80\x80",
      " \x01\n\x01\x61\x01\n\x01\xed\xa0\x80\x01k\xf0\xa0\x80\x80" },
    { "gpt-2", "  \xea\xb0\x80(  ?\xe3\x81\xb2\xee\x80\x80're\xf0\xa0\x80\x80!s",
      " \x01 \xea\xb0\x80\x01(\x01 \x01 ?\x01\xe3\x81\xb2\x01\xee\x80\x80'\x01re\xf0\xa0\x80\x80\x01!\x01s" },
    { "gpt-2", "\xe3\x80\x82\xc2\xa0\x09`.\xf0\xa0\x80\x80`k'Z're\xea\xb0\x80",
      "\xe3\x80\x82\x01\xc2\xa0\x01\x09\x01`.\x01\xf0\xa0\x80\x80\x01`\x01k\x01'\x01Z\x01're\x01\xea\xb0\x80" },
    { "gpt-2", "  \xe4\xb8\xad\xc3\xa9\xe4\xb8\xad.\x0d'!\xc5\xbf\xea\xb0\x80 \x80",
      " \x01 \xe4\xb8\xad\xc3\xa9\xe4\xb8\xad\x01.\x01\x0d\x01'!\x01\xc5\xbf\xea\xb0\x80\x01 \xef\xbf\xbd" },
    { "gpt-2", "\xc2\x85\xe3\x80\x82's\xee\x80\x80   $\xe4\xb8\xad\xe2\x80\x8d$$",
      "\xc2\x85\x01\xe3\x80\x82'\x01s\x01\xee\x80\x80\x01  \x01 $\x01\xe4\xb8\xad\x01\xe2\x80\x8d$$" },
    { "gpt-2", "\xe3\x81\xb2\xff!\xf0\x9f\xa6\x99s\xc3\xa9(\xea\xb0\x80(?",
      "\xe3\x81\xb2\x01\xef\xbf\xbd!\xf0\x9f\xa6\x99\x01s\xc3\xa9\x01(\x01\xea\xb0\x80\x01(?" },
    { "llama3", "\xe2\x80\x8d\xee\x80\x80k\x09  !'T",
      "\xe2\x80\x8d\xee\x80\x80\x01k\x01\x09 \x01 !'\x01T" },
    { "llama3", "\n\xd0\x96\x65\xcc\x81\xe3\x80\x80\xff\xf0\x9f\xa6\x99",
      "\n\x01\xd0\x96\x65\x01\xcc\x81\x01\xe3\x80\x80\x01\xef\xbf\xbd\xf0\x9f\xa6\x99" },
    { "llama3", "\xee\x80\x80!\na.\x0d\x37$\xc2\xb2 \xd0\x96's\xc3\xa9",
      "\xee\x80\x80!\n\x01\x61\x01.\x0d\x01\x37\x01$\x01\xc2\xb2\x01 \xd0\x96\x01's\x01\xc3\xa9" },
    { "llama3", "\xef\xbc\x81\x65\xcc\x81\xf0\x9f\xa6\x99\xee\x80\x80|\nZ \xe3\x80\x85  ",
      "\xef\xbc\x81\x65\x01\xcc\x81\xf0\x9f\xa6\x99\xee\x80\x80|\n\x01Z\x01 \xe3\x80\x85\x01  " },
    { "llama3", "\xd9\xa3\xe3\x80\x82\xe4\xb8\xad\xc2\x85$|\xd9\xa3\xc2\xb2? ",
      "\xd9\xa3\x01\xe3\x80\x82\xe4\xb8\xad\x01\xc2\x85\x01$|\x01\xd9\xa3\xc2\xb2\x01?\x01 " },
    { "llama3", "Z\xc2\x85\x80\x30 \xc2\x85Z\n\xef\xbc\x81\n",
      "Z\x01\xc2\x85\x01\xef\xbf\xbd\x01\x30\x01 \x01\xc2\x85Z\x01\n\x01\xef\xbc\x81\n" },
    { "qwen2", "~?\xee\x80\x80\xd0\x96\nse\xcc\x81\xd9\xa3\xc2\x85s\xff",
      "~?\xee\x80\x80\x01\xd0\x96\x01\n\x01se\x01\xcc\x81\x01\xd9\xa3\x01\xc2\x85s\x01\xef\xbf\xbd" },
    { "qwen2", "`\xc5\xbf '\xc2\x85 ",
      "`\xc5\xbf\x01 '\x01\xc2\x85 " },
    { "qwen2", "\xf0\x9f\xa6\x99\xc2\x85\x30`\n$",
      "\xf0\x9f\xa6\x99\x01\xc2\x85\x01\x30\x01`\n\x01$" },
    { "qwen2", "\xe1\xbd\xbd`'re\n!\xe1\xbd\xbd",
      "\xe1\xbd\xbd\x01`'\x01re\x01\n\x01!\xe1\xbd\xbd" },
    { "qwen2", "!  \xe1\xbd\xbd's'T\xe4\xb8\xad  \xe3\x80\x80k!$~\xc2\xb2",
      "!\x01 \x01 \xe1\xbd\xbd\x01's\x01'T\x01\xe4\xb8\xad\x01  \x01\xe3\x80\x80k\x01!$~\x01\xc2\xb2" },
    { "qwen2", "\xed\xa0\x80\x09's\xc2\x85  `",
      "\xed\xa0\x80\x01\x09\x01's\x01\xc2\x85 \x01 `" },
    /* qwen35 (Qwen3.5): marks join letters ([\\p{L}\\p{M}]+), unlike qwen2 */
    { "qwen35", "~?\xee\x80\x80\xd0\x96\x0ase\xcc\x81\xd9\xa3\xc2\x85s\xff",
      "~?\xee\x80\x80\x01\xd0\x96\x01\x0a\x01se\xcc\x81\x01\xd9\xa3\x01\xc2\x85s\x01\xef\xbf\xbd" },
    { "qwen35", "\xe1\xbd\xbd`'re\x0a!\xe1\xbd\xbd",
      "\xe1\xbd\xbd\x01`'\x01re\x01\x0a\x01!\xe1\xbd\xbd" },
    { "qwen35", "!  \xe1\xbd\xbd's'T\xe4\xb8\xad  \xe3\x80\x80k!$~\xc2\xb2",
      "!\x01 \x01 \xe1\xbd\xbd\x01's\x01'T\x01\xe4\xb8\xad\x01  \x01\xe3\x80\x80k\x01!$~\x01\xc2\xb2" },
    { "qwen35", "cafe\xcc\x81 na\xc3\xafve \xe0\xa4\x95\xe0\xa4\xbf\xe0\xa4\xa4\xe0\xa4\xbe\xe0\xa4\xac 123 \xcc\x81x",
      "cafe\xcc\x81\x01 na\xc3\xafve\x01 \xe0\xa4\x95\xe0\xa4\xbf\xe0\xa4\xa4\xe0\xa4\xbe\xe0\xa4\xac\x01 \x01\x31\x01\x32\x01\x33\x01 \xcc\x81x" },
    { "qwen35", " \xd8\xa8\xd9\x90\xd8\xb3\xd9\x92\xd9\x85\xd9\x90 'Ll \xe0\xb8\x81\xe0\xb9\x87\x0a\x0a  a\xcc\x81\xcc\x82!",
      " \xd8\xa8\xd9\x90\xd8\xb3\xd9\x92\xd9\x85\xd9\x90\x01 '\x01Ll\x01 \xe0\xb8\x81\xe0\xb9\x87\x01\x0a\x0a\x01 \x01 a\xcc\x81\xcc\x82\x01!" },
    { "deepseek-llm", "\xc5\xbf+\xe4\xb8\xad\xe3\x80\x82~'s\xc3\xa9\x31\x32\x33~\xe1\xbd\xbd\xe4\xb8\xad\xea\xb0\x80\x30",
      "\xc5\xbf\x01+\x01\xe4\xb8\xad\x01\xe3\x80\x82\x01~'\x01s\x01\xc3\xa9\x01\x31\x32\x33\x01~\x01\xe1\xbd\xbd\x01\xe4\xb8\xad\xea\xb0\x80\x01\x30" },
    { "deepseek-llm", " \xea\xb0\x80 \xffZ \xc3\xa9\x0dk\xe4\xb8\xad  k",
      " \x01\xea\xb0\x80\x01 \xef\xbf\xbd\x01Z\x01 \xc3\xa9\x01\x0d\x01k\x01\xe4\xb8\xad\x01 \x01 k" },
    { "deepseek-llm", " k\xc2\x85\x37\x37(?",
      " k\x01\xc2\x85\x01\x37\x37\x01(?" },
    { "deepseek-llm", "\xe2\x80\x8d\xff\x61\x61\xe2\x80\x8d\xf0\xa0\x80\x80\xef\xbc\x81$\xea\xb0\x80\xc5\xbfk\xc2\xa0",
      "\xe2\x80\x8d\x01\xef\xbf\xbd\x01\x61\x61\x01\xe2\x80\x8d\x01\xf0\xa0\x80\x80\x01\xef\xbc\x81$\x01\xea\xb0\x80\x01\xc5\xbf\x01k\x01\xc2\xa0" },
    { "deepseek-llm", "123\xc2\xa0\xee\x80\x80\xd9\xa3\xe3\x80\x82\x31\x32\x33\xc2\x85\x09k",
      "123\x01\xc2\xa0\xee\x80\x80\x01\xd9\xa3\x01\xe3\x80\x82\x01\x31\x32\x33\x01\xc2\x85\x01\x09k" },
    { "deepseek-llm", "'re! Z'.\ne\xcc\x81\x61\x61\xc2\x85",
      "'\x01re\x01!\x01 Z\x01'.\x01\n\x01\x65\x01\xcc\x81\x01\x61\x61\x01\xc2\x85" },
    { "deepseek-coder", "Z'sk\x0d\x80 (\xed\xa0\x80!\xea\xb0\x80\xc5\xbf\n\xd0\x96",
      "Z\x01'\x01sk\x01\x0d\x01\xef\xbf\xbd\x01 (\x01\xed\xa0\x80\x01!\x01\xea\xb0\x80\x01\xc5\xbf\x01\n\x01\xd0\x96" },
    { "deepseek-coder", "(\xc3\xa9 \x0d\xf0\x9f\xa6\x99\xe1\xbd\xbd?",
      "(\x01\xc3\xa9\x01 \x01\x0d\x01\xf0\x9f\xa6\x99\x01\xe1\xbd\xbd\x01?" },
    { "deepseek-coder", "e\xcc\x81\x61\xc5\xbf'Te\xcc\x81\x65\xcc\x81\xd9\xa3\xe3\x80\x82.\xc5\xbf\xea\xb0\x80'T",
      "e\x01\xcc\x81\x01\x61\xc5\xbf\x01'\x01Te\x01\xcc\x81\x01\x65\x01\xcc\x81\x01\xd9\xa3\x01\xe3\x80\x82\x01.\x01\xc5\xbf\x01\xea\xb0\x80\x01'\x01T" },
    { "deepseek-coder", "$7\xe1\xbd\xbd (7",
      "$\x01\x37\x01\xe1\xbd\xbd\x01 (\x01\x37" },
    { "deepseek-coder", "|`\xc2\xa0Z0\xe3\x80\x82'T\xe3\x81\xb2\x09~\xef\xbc\x81\xe3\x80\x82",
      "|`\x01\xc2\xa0Z\x01\x30\x01\xe3\x80\x82\x01'\x01T\x01\xe3\x81\xb2\x01\x09~\x01\xef\xbc\x81\x01\xe3\x80\x82" },
    { "deepseek-coder", "  \xf0\x9f\xa6\x99\xc2\xb2\x0d\xf0\xa0\x80\x80\xf0\x9f\xa6\x99\xe3\x80\x85\xc2\x85\xe3\x80\x85\xe3\x81\xb2\xc2\xb2",
      "  \xf0\x9f\xa6\x99\x01\xc2\xb2\x01\x0d\x01\xf0\xa0\x80\x80\x01\xf0\x9f\xa6\x99\x01\xe3\x80\x85\x01\xc2\x85\x01\xe3\x80\x85\xe3\x81\xb2\x01\xc2\xb2" },
    { "deepseek-v3", "\xd9\xa3k\xe3\x81\xb2 \xf0\xa0\x80\x80\xee\x80\x80's \xef\xbc\x81",
      "\xd9\xa3\x01k\x01\xe3\x81\xb2\x01 \xf0\xa0\x80\x80\x01\xee\x80\x80\x01's\x01 \xef\xbc\x81" },
    { "deepseek-v3", "~'\xc5\xbf\xe2\x80\x8d\xf0\xa0\x80\x80 123\xd9\xa3\xea\xb0\x80$",
      "~\x01'\x01\xc5\xbf\x01\xe2\x80\x8d\xf0\xa0\x80\x80\x01 \x01\x31\x32\x33\x01\xd9\xa3\x01\xea\xb0\x80\x01$" },
    { "deepseek-v3", "'s\xea\xb0\x80'reZ\xe3\x80\x80.\x09",
      "'s\x01\xea\xb0\x80\x01'reZ\x01\xe3\x80\x80\x01.\x01\x09" },
    { "deepseek-v3", "\x09?s$\xef\xbc\x81\x61\xd9\xa3\xc5\xbf",
      "\x09\x01?s\x01$\xef\xbc\x81\x01\x61\x01\xd9\xa3\x01\xc5\xbf" },
    { "deepseek-v3", "e\xcc\x81\xed\xa0\x80\xd0\x96\x31\x32\x33'T('\xe2\x80\x8d`\xff",
      "e\xcc\x81\x01\xed\xa0\x80\xd0\x96\x01\x31\x32\x33\x01'T\x01('\x01\xe2\x80\x8d\x01`\xef\xbf\xbd" },
    { "deepseek-v3", ".'\xee\x80\x80\n\xed\xa0\x80'\xe3\x80\x85",
      ".'\x01\xee\x80\x80\x01\n\x01\xed\xa0\x80\x01'\x01\xe3\x80\x85" },
    { "gpt-4o", "|\xf0\xa0\x80\x80\xe3\x80\x80\xed\xa0\x80\xc5\xbf\xc2\x85?s",
      "|\xf0\xa0\x80\x80\x01\xe3\x80\x80\x01\xed\xa0\x80\xc5\xbf\x01\xc2\x85\x01?s" },
    { "gpt-4o", "\xea\xb0\x80\xe3\x81\xb2`\xe3\x80\x85\xe3\x80\x80\xee\x80\x80're'T's\xe2\x80\x8d",
      "\xea\xb0\x80\xe3\x81\xb2\x01`\xe3\x80\x85\x01\xe3\x80\x80\x01\xee\x80\x80'\x01re'T\x01's\x01\xe2\x80\x8d" },
    { "gpt-4o", "sZ\x09\xed\xa0\x80\xe4\xb8\xad\xef\xbc\x81",
      "s\x01Z\x01\x09\x01\xed\xa0\x80\xe4\xb8\xad\x01\xef\xbc\x81" },
    { "gpt-4o", "\xc5\xbf\xd9\xa3'\xe3\x81\xb2~\xea\xb0\x80(\xc2\x85",
      "\xc5\xbf\x01\xd9\xa3\x01'\xe3\x81\xb2\x01~\xea\xb0\x80\x01(\x01\xc2\x85" },
    { "gpt-4o", "\n\xc3\xa9\xe2\x80\x8d\x61\xc5\xbf`?\x09\xe2\x82\xc2\xa0\x30\n",
      "\n\x01\xc3\xa9\x01\xe2\x80\x8d\x61\xc5\xbf\x01`?\x01\x09\x01\xef\xbf\xbd\xef\xbf\xbd\x01\xc2\xa0\x01\x30\x01\n" },
    { "gpt-4o", "\xea\xb0\x80 \xee\x80\x80'\xc2\xa0\xe2\x82\xc2\xb2\xc2\x85?",
      "\xea\xb0\x80\x01 \xee\x80\x80'\x01\xc2\xa0\x01\xef\xbf\xbd\xef\xbf\xbd\x01\xc2\xb2\x01\xc2\x85\x01?" },
    { "kimi-k2", "e\xcc\x81\xea\xb0\x80~\xd0\x96\xf0\xa0\x80\x80\xc2\xa0\xed\xa0\x80\x31\x32\x33\x61\xd0\x96",
      "e\x01\xcc\x81\xea\xb0\x80\x01~\xd0\x96\x01\xf0\xa0\x80\x80\x01\xc2\xa0\x01\xed\xa0\x80\x01\x31\x32\x33\x01\x61\xd0\x96" },
    { "kimi-k2", "\n\xc2\x85\x37\xc2\xb2\x0d(\xe1\xbd\xbd\xf0\xa0\x80\x80\xc5\xbf",
      "\n\x01\xc2\x85\x01\x37\xc2\xb2\x01\x0d\x01(\xe1\xbd\xbd\x01\xf0\xa0\x80\x80\x01\xc5\xbf" },
    { "kimi-k2", "\xee\x80\x80\x37's?  \xd0\x96\xea\xb0\x80's\xe4\xb8\xad\xc2\xa0\xe3\x80\x82(\xe3\x80\x85",
      "\xee\x80\x80\x01\x37\x01's\x01?\x01 \x01 \xd0\x96\xea\xb0\x80's\x01\xe4\xb8\xad\x01\xc2\xa0\x01\xe3\x80\x82(\x01\xe3\x80\x85" },
    { "kimi-k2", "'s\xe3\x80\x85\x80\xe4\xb8\xad(| \xc5\xbf  \xe3\x80\x80",
      "'s\xe3\x80\x85\x01\xef\xbf\xbd\x01\xe4\xb8\xad\x01(|\x01 \xc5\xbf\x01  \xe3\x80\x80" },
    { "kimi-k2", "\xe1\xbd\xbd!\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99\xe1\xbd\xbd\x61\xc3\xa9\xf0\xa0\x80\x80",
      "\xe1\xbd\xbd\x01!\xf0\x9f\xa6\x99\xf0\x9f\xa6\x99\x01\xe1\xbd\xbd\x61\xc3\xa9\x01\xf0\xa0\x80\x80" },
    { "kimi-k2", "\nZ\xd0\x96\xe3\x80\x82'(`?\xff'T",
      "\n\x01Z\xd0\x96\x01\xe3\x80\x82'(`?\xef\xbf\xbd'\x01T" },
};

static void test_splits(void)
{
    const char *last_pre = "";
    struct fl_tokenizer *tok = NULL;
    int ok = 0, n_cases = (int)(sizeof(split_cases) / sizeof(split_cases[0]));
    for (int i = 0; i < n_cases; i++) {
        if (strcmp(split_cases[i].pre, last_pre) != 0) {
            struct gb b = { 0 };
            struct fl_err err = { { 0 } };
            fl_tokenizer_free(tok);
            tok = NULL;
            bpe_kvs(&b, split_cases[i].pre, false);
            CHECK(gb_load(&b, &tok, &err) == 0, "load with pre %s: %s", split_cases[i].pre, err.msg);
            last_pre = split_cases[i].pre;
        }
        if (!tok)
            continue;
        char *norm = NULL, joined[512];
        size_t *ends = NULL, n = 0, b = 0, k = 0;
        int rc = fl_bpe_split(tok, split_cases[i].text, strlen(split_cases[i].text), &norm, &ends, &n);
        for (size_t w = 0; rc == 0 && w < n && k + (ends[w] - b) + 2 < sizeof(joined); w++) {
            if (w)
                joined[k++] = '\x01';
            memcpy(joined + k, norm + b, ends[w] - b);
            k += ends[w] - b;
            b = ends[w];
        }
        joined[k] = 0;
        bool same = rc == 0 && strcmp(joined, split_cases[i].words) == 0;
        CHECK(same, "%s split %d differs from llama.cpp's", split_cases[i].pre, i);
        ok += same;
        free(norm);
        free(ends);
    }
    printf("  %d/%d pre-tokenizer splits as llama.cpp's\n", ok, n_cases);
    fl_tokenizer_free(tok);
}

/* Long words must not run out of regex stack (a 200 KB blob without a
 * space is one word for every pre-tokenizer). */
static void test_long_input(void)
{
    static const char *const pres[] = { "gpt-2", "llama3", "gpt-4o", "deepseek-llm", "deepseek-v3" };
    size_t len = 200000;
    char *text = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        text[i] = "ab~"[i % 7 == 6 ? 2 : i % 2];
    text[len] = 0;
    for (size_t k = 0; k < sizeof(pres) / sizeof(pres[0]); k++) {
        struct gb b = { 0 };
        struct fl_tokenizer *tok = NULL;
        struct fl_err err = { { 0 } };
        bpe_kvs(&b, pres[k], false);
        if (gb_load(&b, &tok, &err) != 0) {
            CHECK(0, "load %s: %s", pres[k], err.msg);
            continue;
        }
        memset(text, 'a', len / 2); /* first half: one letter run */
        int n = fl_tokenize(tok, text, len, false, false, NULL, 0);
        CHECK(n > 0, "%s: %zu bytes of text -> %d", pres[k], len, n);
        fl_tokenizer_free(tok);
    }
    struct fl_tokenizer *spm = load("tests/data/mixtral-tiny-Q4_K_M.gguf");
    if (spm) {
        for (size_t i = 0; i < len; i++)
            text[i] = "The cat sat. "[i % 13];
        int n = fl_tokenize(spm, text, len, true, false, NULL, 0);
        CHECK(n > 1000, "spm: %zu bytes -> %d tokens", len, n);
        fl_tokenizer_free(spm);
    }
    printf("  200 KB inputs tokenize\n");
    free(text);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    const char *src = getenv("FL_SOURCE_DIR"); /* data paths are relative to the repo */
    if (src && chdir(src) != 0) {
        printf("cannot enter FL_SOURCE_DIR %s\n", src);
        return 1;
    }
    if (!only || strcmp(only, "ref") == 0)
        test_ref_models();
    if (!only || strcmp(only, "vocab") == 0) {
        test_vocabs();
        test_fim();
    }
    if (!only || strcmp(only, "hand") == 0) {
        printf("hand-built vocabularies\n");
        test_spm_hand();
        test_bpe_hand();
        test_bad_vocab();
        test_splits();
        test_long_input();
    }
    if (!only || strcmp(only, "chat") == 0) {
        printf("chat prompts\n");
        test_chat_tokens();
    }
    return check_summary("test-tokenizer");
}

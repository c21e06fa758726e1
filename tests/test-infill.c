/* test-infill.c: fill in the middle: the FIM tokens a vocabulary has (by
 * key and by text), /infill's request checks, and the prompt it builds
 * (parts, order, cuts, the extra context), against token lists written out
 * here from a vocabulary whose ids are known: an SPM vocabulary of the 256
 * byte tokens (text is its bytes, id 3 + byte) and the FIM tokens. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/native.h"
#include "check.h"
#include "gguf/gguf-writer.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

enum { UNK, BOS, EOS, BYTE0 = 3, PRE = 259, SUF, MID, PAD, REP, SEP };

static const char *const fim_texts[] = { "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                                         "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>" };

/* A vocabulary of <unk> <s> </s>, the byte tokens, and the first n_fim FIM
 * tokens (CONTROL); pre_key >= 0 names the prefix token by key instead. */
static struct fl_tokenizer *vocab(int n_fim, int pre_key)
{
    char path[] = "/tmp/test-infill-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    close(fd);
    const int n = BYTE0 + 256 + n_fim;
    char bytes[256][8];
    const char *tokens[BYTE0 + 256 + 6] = { "<unk>", "<s>", "</s>" };
    int32_t types[BYTE0 + 256 + 6] = { 2, 3, 3 };
    float scores[BYTE0 + 256 + 6] = { 0 };
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof(bytes[b]), "<0x%02X>", b);
        tokens[BYTE0 + b] = bytes[b];
        types[BYTE0 + b] = 6;
    }
    for (int i = 0; i < n_fim; i++) {
        tokens[PRE + i] = fim_texts[i];
        types[PRE + i] = 3;
    }
    struct gguf_writer *w = NULL;
    struct fl_err err;
    struct gguf_file *g = NULL;
    struct fl_tokenizer *tok = NULL;
    int rc = gguf_writer_open(path, &w, &err);
    if (!rc) rc = gguf_writer_kv_str(w, "tokenizer.ggml.model", "llama");
    if (!rc) rc = gguf_writer_kv_str_arr(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    if (!rc) rc = gguf_writer_kv_arr(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, types, (uint64_t)n);
    if (!rc) rc = gguf_writer_kv_arr(w, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, scores, (uint64_t)n);
    if (!rc) rc = gguf_writer_kv_bool(w, "tokenizer.ggml.add_space_prefix", false);
    if (!rc && pre_key >= 0) rc = gguf_writer_kv_u32(w, "tokenizer.ggml.fim_pre_token_id", (uint32_t)pre_key);
    if (!rc) rc = gguf_writer_finish(w, &err);
    gguf_writer_close(w);
    if (!rc && !(rc = gguf_open(path, &g, &err)))
        rc = fl_tokenizer_load(g, &tok, &err);
    CHECK(rc == 0, "vocabulary: %s", err.msg);
    gguf_close(g);
    unlink(path);
    return tok;
}

/* The expected prompt, as ids (want_add, ended by -1) and texts spelled
 * out as byte tokens (want_text). */
struct want {
    int32_t v[512];
    int n;
};

static void want_add(struct want *w, ...)
{
    va_list ap;
    va_start(ap, w);
    for (int id; (id = va_arg(ap, int)) != -1;)
        w->v[w->n++] = id;
    va_end(ap);
}

/* SPM writes a space as U+2581 (E2 96 81); without a token for it, its
 * bytes */
static void want_text(struct want *w, const char *s)
{
    for (; *s; s++)
        if (*s == ' ')
            want_add(w, BYTE0 + 0xE2, BYTE0 + 0x96, BYTE0 + 0x81, -1);
        else
            w->v[w->n++] = BYTE0 + (unsigned char)*s;
}

static void want_tail(struct want *w, const struct want *from, int n)
{
    memcpy(w->v + w->n, from->v + from->n - n, sizeof(int32_t) * (size_t)n);
    w->n += n;
}

static int parse(const char *body, struct api_request *r, struct fl_err *err)
{
    json_t *b = json_loads(body, 0, NULL);
    const int rc = b ? api_request_parse_infill(b, r, err) : -EINVAL;
    json_decref(b);
    return rc;
}

static void check_prompt(const struct fl_tokenizer *tok, const char *body,
                         const struct api_infill_limits *lim, const struct want *w,
                         const char *what)
{
    struct api_request r;
    struct fl_err err = { "" };
    CHECK(parse(body, &r, &err) == 0, "%s: parse: %s", what, err.msg);
    int32_t *ids = NULL;
    const char *why = "";
    const int n = api_infill_tokens(tok, &r, lim, &ids, &why);
    bool same = n == w->n && !memcmp(ids, w->v, sizeof(int32_t) * (size_t)w->n);
    CHECK(same, "%s: %d tokens (%s), want %d", what, n, n < 0 ? why : "", w->n);
    for (int i = 0; !same && i < n && i < w->n; i++)
        if (ids[i] != w->v[i]) {
            printf("  first difference at %d: %d, want %d\n", i, ids[i], w->v[i]);
            break;
        }
    free(ids);
    api_request_free(&r);
}

static void test_fim_tokens(void)
{
    struct fl_tokenizer *tok = vocab(6, -1);
    if (!tok)
        return;
    for (int r = 0; r < FL_FIM_N; r++)
        CHECK(fl_token_fim(tok, (enum fl_fim_role)r) == PRE + r, "role %d: %d", r,
              fl_token_fim(tok, (enum fl_fim_role)r));
    CHECK(!fl_token_is_eog(tok, PRE) && !fl_token_is_eog(tok, MID), "PRE/MID do not end");
    CHECK(fl_token_is_eog(tok, PAD) && fl_token_is_eog(tok, REP) && fl_token_is_eog(tok, SEP),
          "PAD, REP and SEP end a generation");
    CHECK(api_infill_supported(tok), "prefix, suffix, middle");
    fl_tokenizer_free(tok);
    tok = vocab(3, BYTE0 + 'P'); /* the key names the prefix token */
    CHECK(tok && fl_token_fim(tok, FL_FIM_PRE) == BYTE0 + 'P' && fl_token_fim(tok, FL_FIM_SUF) == SUF &&
              fl_token_fim(tok, FL_FIM_PAD) == FL_TOKEN_NULL, "the key wins over the text");
    fl_tokenizer_free(tok);
    tok = vocab(2, -1); /* no middle token */
    CHECK(tok && !api_infill_supported(tok), "without a middle token");
    struct api_request r;
    struct fl_err err;
    int32_t *ids = NULL;
    const char *why = "";
    const struct api_infill_limits lim = { 2048, -1, 4096, false };
    CHECK(parse("{\"input_prefix\":\"a\",\"input_suffix\":\"b\"}", &r, &err) == 0 &&
              api_infill_tokens(tok, &r, &lim, &ids, &why) == -ENOTSUP && strstr(why, "not supported"),
          "-ENOTSUP: %s", why);
    api_request_free(&r);
    fl_tokenizer_free(tok);
}

static void test_requests(void)
{
    static const struct { const char *body, *error; } bad[] = {
        { "{\"input_suffix\":\"b\"}", "\"input_prefix\" is required" },
        { "{\"input_prefix\":\"a\"}", "\"input_suffix\" is required" },
        { "{\"input_prefix\":1,\"input_suffix\":\"b\"}", "input_prefix: expected a string" },
        { "{\"input_prefix\":[\"a\",-1],\"input_suffix\":\"b\"}", "input_prefix[1]: expected" },
        { "{\"input_prefix\":\"a\",\"input_suffix\":\"b\",\"prompt\":[1]}", "prompt: expected a string" },
        { "{\"input_prefix\":\"a\",\"input_suffix\":\"b\",\"input_extra\":{}}", "input_extra: expected an array" },
        { "{\"input_prefix\":\"a\",\"input_suffix\":\"b\",\"input_extra\":[{\"filename\":\"f\"}]}",
          "input_extra[0].text: expected a string" },
        { "{\"input_prefix\":\"a\",\"input_suffix\":\"b\",\"input_extra\":[{\"text\":\"t\",\"filename\":3}]}",
          "input_extra[0].filename: expected a string" },
        { "{\"input_prefix\":\"a\",\"input_suffix\":\"b\",\"temperature\":\"hot\"}", "temperature" },
        { "[1]", "body: expected an object" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct api_request r;
        struct fl_err err = { "" };
        CHECK(parse(bad[i].body, &r, &err) == -EINVAL && strstr(err.msg, bad[i].error),
              "%s: '%s', want '%s'", bad[i].body, err.msg, bad[i].error);
    }
    struct api_request r;
    struct fl_err err = { "" };
    CHECK(parse("{\"input_prefix\":\"a\",\"input_suffix\":\"b\",\"n_predict\":7,\"stream\":true}",
                &r, &err) == 0 && r.infill && r.native && r.max_tokens == 7 && r.stream &&
              r.prompt && !*r.prompt, "a /completion request without a prompt: %s", err.msg);
    api_request_free(&r);
}

static void test_prompts(void)
{
    struct fl_tokenizer *tok = vocab(6, -1);
    if (!tok)
        return;
    const struct api_infill_limits roomy = { 2048, 16, 4096, false };
    struct want w = { .n = 0 };
    /* [REP]myproject\n [SEP]f.py\n chunk [SEP]tmp\n chunk [SEP]filename\n BOS
     * [PRE]prefix prompt [SUF]suffix [MID] */
    want_add(&w, REP, -1), want_text(&w, "myproject\n");
    want_add(&w, SEP, -1), want_text(&w, "f.py\n"), want_text(&w, "x = 1\n");
    want_add(&w, SEP, -1), want_text(&w, "tmp\n"), want_text(&w, "y");
    want_add(&w, SEP, -1), want_text(&w, "filename\n");
    want_add(&w, BOS, PRE, -1), want_text(&w, "def f():"), want_text(&w, "  ");
    want_add(&w, SUF, -1), want_text(&w, "\nreturn"), want_add(&w, MID, -1);
    check_prompt(tok, "{\"input_prefix\":\"def f():\",\"input_suffix\":\"\\nreturn\",\"prompt\":\"  \","
                 "\"input_extra\":[{\"filename\":\"f.py\",\"text\":\"x = 1\\n\"},{\"text\":\"y\"}]}",
                 &roomy, &w, "repository-level");
    /* --spm-infill: the suffix part first; mixed pieces keep their ids;
     * control-token texts in the pieces stay text, in the prompt they are
     * the tokens */
    const struct api_infill_limits spm = { 2048, 16, 4096, true };
    w.n = 0;
    want_add(&w, REP, -1), want_text(&w, "myproject\n"), want_add(&w, SEP, -1);
    want_text(&w, "filename\n");
    want_add(&w, BOS, SUF, -1), want_text(&w, "<|fim_pad|>");
    want_add(&w, PRE, -1), want_text(&w, "a"), want_add(&w, 77, -1), want_text(&w, "b");
    want_add(&w, PAD, MID, -1);
    check_prompt(tok, "{\"input_prefix\":[\"a\",77,\"b\"],\"input_suffix\":\"<|fim_pad|>\","
                 "\"prompt\":\"<|fim_pad|>\"}", &spm, &w, "spm, mixed, specials");
    /* cuts: a batch of 8 keeps the prefix's last 3 * (8 / 4) = 6 tokens and
     * max(0, 8 / 4 - (2 + 1)) = 0 of the suffix; a context of 20 leaves
     * 20 - 8 - 2 * 2 = 8 tokens for the extra context, its last ones */
    const struct api_infill_limits tight = { 8, 2, 20, false };
    struct want extra = { .n = 0 };
    want_add(&extra, REP, -1), want_text(&extra, "myproject\n"), want_add(&extra, SEP, -1);
    want_text(&extra, "a\n"), want_text(&extra, "0123456789");
    want_add(&extra, SEP, -1), want_text(&extra, "filename\n");
    w.n = 0;
    want_tail(&w, &extra, 8);
    want_add(&w, BOS, PRE, -1), want_text(&w, "cdefgh"), want_text(&w, "z");
    want_add(&w, SUF, MID, -1);
    check_prompt(tok, "{\"input_prefix\":\"abcdefgh\",\"input_suffix\":\"suffix\",\"prompt\":\"z\","
                 "\"input_extra\":[{\"filename\":\"a\",\"text\":\"0123456789\"}]}", &tight, &w,
                 "cut to a batch of 8 and a context of 20");
    fl_tokenizer_free(tok);
    /* without repository and file tokens: a snippet separator per chunk */
    tok = vocab(3, -1);
    if (!tok)
        return;
    w.n = 0;
    want_text(&w, "\n\n--- snippet ---\n\n"), want_text(&w, "one");
    want_text(&w, "\n\n--- snippet ---\n\n"), want_text(&w, "two");
    want_add(&w, BOS, PRE, -1), want_text(&w, "p"), want_add(&w, SUF, -1), want_text(&w, "s");
    want_add(&w, MID, -1);
    check_prompt(tok, "{\"input_prefix\":\"p\",\"input_suffix\":\"s\",\"input_extra\":[{\"text\":"
                 "\"one\",\"filename\":\"x\"},{\"text\":\"two\"}]}", &roomy, &w, "snippets");
    fl_tokenizer_free(tok);
}

int main(void)
{
    test_fim_tokens();
    test_requests();
    test_prompts();
    return check_summary("test-infill");
}

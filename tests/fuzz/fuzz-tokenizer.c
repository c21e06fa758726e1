/* fuzz-tokenizer: libFuzzer target for the tokenizers.
 *
 * The first input byte chooses what the rest is:
 *   bit 0 clear: a GGUF header. It is parsed (as a file much longer than the
 *     input, so header-only seeds keep their tensors), a tokenizer is built
 *     from its metadata and, when that works, a fixed text goes through it:
 *     a fuzzed vocabulary, merges, pre-tokenizer and special ids.
 *   bit 0 set: text for one of the fixed, valid vocabularies (bits 1-3 pick
 *     it; bits 4-5 are add_special / parse_special). It is tokenized,
 *     every id rendered as a piece, the ids detokenized, and the input's
 *     bytes also read as raw int32 ids (out of range ones included) and
 *     detokenized.
 * Any broken contract (ids out of range, lengths that disagree between the
 * sizing call and the real one, a missing NUL) aborts, which libFuzzer
 * reports as a crash. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "text/tokenizer.h"

#ifndef FL_SOURCE_DIR
#define FL_SOURCE_DIR "."
#endif

#define MAX_IDS 8192

/* SPM and several BPE pre-tokenizers (each has its own regexes). */
static const char *const vocab_files[] = {
    "tests/data/qwen3moe-tiny-F16.gguf",          /* gpt-2 BPE, 1025 tokens */
    "tests/data/mixtral-tiny-Q4_K_M.gguf",        /* SPM, 1025 tokens */
    "tests/data/vocab/ggml-vocab-llama-spm.gguf",
    "tests/data/vocab/ggml-vocab-gpt-2.gguf",
    "tests/data/vocab/ggml-vocab-deepseek-llm.gguf",
    "tests/data/vocab/ggml-vocab-deepseek-coder.gguf",
    "tests/data/vocab/ggml-vocab-phi-3.gguf",
    "tests/data/vocab/ggml-vocab-starcoder.gguf",
};
#define N_VOCABS (sizeof(vocab_files) / sizeof(vocab_files[0]))

static struct fl_tokenizer *vocabs[N_VOCABS];
static int32_t ids[MAX_IDS];
static char text_buf[1 << 20];
static uint64_t sink;

static void die(const char *what)
{
    fprintf(stderr, "fuzz-tokenizer: %s\n", what);
    abort();
}

/* Fixed vocabularies load once: a missing one is a broken checkout, not a
 * finding, but it must not pass silently either. */
static struct fl_tokenizer *fixed_vocab(unsigned which)
{
    which %= N_VOCABS;
    if (vocabs[which])
        return vocabs[which];
    char path[4096];
    struct gguf_file *f;
    struct fl_err err;
    const char *src = getenv("FL_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/%s", src ? src : FL_SOURCE_DIR, vocab_files[which]);
    if (gguf_open(path, &f, &err) || fl_tokenizer_load(f, &vocabs[which], &err)) {
        fprintf(stderr, "fuzz-tokenizer: %s\n", err.msg);
        abort();
    }
    gguf_close(f);
    return vocabs[which];
}

static void check_pieces(const struct fl_tokenizer *tok, const int32_t *v, int n)
{
    char piece[512];
    for (int i = 0; i < n; i++) {
        for (int mode = 0; mode < 4; mode++) {
            int len = fl_token_to_piece(tok, v[i], NULL, 0, mode & 1, mode & 2);
            if (len == -EINVAL)
                continue;
            if (len < 0)
                die("token_to_piece: sizing call failed");
            if ((size_t)len <= sizeof(piece) &&
                fl_token_to_piece(tok, v[i], piece, sizeof(piece), mode & 1, mode & 2) != len)
                die("token_to_piece: length differs between sizing and real call");
        }
        /* Lookup by text finds a token with that text (not necessarily v[i]:
         * texts with a NUL inside are cut short here). */
        const char *t = fl_token_text(tok, v[i]);
        int32_t j = t ? fl_token_lookup(tok, t, strlen(t)) : FL_TOKEN_NULL;
        if (j != FL_TOKEN_NULL && (!fl_token_text(tok, j) || strcmp(fl_token_text(tok, j), t)))
            die("token_lookup: found a token with another text");
        sink += (uint32_t)fl_token_type_of(tok, v[i]);
    }
}

static void check_detok(const struct fl_tokenizer *tok, const int32_t *v, int n)
{
    for (int mode = 0; mode < 4; mode++) {
        int len = fl_detokenize(tok, v, n, NULL, 0, mode & 1, mode & 2);
        if (len == -EINVAL)
            continue;
        if (len < 0 && len != -ENOSPC)
            die("detokenize: sizing call failed");
        if (len < 0 || (size_t)len >= sizeof(text_buf))
            continue;
        if (fl_detokenize(tok, v, n, text_buf, sizeof(text_buf), mode & 1, mode & 2) != len ||
            text_buf[len] != 0)
            die("detokenize: length differs between sizing and real call");
    }
}

static void run_text(const struct fl_tokenizer *tok, const char *text, size_t len, bool add_special,
                     bool parse_special)
{
    int n = fl_tokenize(tok, text, len, add_special, parse_special, NULL, 0);
    if (n == -EINVAL || n == -EILSEQ || n == -ENOMEM)
        return;
    if (n < 0 && n != -ENOSPC)
        die("tokenize: unexpected error from the sizing call");
    if (n < 0 || n > MAX_IDS)
        return;
    if (fl_tokenize(tok, text, len, add_special, parse_special, ids, n) != n)
        die("tokenize: count differs between sizing and real call");
    if (n > 0 && fl_tokenize(tok, text, len, add_special, parse_special, ids, n - 1) != -ENOSPC)
        die("tokenize: a too-small buffer was not -ENOSPC");
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= fl_n_vocab(tok))
            die("tokenize: id out of range");
    check_pieces(tok, ids, n);
    check_detok(tok, ids, n);
}

static void run_gguf(const uint8_t *data, size_t size)
{
    struct gguf_file *f = NULL;
    struct fl_tokenizer *tok = NULL;
    struct fl_err err;
    /* Header-only seeds: their tensors point past the input, into "the rest
     * of the file". */
    if (gguf_parse(data, size, (uint64_t)size + ((uint64_t)1 << 40), "fuzz", &f, &err))
        return;
    int rc = fl_tokenizer_load(f, &tok, &err);
    if (rc) {
        if (tok || !strchr(err.msg, ':') || strchr(err.msg, '\n'))
            die("tokenizer_load: failed without a one-line message, or left a tokenizer");
    } else {
        static const char text[] = "Hello world! <|endoftext|><s> 123 \xe2\x96\x81x \xff\xfe caf\xc3\xa9\n\n";
        sink += fl_n_vocab(tok) + (uintptr_t)fl_tokenizer_pre(tok) + (uintptr_t)fl_tokenizer_warning(tok);
        int32_t specials[] = { fl_token_bos(tok), fl_token_eos(tok), fl_token_eot(tok),
                               fl_token_unk(tok), fl_token_pad(tok), fl_n_vocab(tok) - 1 };
        for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
            sink += fl_token_is_eog(tok, specials[i]);
        check_pieces(tok, specials, sizeof(specials) / sizeof(specials[0]));
        run_text(tok, text, sizeof(text) - 1, true, true);
        run_text(tok, text, sizeof(text) - 1, false, false);
        fl_tokenizer_free(tok);
    }
    gguf_close(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++, size--;
    if (!(sel & 1)) {
        run_gguf(data, size);
        return 0;
    }
    /* Header seeds make libFuzzer's length limit ~30 KB; text that long adds
     * nothing the tokenizers' loops have not seen at 4 KB, only time. */
    if (size > 4096)
        size = 4096;
    const struct fl_tokenizer *tok = fixed_vocab((sel >> 1) & 7);
    run_text(tok, (const char *)data, size, sel & 16, sel & 32);
    /* The same bytes as ids: most are out of range, which must be -EINVAL. */
    int32_t raw[256];
    int n = (int)(size / 4 < 256 ? size / 4 : 256);
    memcpy(raw, data, (size_t)n * 4);
    if (sel & 64)
        for (int i = 0; i < n; i++) /* mostly valid ids, to reach the rendering code */
            raw[i] = (int32_t)((uint32_t)raw[i] % (uint32_t)fl_n_vocab(tok));
    check_pieces(tok, raw, n);
    check_detok(tok, raw, n);
    return 0;
}

/* test-kld-base: llama-perplexity's base files of log-probabilities
 * (record/kld-base.h), against files llama.cpp wrote (tests/data/kld):
 *   - the encoding: llama.cpp's own logits of a chunk's scored rows
 *     (…first-chunk.flrf), encoded here, are the bytes llama-perplexity
 *     wrote for that chunk in …c64.kld, every row;
 *   - the comparison: a row against the base it was encoded from has a KL
 *     divergence of (about) zero and the same top token; against the logits
 *     of another distribution, the KL divergence worked out in double from
 *     the base row's own log-probabilities;
 *   - the reader: header, tokens and chunks as written; refused in one
 *     'PATH: problem' line: another magic, a truncated or padded file,
 *     sizes that overflow, a token outside the vocabulary, a row whose
 *     scale is not a number, a chunk past the last. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record/flref.h"
#include "record/kld-base.h"

#define BASE "tests/data/kld/qwen3moe-tiny-F16.c64.kld"
#define ROWS "tests/data/kld/qwen3moe-tiny-F16.c64.first-chunk.flrf"

static int failures;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                           \
            printf(__VA_ARGS__);                                                  \
            printf("\n");                                                         \
            failures++;                                                           \
        }                                                                         \
    } while (0)

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*len ? *len : 1);
    if (b && fread(b, 1, *len, f) != *len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

/* llama.cpp's rows for the first chunk encode to llama.cpp's bytes. */
static void test_encoding(void)
{
    struct fl_kld_base b;
    struct flref_logits l;
    struct fl_err err;
    CHECK(fl_kld_base_open(BASE, &b, &err) == 0, "open: %s", err.msg);
    CHECK(flref_logits_read(ROWS, &l, &err) == 0, "read: %s", err.msg);
    if (failures)
        return;
    const int32_t n_rows = fl_kld_rows_per_chunk(b.n_ctx);
    const size_t len = fl_kld_row_len(b.n_vocab);
    CHECK(b.n_ctx == 64 && b.n_vocab == 1025 && b.n_chunk == 4 && l.n_vocab == b.n_vocab &&
          l.n_tokens == n_rows + 1, "shapes: n_ctx %u vocab %d chunks %d, rows %d", b.n_ctx,
          b.n_vocab, b.n_chunk, l.n_tokens);
    uint16_t *rows = malloc(sizeof(uint16_t) * len * (size_t)n_rows);
    uint16_t *mine = malloc(sizeof(uint16_t) * len);
    CHECK(fl_kld_base_read_chunk(&b, rows, &err) == 0, "chunk 1: %s", err.msg);
    int same = 0;
    for (int32_t i = 0; i < n_rows; i++) {
        fl_kld_encode_row(l.logits + (size_t)i * l.n_vocab, l.n_vocab, mine);
        same += !memcmp(mine, rows + (size_t)i * len, len * sizeof(uint16_t));
        /* the FLRF holds the tokens after position 32 as evaluated */
        CHECK(l.tokens[i + 1] == b.tokens[b.n_ctx / 2 + i + 1], "token %d", i);
    }
    CHECK(same == n_rows, "%d of %d rows encode to llama.cpp's bytes", same, n_rows);
    printf("encoding: %d of %d rows as llama-perplexity wrote them\n", same, n_rows);

    /* a row against its own base: ~0 (the 16-bit steps only), same top */
    struct fl_kld_sums s = { 0 };
    float p_diff;
    double worst = 0;
    for (int32_t i = 0; i < n_rows; i++) {
        const double k = fl_kld_compare_row(l.logits + (size_t)i * l.n_vocab, l.n_vocab,
                                            rows + (size_t)i * len, l.tokens[i + 1], &s, &p_diff);
        worst = fabs(k) > worst ? fabs(k) : worst;
    }
    CHECK(worst < 1e-4 && s.n_same_top == n_rows && s.count == n_rows && s.max_p_diff < 1e-3,
          "against itself: worst |KLD| %g, same top %lld of %d, max dp %g", worst,
          (long long)s.n_same_top, n_rows, s.max_p_diff);
    printf("a row against itself: |KLD| <= %.2g, same top %lld / %d\n", worst,
           (long long)s.n_same_top, n_rows);
    free(rows);
    free(mine);
    flref_logits_free(&l);
    fl_kld_base_close(&b);
}

/* KL(base || q) from the base row's own numbers, in double. */
static double kl_by_hand(const uint16_t *row, const float *q, int32_t n)
{
    float d[2];
    memcpy(d, row, sizeof(d));
    double max = q[0], sum = 0, kl = 0;
    for (int32_t i = 1; i < n; i++)
        max = q[i] > max ? q[i] : max;
    for (int32_t i = 0; i < n; i++)
        sum += exp(q[i] - max);
    for (int32_t i = 0; i < n; i++) {
        const double lp = (double)d[0] * row[4 + i] + d[1];
        if (lp > -16)
            kl += exp(lp) * (lp - (q[i] - max - log(sum)));
    }
    return kl;
}

static void test_compare(void)
{
    enum { N = 7 };
    const float p[N] = { 2.0f, 1.0f, 0.5f, -3.0f, -30.0f, 0.0f, 1.5f };
    const float q[N] = { 1.0f, 2.0f, 0.5f, -2.0f, -1.0f, 0.25f, 1.5f };
    uint16_t row[N + 1 + 4];
    fl_kld_encode_row(p, N, row);
    CHECK(row[4 + 4] == 0, "a token 32 nats down is at the floor (q %u)", row[4 + 4]);
    CHECK(row[4 + 0] == 65535, "the best token is the top step (q %u)", row[4 + 0]);
    struct fl_kld_sums s = { 0 };
    float p_diff;
    const double k = fl_kld_compare_row(q, N, row, 1, &s, &p_diff);
    const double want = kl_by_hand(row, q, N);
    CHECK(fabs(k - want) < 1e-5 * want && want > 0.1, "KLD %.9g, by hand %.9g", k, want);
    CHECK(s.n_same_top == 0 && s.count == 1, "top tokens 0 and 1 differ");
    float d[2];
    memcpy(d, row, sizeof(d));
    CHECK(fabs(s.nll_base + ((double)d[0] * row[5] + d[1])) < 1e-6, "the base's NLL is its row's");
    /* shifting every logit changes nothing */
    float q2[N];
    for (int i = 0; i < N; i++)
        q2[i] = q[i] + 5.0f;
    struct fl_kld_sums s2 = { 0 };
    CHECK(fabs(fl_kld_compare_row(q2, N, row, 1, &s2, &p_diff) - k) < 1e-5, "shift");
    printf("comparison: KLD %.6f (by hand %.6f)\n", k, want);
}

static void write_file(const char *path, const void *a, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(a, 1, n, f);
        fclose(f);
    }
}

static void expect_refused(const char *path, const char *what, int want)
{
    struct fl_kld_base b;
    struct fl_err err = { { 0 } };
    int rc = fl_kld_base_open(path, &b, &err);
    CHECK(rc == want && strstr(err.msg, path) && !strchr(err.msg, '\n'),
          "%s: rc %d (want %d): %s", what, rc, want, err.msg);
    fl_kld_base_close(&b);
}

static void test_refusals(void)
{
    size_t len;
    unsigned char *good = slurp(BASE, &len);
    CHECK(good != NULL, "cannot read %s", BASE);
    if (!good)
        return;
    char path[] = "/tmp/test-kld-base.XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    unsigned char *b = malloc(len + 2);
    memcpy(b, good, len);
    b[0] = 'X';
    write_file(path, b, len);
    expect_refused(path, "magic", -EINVAL);
    b[0] = '_';
    write_file(path, b, len - 1);
    expect_refused(path, "truncated", -EINVAL);
    b[len] = b[len + 1] = 0;
    write_file(path, b, len + 2);
    expect_refused(path, "padded", -EINVAL);
    const int32_t huge[3] = { 1 << 23, 1 << 24, 1 << 30 };
    memcpy(b + 8, huge, sizeof(huge));
    write_file(path, b, len);
    expect_refused(path, "sizes", -EINVAL);
    memcpy(b, good, len);
    const int32_t outside = 1025;
    memcpy(b + 20 + 4 * 70, &outside, 4);
    write_file(path, b, len);
    expect_refused(path, "token id", -EINVAL);
    /* a NaN scale in chunk 3's first row: opens, chunks 1-2 read, chunk 3 refused */
    memcpy(b, good, len);
    const float nan_scale = NAN;
    const size_t row_bytes = fl_kld_row_len(1025) * 2, chunk_bytes = 31 * row_bytes;
    memcpy(b + 20 + 4 * 64 * 4 + 2 * chunk_bytes, &nan_scale, 4);
    write_file(path, b, len);
    struct fl_kld_base kb;
    struct fl_err err = { { 0 } };
    uint16_t *rows = malloc(chunk_bytes);
    int rc = fl_kld_base_open(path, &kb, &err);
    CHECK(rc == 0, "open: %s", err.msg);
    for (int c = 0; rc == 0 && c < 2; c++)
        CHECK((rc = fl_kld_base_read_chunk(&kb, rows, &err)) == 0, "chunk %d: %s", c, err.msg);
    CHECK(fl_kld_base_read_chunk(&kb, rows, &err) == -EINVAL && strstr(err.msg, "chunk 3"),
          "NaN scale: %s", err.msg);
    fl_kld_base_close(&kb);
    write_file(path, good, len);
    CHECK(fl_kld_base_open(path, &kb, &err) == 0, "reopen: %s", err.msg);
    for (int c = 0; c < 4; c++)
        CHECK(fl_kld_base_read_chunk(&kb, rows, &err) == 0, "chunk %d: %s", c, err.msg);
    CHECK(fl_kld_base_read_chunk(&kb, rows, &err) == -ERANGE, "past the last chunk");
    fl_kld_base_close(&kb);
    unlink(path);
    expect_refused(path, "missing", -ENOENT);
    printf("refused: another magic, truncated, padded, huge sizes, a token outside, a NaN "
           "scale, a missing file\n");
    free(rows);
    free(b);
    free(good);
}

int main(void)
{
    if (access(BASE, R_OK)) {
        printf("no %s: skipped\n", BASE);
        return 77;
    }
    test_encoding();
    test_compare();
    test_refusals();
    if (failures) {
        printf("test-kld-base: %d failures\n", failures);
        return 1;
    }
    printf("test-kld-base: all checks passed\n");
    return 0;
}

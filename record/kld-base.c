/* kld-base.c: llama-perplexity's base file of log-probabilities, and the
 * arithmetic of its rows. The encoding and the comparison keep llama.cpp's
 * float/double mix (tools/perplexity, 34af94c): a base is bytes both
 * engines must agree on, and the statistics are compared across engines. */
#include "record/kld-base.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KLD_HEADER 20          /* magic, n_ctx, n_vocab, n_chunk */
#define KLD_MAX_CTX (1u << 24)
#define KLD_MAX_VOCAB (1 << 24)
#define KLD_FLOOR 16.0f        /* nats below the best token a row keeps */

static int32_t rd_i32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* The header's counts against the file's size (the multiplications in
 * 64 bits after the bounds, so a lying header cannot overflow them). */
static int check_sizes(struct fl_kld_base *b, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                       uint64_t size, struct fl_err *err)
{
    if (n_ctx < 3 || n_ctx > KLD_MAX_CTX || n_vocab < 1 || n_vocab > KLD_MAX_VOCAB ||
        n_chunk < 1 || n_chunk > (int64_t)(((uint64_t)1 << 40) / (uint64_t)n_ctx))
        return fl_err_set(err, -EINVAL, "%s: bad sizes (n_ctx %lld, n_vocab %lld, n_chunk %lld)",
                          b->path, (long long)n_ctx, (long long)n_vocab, (long long)n_chunk);
    const uint64_t tokens = 4 * (uint64_t)n_ctx * (uint64_t)n_chunk;
    const uint64_t rows = (uint64_t)n_chunk * (uint64_t)fl_kld_rows_per_chunk((uint32_t)n_ctx) *
                          fl_kld_row_len((int32_t)n_vocab) * 2;
    if (size != KLD_HEADER + tokens + rows)
        return fl_err_set(err, -EINVAL, "%s: %llu bytes where its header (n_ctx %lld, n_vocab "
                          "%lld, %lld chunks) says %llu: truncated or not a base file", b->path,
                          (unsigned long long)size, (long long)n_ctx, (long long)n_vocab,
                          (long long)n_chunk, (unsigned long long)(KLD_HEADER + tokens + rows));
    b->n_ctx = (uint32_t)n_ctx;
    b->n_vocab = (int32_t)n_vocab;
    b->n_chunk = (int32_t)n_chunk;
    return 0;
}

static int read_tokens(struct fl_kld_base *b, struct fl_err *err)
{
    const size_t n = (size_t)b->n_ctx * (size_t)b->n_chunk;
    b->tokens = malloc(n * sizeof(int32_t));
    if (!b->tokens)
        return fl_err_set(err, -ENOMEM, "%s: out of memory for %zu tokens", b->path, n);
    if (fread(b->tokens, sizeof(int32_t), n, b->f) != n)
        return fl_err_set(err, -EIO, "%s: cannot read its tokens", b->path);
    for (size_t i = 0; i < n; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= b->n_vocab)
            return fl_err_set(err, -EINVAL, "%s: token %zu is %d, outside its vocabulary of %d",
                              b->path, i, b->tokens[i], b->n_vocab);
    return 0;
}

int fl_kld_base_open(const char *path, struct fl_kld_base *b, struct fl_err *err)
{
    memset(b, 0, sizeof(*b));
    snprintf(b->path, sizeof(b->path), "%s", path);
    b->f = fopen(path, "rb");
    if (!b->f)
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    unsigned char h[KLD_HEADER];
    if (fstat(fileno(b->f), &st) || !S_ISREG(st.st_mode))
        return fl_err_set(err, -EINVAL, "%s: not a regular file", path);
    if (fread(h, 1, sizeof(h), b->f) != sizeof(h) || memcmp(h, FL_KLD_MAGIC, 8))
        return fl_err_set(err, -EINVAL, "%s: not a file of log-probabilities (no '%s' at its "
                          "start; llama-perplexity --kl-divergence-base writes them)", path,
                          FL_KLD_MAGIC);
    const int64_t n_ctx = (uint32_t)rd_i32(h + 8);
    int rc = check_sizes(b, n_ctx, rd_i32(h + 12), rd_i32(h + 16), (uint64_t)st.st_size, err);
    return rc ? rc : read_tokens(b, err);
}

int fl_kld_base_read_chunk(struct fl_kld_base *b, uint16_t *rows, struct fl_err *err)
{
    if (b->next_chunk >= b->n_chunk)
        return fl_err_set(err, -ERANGE, "%s: has only %d chunks", b->path, b->n_chunk);
    const size_t len = fl_kld_row_len(b->n_vocab);
    const int32_t n_rows = fl_kld_rows_per_chunk(b->n_ctx);
    if (fread(rows, sizeof(uint16_t), len * (size_t)n_rows, b->f) != len * (size_t)n_rows)
        return fl_err_set(err, ferror(b->f) ? -EIO : -EINVAL, "%s: cannot read chunk %d's rows",
                          b->path, b->next_chunk + 1);
    for (int32_t i = 0; i < n_rows; i++) {
        float d[2];
        memcpy(d, rows + (size_t)i * len, sizeof(d));
        if (!isfinite(d[0]) || !isfinite(d[1]) || d[0] < 0)
            return fl_err_set(err, -EINVAL, "%s: chunk %d row %d has scale %g and offset %g",
                              b->path, b->next_chunk + 1, i, d[0], d[1]);
    }
    b->next_chunk++;
    return 0;
}

void fl_kld_base_close(struct fl_kld_base *b)
{
    if (b->f)
        fclose(b->f);
    free(b->tokens);
    b->f = NULL;
    b->tokens = NULL;
}

int fl_kld_base_write_header(FILE *f, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                             const int32_t *tokens, struct fl_err *err)
{
    const int32_t counts[3] = { (int32_t)n_ctx, n_vocab, n_chunk };
    const size_t n = (size_t)n_ctx * (size_t)n_chunk;
    if (fwrite(FL_KLD_MAGIC, 1, 8, f) != 8 || fwrite(counts, sizeof(int32_t), 3, f) != 3 ||
        fwrite(tokens, sizeof(int32_t), n, f) != n)
        return fl_err_set(err, -EIO, "cannot write the base file's header: %s", strerror(errno));
    return 0;
}

void fl_kld_encode_row(const float *logits, int32_t n_vocab, uint16_t *row)
{
    float max = logits[0], min = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        max = logits[i] > max ? logits[i] : max;
        min = logits[i] < min ? logits[i] : min;
    }
    min = min > max - KLD_FLOOR ? min : max - KLD_FLOOR;
    double sum_exp = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum_exp += expf(logits[i] - max);
    const float log_sum_exp = (float)log(sum_exp);
    const float d[2] = { (max - min) / 65535.f, min - max - log_sum_exp };
    memcpy(row, d, sizeof(d));
    uint16_t *q = row + 4;
    memset(q, 0, (fl_kld_row_len(n_vocab) - 4) * sizeof(uint16_t));
    if (d[0] == 0)
        return;
    const float inv = 1 / d[0];
    for (int32_t i = 0; i < n_vocab; i++) {
        if (!(logits[i] > min))
            continue;
        const long v = lrintf(inv * (logits[i] - min)); /* to nearest, ties even */
        q[i] = (uint16_t)(v > 65535 ? 65535 : v);
    }
}

double fl_kld_compare_row(const float *logits, int32_t n_vocab, const uint16_t *row, int32_t tok,
                          struct fl_kld_sums *s, float *p_diff_out)
{
    float max = logits[0];
    int32_t top = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max)
            max = logits[i], top = i;
    double sum_exp = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum_exp += expf(logits[i] - max);
    const float log_sum_exp = (float)log(sum_exp);
    float d[2];
    memcpy(d, row, sizeof(d));
    const uint16_t *q = row + 4;
    const float nll = max + log_sum_exp - logits[tok];
    const float nll_base = -(d[0] * q[tok] + d[1]);
    s->nll += nll, s->nll2 += nll * nll;
    s->nll_base += nll_base, s->nll_base2 += nll_base * nll_base;
    s->nll_nll_base += nll * nll_base;
    /* KL(base || this) = sum p_base (log p_base - log p); the base's tokens
     * 16 nats down or more add nothing that shows */
    const float log_norm = max + log_sum_exp;
    double kld = 0;
    int32_t top_base = 0;
    float best_base = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        const float lp_base = d[0] * q[i] + d[1];
        if (i == 0 || lp_base > best_base)
            best_base = lp_base, top_base = i;
        if (lp_base > -KLD_FLOOR)
            kld += expf(lp_base) * (lp_base - logits[i] + log_norm);
    }
    s->kld += kld, s->kld2 += kld * kld;
    s->count++;
    s->n_same_top += top == top_base;
    const float p_diff = expf(-nll) - expf(-nll_base);
    const double p_diff2 = p_diff * p_diff; /* a float product, as llama.cpp's */
    s->p_diff += p_diff, s->p_diff2 += p_diff2, s->p_diff4 += p_diff2 * p_diff2;
    s->max_p_diff = fabsf(p_diff) > s->max_p_diff ? fabsf(p_diff) : s->max_p_diff;
    *p_diff_out = p_diff;
    return kld;
}

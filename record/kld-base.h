/* kld-base.h: llama-perplexity's file of log-probabilities, the base its
 * KL-divergence is measured against (`--kl-divergence-base FILE`, written by
 * a perplexity run of the reference model, read by `--kl-divergence` runs
 * of the others). One format for both engines: a base either writes, the
 * other reads. Little-endian throughout:
 *
 *   "_logits_"   8 bytes
 *   n_ctx        uint32   the chunk length
 *   n_vocab      int32
 *   n_chunk      int32
 *   tokens       int32 [n_chunk * n_ctx]   the text as tokenized (no BOS put in)
 *   rows         per chunk, one per scored position (n_ctx/2 .. n_ctx-2:
 *                fl_kld_rows_per_chunk), each fl_kld_row_len(n_vocab) uint16:
 *                float scale, float min_log_prob, then one q per token with
 *                log p = scale * q + min_log_prob, padded to an even count.
 *
 * A row keeps 16 nats below its best token (q = 0 stands for "that far down
 * or further"), so a base's own perplexity is capped where a model is very
 * wrong: llama.cpp's format, kept as is so files cross between engines.
 * Base files are large (a 150k vocabulary over wikitext: tens of GB), so the
 * reader streams them chunk by chunk after checking the size up front. */
#ifndef FL_KLD_BASE_H
#define FL_KLD_BASE_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

#define FL_KLD_MAGIC "_logits_"

/* uint16 values per row: 4 for the two floats, the vocabulary padded even. */
static inline size_t fl_kld_row_len(int32_t n_vocab)
{
    return 2 * (((size_t)n_vocab + 1) / 2) + 4;
}

/* Scored rows per chunk: positions n_ctx/2 .. n_ctx-2, each predicting the
 * token after it. */
static inline int32_t fl_kld_rows_per_chunk(uint32_t n_ctx)
{
    return (int32_t)(n_ctx - 1 - n_ctx / 2);
}

struct fl_kld_base {
    uint32_t n_ctx;
    int32_t n_vocab, n_chunk;
    int32_t *tokens;   /* [n_chunk * n_ctx], every id in [0, n_vocab) */
    FILE *f;           /* at the next chunk's rows */
    int32_t next_chunk;
    char path[PATH_MAX]; /* for messages */
};

/* Opens a base file: checks the magic, the sizes (n_ctx >= 3, n_vocab and
 * n_chunk >= 1, the file exactly as long as they say) and every token id.
 * Returns 0, -errno from the file, or -EINVAL for a malformed one, with
 * "PATH: problem" in err. Close with fl_kld_base_close (also after a
 * failure; a zeroed struct is fine). */
int fl_kld_base_open(const char *path, struct fl_kld_base *b, struct fl_err *err);

/* Reads the next chunk's rows into rows[fl_kld_rows_per_chunk *
 * fl_kld_row_len]; -EINVAL when a row's scale or offset is not a finite
 * number (scale >= 0), -EIO / -errno on a read error, -ERANGE past the last
 * chunk. */
int fl_kld_base_read_chunk(struct fl_kld_base *b, uint16_t *rows, struct fl_err *err);

void fl_kld_base_close(struct fl_kld_base *b);

/* Writes the header and tokens to f. */
int fl_kld_base_write_header(FILE *f, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                             const int32_t *tokens, struct fl_err *err);

/* One logits row as a base row: the row's log-softmax from its best token
 * down to 16 nats below it, in 65,535 steps (llama.cpp's rounding: the same
 * logits give the same bytes). */
void fl_kld_encode_row(const float *logits, int32_t n_vocab, uint16_t *row);

/* What --kl-divergence sums over the scored tokens (llama-perplexity's
 * statistics are computed from these). */
struct fl_kld_sums {
    double nll, nll2;                  /* -log p(token), this model */
    double nll_base, nll_base2, nll_nll_base;
    double kld, kld2;                  /* KL(base || this model) */
    double p_diff, p_diff2, p_diff4;   /* p(token) - p_base(token) */
    float max_p_diff;                  /* largest |p_diff| */
    int64_t n_same_top, count;
};

/* Adds one scored token: this model's logits row against the base's row
 * for the same position, tok the token that follows. Returns the row's
 * KL-divergence; *p_diff its p(tok) - p_base(tok). */
double fl_kld_compare_row(const float *logits, int32_t n_vocab, const uint16_t *row, int32_t tok,
                          struct fl_kld_sums *s, float *p_diff);

#endif

/* kl-divergence.h: what `faultline perplexity --kl-divergence` reports, as
 * llama-perplexity does: per chunk a row of the running PPL, ln(PPL(Q) /
 * PPL(base)), mean KL-divergence, RMS of the token probability's change and
 * how often the best token is the same; at the end (100 tokens or more) the
 * perplexity, KL-divergence and probability statistics with percentiles.
 * The rows compared come from record/kld-base.h. */
#ifndef FL_CLI_KL_DIVERGENCE_H
#define FL_CLI_KL_DIVERGENCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "record/kld-base.h"

struct kld_report {
    struct fl_kld_sums s;
    float *kld, *p_diff; /* per scored token, for the percentiles */
    size_t n, cap;
};

/* Room for n_tokens scored tokens; -ENOMEM. */
int kld_report_init(struct kld_report *k, size_t n_tokens);
void kld_report_free(struct kld_report *k);

/* Adds a chunk: n_rows logits rows of this model and the base's rows for
 * the same positions; next[i] the token row i predicts. */
void kld_report_chunk(struct kld_report *k, const float *rows, const uint16_t *base, int n_rows,
                      int32_t n_vocab, const int32_t *next);

void kld_print_header(FILE *out);
void kld_print_chunk(const struct kld_report *k, int chunk, FILE *out);
/* The statistics at the end; returns 0, or 1 (nothing printed) under 100
 * tokens, too few for them (llama.cpp prints none either). */
int kld_print_final(struct kld_report *k, FILE *out);

#endif

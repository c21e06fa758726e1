/* logprob.h: log-probabilities of a logits row as the model gives them
 * (log-softmax of the raw logits, before temperature, penalties or any
 * other sampler setting: what llama-server and OpenAI's `logprobs` report),
 * and the row's most likely tokens. Computed in double from the row alone,
 * so a sequence's figures are as batch-invariant as its logits. */
#ifndef FL_TEXT_LOGPROB_H
#define FL_TEXT_LOGPROB_H

#include <stddef.h>
#include <stdint.h>

#define FL_MAX_TOP_LOGPROBS 20

struct fl_logprob {
    int32_t id;
    float logprob;
};

/* One generated token's log-probability and the most likely tokens of the
 * logits row it was drawn from; where its bytes lie in the generated text
 * (a stop string may have cut them short: text_end is then the cut). */
struct fl_token_logprob {
    struct fl_logprob token;
    struct fl_logprob top[FL_MAX_TOP_LOGPROBS];
    int n_top;
    size_t text_start, text_end;
};

/* log(sum(exp(row[i]))) over n logits; NaN when a logit is not finite. */
double fl_logsumexp(const float *row, int n);

/* The k (<= FL_MAX_TOP_LOGPROBS) most likely tokens of the row, most likely
 * first (equal logits: the lower id first), with logprob = logit - lse.
 * Returns how many were written: min(k, n). */
int fl_top_logprobs(const float *row, int n, double lse, int k, struct fl_logprob *out);

#endif

/* draft-model.h: speculative decoding's drafts from a draft model
 * (llama.cpp's -md, type draft-simple).
 *
 * A small model with the target's vocabulary (Qwen3-0.6B beside a
 * Qwen3-30B-A3B, say) reads each sequence's tokens in a KV cache of its
 * own and proposes the next ones greedily; the target verifies them in one
 * span as it verifies ngram-simple's drafts (app/speculate.h), so the
 * answer is byte for byte the answer without a draft. On a paged MoE target
 * that span reads the union of its tokens' experts once: every kept token
 * saves a whole decode's expert reads, for a few decodes of a model that
 * sits in RAM.
 *
 * The drafter remembers the tokens each sequence fed it and, for every
 * draft, keeps the longest start they share with the sequence's history
 * now and feeds the rest: a rejected draft, a rewound chat, a sequence
 * given to another request, a prompt read from the prompt cache all come
 * out right without being told. Its bits do not reach the answer, so its
 * sequences share their forward calls freely.
 *
 * The draft model runs on the CPU with the default placement (its weights
 * in RAM when they fit), with the target's sequences, context, batch size
 * and threads (-td its own). A draft model with recurrent state (Qwen3.5's
 * small ones) keeps a copy of each sequence's state after its history, and
 * goes back to it when the target kept less than the whole draft. */
#ifndef FL_DRAFT_MODEL_H
#define FL_DRAFT_MODEL_H

#include <stdint.h>

#include "app/session.h"
#include "app/speculate.h"
#include "base/error.h"

struct eng_drafter;

/* Opens p->model for target's sequences; refused in one line when the
 * vocabularies differ as llama.cpp refuses them (type, BOS/EOS, sizes
 * more than 128 apart, a token's text from id 5 on), p's numbers are out
 * of range, or the memory does not hold it beside the target (whose auto
 * expert budget makes room first: eng_session_fit_beside). */
int eng_drafter_open(struct eng_session *target, const struct eng_spec_draft_params *p,
                     struct eng_drafter **out, struct fl_err *err);
void eng_drafter_close(struct eng_drafter *d);

/* One sequence's draft: its history is a[0..na) then b[0..nb) (the last
 * token is the one just sampled, which the target has not read yet); at
 * most max tokens (and p's n_max) go to out, n says how many (0 when
 * shorter than n_min, when the draft's cells do not fit, or when the
 * history was not all read yet). max 0: the history is only read (a
 * prompt the target is still reading, so that its first draft is ready). */
struct eng_draft_job {
    int seq;
    const int32_t *a, *b;
    int na, nb, max;
    int32_t *out;
    int n;
};

/* The drafts of n_jobs sequences (distinct seqs), their forward calls
 * shared; at most read history tokens are read first, in job order (<= 0:
 * all of them), so that a long prompt read from the prompt cache costs a
 * step no more than a prompt chunk does. An error is the draft model's
 * forward's. */
int eng_drafter_draft(struct eng_drafter *d, struct eng_draft_job *jobs, int n_jobs, int read,
                      struct fl_err *err);

/* Sequence seq's cells go back (its request ended); its next draft feeds
 * its history from the start. */
void eng_drafter_forget(struct eng_drafter *d, int seq);

#endif

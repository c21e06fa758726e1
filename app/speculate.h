/* speculate.h: speculative decoding's settings, and drafts without a
 * draft model (llama.cpp's --spec-type ngram-simple; drafts from a draft
 * model, draft-simple, are app/draft-model.h's).
 *
 * A sequence that is generating often repeats itself: code being edited,
 * a document being quoted or summarised, a reasoning model's answer
 * restating its thoughts. When the last n tokens (the key) appeared
 * earlier in the sequence, the m tokens that followed them then are a
 * draft of what comes next. The draft is fed with the sampled token in one
 * span; each row's token is sampled as a plain decode would sample it, and
 * the draft is kept up to the first token that differs. On a paged MoE
 * model the span reads the union of its tokens' experts once, so every
 * accepted token saves a whole decode's expert reads.
 *
 * Nothing changes the answer: a span shorter than ENG_SPAN_SHORT_MAX + 1
 * tokens gives each row a lone decode token's bits (model/arch.h), and the
 * sampler draws one number per kept token in the same order, so the text is
 * byte for byte the text without speculation, seeded sampling included.
 * Models with recurrent state (Qwen3-Next, Qwen3.5) take a rejected draft
 * back by the state copied before its span and the kept positions fed
 * again (app/scheduler.c, app/cli/run-generate.c); with a GPU, whose
 * state is in VRAM, they decode one token at a time. */
#ifndef FL_SPECULATE_H
#define FL_SPECULATE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/tensor-types.h"
#include "model/arch.h"

enum eng_spec_type { ENG_SPEC_NONE, ENG_SPEC_NGRAM_SIMPLE };

/* A draft model (llama.cpp's -md, type draft-simple): a smaller model with
 * the target's vocabulary proposes each sequence's next tokens greedily. */
struct eng_spec_draft_params {
    const char *model; /* -md FILE; NULL: none */
    bool named;        /* --spec-type named draft-simple (it needs -md) */
    int n_max;         /* --spec-draft-n-max: the most tokens a draft takes (llama.cpp's 3) */
    int n_min;         /* --spec-draft-n-min: a shorter draft is not fed (0) */
    float p_min;       /* --spec-draft-p-min: drafting stops at a token whose probability
                        * among the draft model's 10 likeliest is under it (0) */
    int n_threads;     /* -td: the draft model's threads; 0: the target's */
    enum fl_type cache_type_k, cache_type_v; /* -ctkd / -ctvd; 0: F16 */
};

struct eng_spec_params {
    enum eng_spec_type type; /* ngram-simple, tried first (llama.cpp's order) */
    int size_n; /* the key: the last size_n tokens, looked for earlier (llama.cpp's 12) */
    int size_m; /* the most tokens a draft takes after the key's match (llama.cpp's 48) */
    struct eng_spec_draft_params draft; /* then the draft model's */
};

#define ENG_SPEC_PARAMS_DEFAULT                                                                    \
    ((struct eng_spec_params){ ENG_SPEC_NONE, 12, 48, { NULL, false, 3, 0, 0.0f, 0, 0, 0 } })

/* Whether p drafts at all (ngram-simple, a draft model or both). */
static inline bool eng_spec_on(const struct eng_spec_params *p)
{
    return p->type != ENG_SPEC_NONE || p->draft.model;
}

/* The most draft tokens one span verifies: the sampled token and its draft
 * stay a short span, whose rows are decode rows on every backend. */
#define ENG_SPEC_DRAFT_MAX (ENG_SPAN_SHORT_MAX - 1)

/* "none", "ngram-simple" and back: the type, -1 for another word. */
int eng_spec_type_parse(const char *s);
const char *eng_spec_type_name(enum eng_spec_type t);

/* A draft for a sequence whose tokens are a[0..na) followed by b[0..nb)
 * (prompt, then generated; the last is the token just sampled): at most
 * max tokens into out, as llama.cpp's ngram-simple finds them (the latest
 * earlier occurrence of the last size_n tokens, not at position 0; the
 * tokens after it, at most size_m and at least size_n of them, else none;
 * a history of more than size_n + size_m + 1 tokens). Returns the count. */
int eng_spec_draft(const struct eng_spec_params *p, const int32_t *a, int na, const int32_t *b,
                   int nb, int32_t *out, int max);

#endif

/* dry.h: llama.cpp's DRY ("Don't Repeat Yourself") penalty, one step of the
 * sampler chain (text/sampler.h holds its parameters).
 *
 * Of the last penalty_last_n accepted tokens, each place where the text's
 * final tokens occurred before is a repeat; the token that followed that
 * place would continue it. A continuing token of a repeat n >= allowed
 * tokens long loses multiplier * base^(n - allowed) (the exponent capped so
 * that the power stays a finite float). Sequence breakers (strings such as
 * "\n" or ":") cut repeats: no repeat reaches back past the latest one, and
 * a token that is a breaker by itself is never penalised. A breaker is
 * matched as the vocabulary spells it: every token whose text holds it, and
 * every token whose text ends in a start of it followed by the tokens of
 * the rest (llama.cpp's get_overlapping_token_sequences, at most 20 of
 * them). */
#ifndef FL_DRY_H
#define FL_DRY_H

#include <stdint.h>

struct fl_dry;
struct fl_candidate;
struct fl_token_ring;
struct fl_sampler_params;
struct fl_tokenizer;

/* NULL in *out (and 0) when p leaves DRY off. tok may be NULL when p has no
 * breakers; -EINVAL otherwise, or for a negative allowed length; -ENOMEM. */
int fl_dry_new(const struct fl_sampler_params *p, const struct fl_tokenizer *tok,
               struct fl_dry **out);
void fl_dry_free(struct fl_dry *d);

/* Lowers the logits of the n candidates that would continue a repeat in
 * the latest dry_penalty_last_n tokens of hist (the sampler's accepted
 * tokens, prompt tokens too). */
void fl_dry_apply(struct fl_dry *d, const struct fl_token_ring *hist, struct fl_candidate *c,
                  int32_t n);

#endif

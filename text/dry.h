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

#include <stdbool.h>
#include <stdint.h>

struct fl_dry;
struct fl_candidate;
struct fl_token_ring;
struct fl_sampler_params;
struct fl_tokenizer;

/* The breakers of some strings as a vocabulary spells them: built from the
 * whole vocabulary (2-8 ms on 32k-150k tokens), so a server builds them
 * once and hands them to every request that names the same strings
 * (fl_sampler_params.dry_table). Reference-counted: a sampler keeps its
 * own reference; the tokenizer must outlive them. -EINVAL for 0 or more
 * than FL_DRY_MAX_BREAKERS strings or no tokenizer, -ENOMEM. */
struct fl_dry_breakers;
int fl_dry_breakers_new(const char *const *strings, int32_t n, const struct fl_tokenizer *tok,
                        struct fl_dry_breakers **out);
struct fl_dry_breakers *fl_dry_breakers_ref(struct fl_dry_breakers *b);
void fl_dry_breakers_unref(struct fl_dry_breakers *b);
/* Whether b was built from these strings (in this order) over tok. */
bool fl_dry_breakers_match(const struct fl_dry_breakers *b, const struct fl_tokenizer *tok,
                           const char *const *strings, int32_t n);

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

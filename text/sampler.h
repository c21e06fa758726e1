/* sampler.h: picks the next token from a row of logits, with llama.cpp's
 * samplers in llama.cpp's default order:
 *
 *   repetition penalties (over the last N accepted tokens)
 *   -> top-k -> top-p -> min-p -> temperature -> seeded draw
 *
 * Temperature 0 (or below) is greedy: the argmax of the penalised logits,
 * ties to the lowest id. Draws use the sampler's own PRNG (xoshiro256**
 * seeded through splitmix64), so a seed gives the same tokens on every
 * machine and build. Not thread-safe: one sampler per generation. */
#ifndef FL_SAMPLER_H
#define FL_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fl_sampler;

struct fl_sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off; > 1 discourages repeats */
    float frequency_penalty; /* subtracted once per occurrence; 0: off */
    float presence_penalty;  /* subtracted once if present; 0: off */
    int32_t penalty_last_n;  /* how many recent tokens the penalties see; 0: off */
    uint64_t seed;
};

/* One surviving candidate: its id, its logit after the penalties (and
 * temperature, once applied) and its probability among the survivors. */
struct fl_candidate {
    int32_t id;
    float logit;
    float p;
};

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * no penalties (repeat 1.0 over the last 64), the given seed. */
void fl_sampler_defaults(struct fl_sampler_params *p, uint64_t seed);

/* Returns 0, -EINVAL for bad parameters (n_vocab < 1, NaN or negative
 * values where they make no sense), -ENOMEM. */
int fl_sampler_new(const struct fl_sampler_params *p, int32_t n_vocab, struct fl_sampler **out);
void fl_sampler_free(struct fl_sampler *s);

/* Picks a token from n_vocab logits (not modified). Returns the id, or
 * -EINVAL when no logit is finite. Does not record the token: call
 * fl_sampler_accept with whatever token is actually fed back. */
int32_t fl_sampler_sample(struct fl_sampler *s, const float *logits);

/* Records a token (prompt tokens too) for the repetition penalties. */
void fl_sampler_accept(struct fl_sampler *s, int32_t id);

/* Forgets the history and restarts the PRNG from seed. */
void fl_sampler_reset(struct fl_sampler *s, uint64_t seed);

/* The candidates that survive the penalties and filters, in draw order
 * (highest logit first, ties lowest id first), with probabilities that sum
 * to 1. At temperature <= 0 only the greedy token survives. Returns how
 * many survive (written to out when <= max), or -ENOSPC, -EINVAL. */
int fl_sampler_candidates(struct fl_sampler *s, const float *logits, struct fl_candidate *out,
                          int max);

/* The next raw PRNG output, a double in [0, 1) (for tests). */
double fl_sampler_uniform(struct fl_sampler *s);

#endif

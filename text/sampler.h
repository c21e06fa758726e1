/* sampler.h: picks the next token from a row of logits, with llama.cpp's
 * samplers run as a chain in an order the caller may choose (llama.cpp's
 * `--samplers`). The default is llama.cpp's default chain:
 *
 *   penalties -> dry -> top_n_sigma -> top_k -> typ_p -> top_p -> min_p
 *     -> xtc -> temperature (dynamic with a range) -> seeded draw
 *
 * where dry, top_n_sigma and xtc are no-ops at their defaults (dry:
 * multiplier 0, top_n_sigma: -1, xtc: probability 0). Mirostat (1 or 2)
 * replaces the chain as in llama.cpp: temperature, then mirostat's own
 * truncation and draw.
 *
 * Temperature <= 0 at the temperature step keeps only the best candidate
 * (ties to the lowest id), so with the default order it is greedy: the
 * argmax of the penalised logits. As in llama.cpp, a sampler left out of the
 * order is not run: without "temperature" the temperature is not used.
 * Draws (and XTC's coin) use the sampler's own PRNG (xoshiro256** seeded
 * through splitmix64), so a seed gives the same tokens on every machine and
 * build, not llama.cpp's (its mt19937). Not thread-safe: one sampler per
 * generation. */
#ifndef FL_SAMPLER_H
#define FL_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fl_sampler;
struct fl_err;
struct fl_dry_breakers;

/* The samplers faultline implements, by llama.cpp's names. 0 is no sampler,
 * so a zeroed order entry is caught by fl_sampler_new. */
enum fl_sampler_type {
    FL_SAMPLER_PENALTIES = 1, /* "penalties", letter e */
    FL_SAMPLER_TOP_K,         /* "top_k", k */
    FL_SAMPLER_TYPICAL_P,     /* "typ_p", y */
    FL_SAMPLER_TOP_P,         /* "top_p", p */
    FL_SAMPLER_MIN_P,         /* "min_p", m */
    FL_SAMPLER_TEMPERATURE,   /* "temperature", t */
    FL_SAMPLER_DRY,           /* "dry", d */
    FL_SAMPLER_TOP_N_SIGMA,   /* "top_n_sigma", s */
    FL_SAMPLER_XTC,           /* "xtc", x */
};

/* The longest order; llama.cpp has no limit, but a sampler named twice runs
 * twice and more than this is a typo, not a chain. */
#define FL_SAMPLER_MAX_ORDER 16

/* The default order in both of llama.cpp's spellings (for --help texts). */
#define FL_SAMPLER_DEFAULT_ORDER \
    "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"
#define FL_SAMPLER_DEFAULT_SEQ "edskypmxt"

/* DRY's sequence breakers: at most this many, each cut to 40 bytes as
 * llama.cpp cuts them. */
#define FL_DRY_MAX_BREAKERS 16

/* The penalties' and DRY's windows look at most this many tokens back
 * (more than any context: a larger window is the same window). */
#define FL_SAMPLER_MAX_WINDOW (1 << 20)

struct fl_sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float typical_p;         /* llama.cpp's typical_p (--typical); >= 1: off. Not off at 0:
                              * a zeroed struct keeps only the most typical token, so start
                              * from fl_sampler_defaults */
    int32_t min_keep;        /* llama.cpp's --min-keep: top_p, min_p and typ_p keep at least
                              * this many; 0 (the default) or 1: no floor beyond one token */
    float repeat_penalty;    /* 1: off; > 1 discourages repeats */
    float frequency_penalty; /* subtracted once per occurrence; 0: off */
    float presence_penalty;  /* subtracted once if present; 0: off */
    int32_t penalty_last_n;  /* how many recent tokens the penalties see; 0: off */
    /* DRY (llama.cpp's, after Koboldcpp): a token that would continue a
     * repeat of n >= dry_allowed_length tokens within the last
     * dry_penalty_last_n loses dry_multiplier * dry_base^(n - allowed);
     * a breaker string (as the vocabulary spells it) ends a repeat. Off
     * when the multiplier is 0, the base below 1 or last_n 0. The strings
     * are read by fl_sampler_new only. */
    float dry_multiplier, dry_base;
    int32_t dry_allowed_length, dry_penalty_last_n;
    const char *dry_breakers[FL_DRY_MAX_BREAKERS];
    int32_t n_dry_breakers;
    /* Breakers built before (text/dry.h), used instead of building them
     * when they are these strings over this tokenizer; NULL: build. */
    struct fl_dry_breakers *dry_table;
    float top_n_sigma;       /* keeps logits within n std devs of the best; <= 0: off */
    float xtc_probability;   /* XTC: the chance per step of removing every candidate */
    float xtc_threshold;     /* at or above this probability but the least likely one;
                              * probability <= 0 or threshold > 0.5: off */
    float dynatemp_range;    /* temperature +- range by the candidates' entropy; <= 0: off */
    float dynatemp_exponent;
    int32_t mirostat;        /* 0: the chain; 1 or 2: Mirostat (v1 over the top 100) */
    float mirostat_tau, mirostat_eta;
    uint64_t seed;
    /* The chain, first sampler first; n_order 0 is the default order (so a
     * zeroed struct runs the same chain as fl_sampler_defaults). */
    int32_t n_order;
    enum fl_sampler_type order[FL_SAMPLER_MAX_ORDER];
};

/* One surviving candidate: its id, its logit after the penalties (and
 * temperature, once applied) and its probability among the survivors. */
struct fl_candidate {
    int32_t id;
    float logit;
    float p;
};

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * typical off (1.0), min-keep 0, no penalties (repeat 1.0 over the last 64),
 * DRY off (multiplier 0; base 1.75, allowed length 2, last 64, breakers
 * "\n" ":" "\"" "*"), top-n-sigma off (-1), XTC off (0, threshold 0.1),
 * dynamic temperature off (range 0, exponent 1), mirostat off (tau 5, eta
 * 0.1), the default order written out, the given seed. */
void fl_sampler_defaults(struct fl_sampler_params *p, uint64_t seed);

/* Sets p's order from llama.cpp's `--samplers` string: names separated by
 * ';', case-insensitive, with llama.cpp's aliases (top-k, topk, nucleus,
 * typ, typ-p, typp, temp, min-p, minp, ...); blanks around a name are
 * ignored, and a name may repeat (it runs twice). Returns 0, or -EINVAL with
 * one line in err naming the bad entry: an unknown name, an empty one, more
 * than FL_SAMPLER_MAX_ORDER, one of llama.cpp's samplers faultline does not
 * implement (infill, adaptive_p), or mirostat (no step of an order: llama.cpp
 * selects it with --mirostat). p is unchanged on error. */
int fl_sampler_parse_order(const char *names, struct fl_sampler_params *p, struct fl_err *err);

/* The same from llama.cpp's `--sampling-seq` / `--sampler-seq` letters
 * (case-sensitive): e penalties, d dry, s top_n_sigma, k top_k, y typ_p,
 * p top_p, m min_p, x xtc, t temperature; i a (infill, adaptive_p) are
 * refused as not implemented. */
int fl_sampler_parse_seq(const char *letters, struct fl_sampler_params *p, struct fl_err *err);

/* The two above, but a name or letter of a sampler faultline lacks (infill,
 * adaptive_p, mirostat) is left out of the order instead of refused: for a
 * server request (llama-server's clients may send an order naming them).
 * An order left with no sampler is refused (an empty order would mean the
 * default). */
int fl_sampler_parse_order_lenient(const char *names, struct fl_sampler_params *p,
                                   struct fl_err *err);
int fl_sampler_parse_seq_lenient(const char *letters, struct fl_sampler_params *p,
                                 struct fl_err *err);

/* llama.cpp's canonical name of a sampler ("typ_p"), NULL if t is none. */
const char *fl_sampler_type_name(enum fl_sampler_type t);

/* Returns 0, -EINVAL for bad parameters (n_vocab < 1, NaN or negative
 * values where they make no sense, an order entry that is no sampler or
 * n_order outside 0..FL_SAMPLER_MAX_ORDER, mirostat not 0, 1 or 2, DRY on
 * with breakers but no tok), -ENOMEM. tok (may be NULL unless DRY is on
 * with breakers) spells DRY's breakers; fl_n_vocab(tok) must be n_vocab. */
struct fl_tokenizer;
int fl_sampler_new(const struct fl_sampler_params *p, int32_t n_vocab,
                   const struct fl_tokenizer *tok, struct fl_sampler **out);
void fl_sampler_free(struct fl_sampler *s);

/* Picks a token from n_vocab logits (not modified). Returns the id, or
 * -EINVAL when no logit is finite. Does not record the token: call
 * fl_sampler_accept with whatever token is actually fed back. */
int32_t fl_sampler_sample(struct fl_sampler *s, const float *logits);

/* Records a token (prompt tokens too) for the repetition penalties. */
void fl_sampler_accept(struct fl_sampler *s, int32_t id);

/* Forgets the history and restarts the PRNG from seed. */
void fl_sampler_reset(struct fl_sampler *s, uint64_t seed);

/* OpenAI's logit_bias: bias is added to token id's logit before every step
 * of the chain (llama.cpp runs its logit-bias sampler first too); -INFINITY
 * bans the token. */
struct fl_logit_bias {
    int32_t id;
    float bias;
};
/* Sets the biases (replacing any before; n = 0 clears them). 0, -EINVAL for
 * an id outside the vocabulary or a NaN bias, -ENOMEM. */
int fl_sampler_set_bias(struct fl_sampler *s, const struct fl_logit_bias *v, int n);

/* The candidates that survive the chain, in draw order (highest logit
 * first, ties lowest id first), with probabilities that sum to 1. With
 * temperature <= 0 at the temperature step only one survives. Returns how
 * many survive (written to out when <= max), or -ENOSPC, -EINVAL. */
int fl_sampler_candidates(struct fl_sampler *s, const float *logits, struct fl_candidate *out,
                          int max);

/* The next raw PRNG output, a double in [0, 1) (for tests). */
double fl_sampler_uniform(struct fl_sampler *s);

#endif

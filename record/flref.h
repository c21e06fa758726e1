/* flref.h: the FLRF (logits) and FLRT (expert routing) files that
 * llama.cpp's reference runs and `faultline eval` write, as described in
 * tests/data/ref/README.md. All values little-endian; readers check the
 * magic, version and that the size matches the header exactly. */
#ifndef FL_FLREF_H
#define FL_FLREF_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

struct flref_logits {
    int32_t n_tokens, n_vocab;
    int32_t *tokens;   /* [n_tokens] prompt ids as evaluated */
    float *logits;     /* [n_tokens][n_vocab] */
    int32_t n_gen;
    int32_t *gen;      /* [n_gen] greedy continuation */
};

struct flref_routing {
    int32_t n_pos, n_layers, k;
    int32_t *layer_idx; /* [n_layers] block index of each MoE layer */
    int32_t *ids;       /* [n_pos][n_layers][k] */
    float *weights;     /* [n_pos][n_layers][k] */
};

/* Readers return 0, -errno for I/O errors or -EINVAL for a malformed file,
 * with "PATH: problem" in err. Free with the matching _free (also after a
 * failed read; a zeroed struct is fine). */
int flref_logits_read(const char *path, struct flref_logits *out, struct fl_err *err);
int flref_logits_write(const char *path, const struct flref_logits *r, struct fl_err *err);
void flref_logits_free(struct flref_logits *r);

int flref_routing_read(const char *path, struct flref_routing *out, struct fl_err *err);
int flref_routing_write(const char *path, const struct flref_routing *r, struct fl_err *err);
void flref_routing_free(struct flref_routing *r);

/* --- comparison (faultline compare, tests) ---------------------------------
 * OURS may cover more positions than REF: `faultline eval --all-logits`
 * also writes the logits of the generated positions (its tokens then go on
 * with its own greedy tokens), which lets the greedy comparison judge a
 * near-tie after the prompt. */
/* KL(softmax(p) || softmax(q)) in nats, in double (never below 0). */
double flref_kl(const float *p_logits, const float *q_logits, int32_t n);

struct flref_cmp {
    int n_pos;            /* prompt positions compared (REF's n_tokens) */
    double *pos_max_abs;  /* [n_pos] max |ref - ours| */
    double *pos_kl;       /* [n_pos] KL(ref || ours) in nats */
    int *pos_top1;        /* [n_pos] 1 when the argmaxes agree */
    double max_abs, mean_abs, mean_kl, max_kl, median_kl;
    int top1_agree;
    int n_gen;            /* greedy tokens compared */
    int gen_same;         /* length of the identical prefix */
    bool gen_near_tie;    /* the first difference is at a near-tie */
    bool gen_ok;          /* identical, or identical up to a near-tie */
};

/* Compares ours with ref: same prompt ids required (-EINVAL otherwise, and
 * for a vocab mismatch). near_tie: the logit gap that makes two tokens a tie
 * (0.1 in the acceptance tests). Free with flref_cmp_free. */
int flref_compare(const struct flref_logits *ref, const struct flref_logits *ours, double near_tie,
                  struct flref_cmp *out, struct fl_err *err);
void flref_cmp_free(struct flref_cmp *c);

/* Argmax of n logits, ties to the lowest id (llama.cpp's greedy). */
int32_t flref_argmax(const float *logits, int32_t n);

/* Calls fn for every (position, layer) where the expert SETS differ, over
 * the layers and the first positions both files have (at most max_pos when
 * max_pos >= 0: past a greedy divergence the inputs differ); returns how
 * many differ, or -EINVAL when k or the layer lists differ. */
typedef void (*flref_diff_fn)(void *arg, int pos, int layer, const int32_t *ref_ids,
                              const int32_t *our_ids, int k);
int flref_routing_diff(const struct flref_routing *ref, const struct flref_routing *ours,
                       int max_pos, flref_diff_fn fn, void *arg, struct fl_err *err);

#endif

/* predict.h: expert predictors that turn routing into prefetches
 * (--prefetch none|router|lookahead[:D]|history[:W]), and their precision
 * and recall against what the router then chose.
 *
 * The predictor sits between the engine and the pager as the engine's
 * expert source. After each MoE layer's router runs, fl_predictor_route gets
 * the experts it chose (union over the batch). It then
 *   1. scores the prediction made earlier for that layer (if any),
 *   2. cancels the prefetches still queued (stale now),
 *   3. prefetches the chosen experts (every predictor but `none`), and
 *   4. predicts later layers and prefetches those, behind the chosen ones:
 *      lookahead:D applies the routers of the next D MoE layers to this
 *      layer's FFN input (given by fl_predictor_hidden just before);
 *      history:W predicts the next MoE layer (wrapping to the next token's
 *      first) from its choices in the last W tokens, recent ones weighing more.
 * Prefetches are the pager's low-priority reads: demand reads go first and
 * a stale one is dropped before it starts. Predictions never touch the
 * computation, so the logits do not change.
 *
 * Precision = hits / predicted, recall = hits / chosen, summed over the
 * (token, layer) routings that had a prediction; a prediction for a layer
 * is the union of everything predicted for it since it last routed. */
#ifndef FL_PREDICT_H
#define FL_PREDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "pager/pager.h"

struct pager;
struct eng_expert_source;

enum fl_predict_kind { FL_PREDICT_NONE = 0, FL_PREDICT_ROUTER, FL_PREDICT_LOOKAHEAD,
                       FL_PREDICT_HISTORY };

struct fl_predict_config {
    enum fl_predict_kind kind;
    int depth;   /* lookahead: layers ahead (1..8) */
    int window;  /* history: tokens remembered (1..64) */
};

/* The default: lookahead:1 (it won at a 25 % cap, docs/prefetch.md). */
void fl_predict_config_init(struct fl_predict_config *c);
/* "none", "router", "lookahead", "lookahead:D", "history", "history:W";
 * -EINVAL with err otherwise. */
int fl_predict_parse(const char *s, struct fl_predict_config *out, struct fl_err *err);
/* "lookahead:2" etc. into buf. */
const char *fl_predict_name(const struct fl_predict_config *c, char *buf, size_t n);

struct fl_predictor;

/* pager: where prefetches go (NULL: accounting only, as on a recorded
 * trace). m: the model, whose routers (eng_model_router) say which blocks
 * are MoE layers and are what lookahead applies; NULL except for lookahead
 * (then every block is a MoE layer); lookahead skips layers whose router is
 * not F32. Errors: -EINVAL, -ENOMEM. */
struct eng_model;
int fl_predictor_create(const struct fl_predict_config *cfg, struct pager *pager,
                        const struct eng_model *m, int n_layers, int n_expert, int n_used,
                        struct fl_predictor **out, struct fl_err *err);
void fl_predictor_free(struct fl_predictor *pr);

/* The engine's expert source: the pager's, with prefetch going through
 * fl_predictor_route. Needs a pager. */
void fl_predictor_source(struct fl_predictor *pr, struct eng_expert_source *src);

/* Layer `layer`'s FFN input (n_tok rows of n_embd, after its norm), right
 * before its routing is given to fl_predictor_route; only lookahead uses it. */
void fl_predictor_hidden(struct fl_predictor *pr, int layer, const float *x, int64_t n_tok);
/* What the router chose in a layer; 0 or the pager's -errno. */
int fl_predictor_route(struct fl_predictor *pr, int layer, const int32_t *experts, int n);

struct fl_predict_stats {
    uint64_t scored;     /* routings that had a prediction */
    uint64_t predicted;  /* experts predicted for them */
    uint64_t hits;       /* of those, chosen */
    uint64_t chosen;     /* experts chosen in them */
    /* With a pager: experts the router chose, and how many of those were
     * resident already (the cache policy's and the predictions' hit rate). */
    uint64_t routed, ready;
};
void fl_predictor_stats(const struct fl_predictor *pr, struct fl_predict_stats *st);
void fl_predictor_stats_reset(struct fl_predictor *pr);
/* hits / predicted and hits / chosen; -1 when nothing was predicted. */
double fl_predict_precision(const struct fl_predict_stats *st);
double fl_predict_recall(const struct fl_predict_stats *st);

/* `faultline bench`'s paging columns over `tokens` tokens since the last
 * pager_stats_reset + fl_predictor_stats_reset. disk_bps: the disk's read
 * bandwidth in bytes/s (0: io_bound_tps is 0). Percentages are -1 where
 * there is nothing to divide (no prediction, nothing routed). */
struct fl_paging_row {
    double hit_pct;            /* routed experts resident when chosen */
    double precision_pct, recall_pct;
    double mib_per_token;      /* bytes read */
    double stall_ms_per_token; /* waiting for expert bytes */
    double io_bound_tps;       /* disk_bps / bytes read per token */
};
void fl_paging_row(struct pager *p, const struct fl_predictor *pr, uint64_t tokens,
                   double disk_bps, struct fl_paging_row *out);
/* The same from counters the caller took (e.g. the difference of two
 * snapshots around a timed section). */
void fl_paging_row_of(const struct pager_totals *t, const struct fl_predict_stats *st,
                      uint64_t tokens, double disk_bps, struct fl_paging_row *out);

#endif

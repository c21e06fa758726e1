/* stats-json.h: the pager's statistics as the --stats-json document, and
 * that document read back as a pinned-hot profile (--cache
 * pinned-hot:STATS.json). One writer and one reader of the format, over
 * base/json.h. */
#ifndef FL_STATS_JSON_H
#define FL_STATS_JSON_H

#include <stdio.h>

#include <stdint.h>

#include "base/error.h"
#include "pager/pager.h"

/* A predictor's figures (app/predict.h computes them); precision and
 * recall below 0 mean nothing was predicted / chosen (written as null). */
struct eng_stats_prediction {
    const char *predictor; /* "lookahead:1" etc. */
    uint64_t routed, ready, scored, predicted, hits, chosen;
    double precision, recall;
};

/* The document: mode, budgets, totals, the stall histogram, one object per
 * unit with activity, and (pred not NULL) the predictor's figures under
 * "prediction". 0 or -ENOMEM / -EIO. */
int eng_stats_json_write(FILE *f, const struct pager *p, const struct eng_stats_prediction *pred);

/* Reads the per-expert objects of a --stats-json file; an expert's heat is
 * its acquires (cache hits + prefetch hits + misses) plus its faults.
 * *out is malloc'ed (free it). -errno/-EINVAL with "FILE: problem". */
int eng_hot_profile_load(const char *path, struct pager_hot_unit **out, int *n,
                         struct fl_err *err);

#endif

/* calibrate.c: see app/calibrate.h. */
#include "app/calibrate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "app/session.h"
#include "text/tokenizer.h"
#include "base/whole-file.h"
#include "model/arch.h"

#define CALIBRATE_MAX_BYTES ((size_t)64 << 20)

struct selection_counts {
    int n_layer, n_expert;
    uint64_t *count; /* [n_layer][n_expert] */
};

static void count_routing(void *ctx, int layer, const struct eng_batch *b, int k,
                          const int32_t *ids, const float *weights)
{
    (void)weights;
    struct selection_counts *c = ctx;
    if (layer < 0 || layer >= c->n_layer)
        return;
    for (int64_t i = 0; i < (int64_t)b->n_tok * k; i++)
        if (ids[i] >= 0 && ids[i] < c->n_expert)
            c->count[(int64_t)layer * c->n_expert + ids[i]]++;
}

/* The file's text as tokens, the way prompts are tokenized (BOS per the file). */
static int read_tokens(const struct fl_tokenizer *tok, const char *path, int32_t **out,
                       struct fl_err *err)
{
    char *text;
    size_t len;
    int rc = fl_read_whole_file(path, CALIBRATE_MAX_BYTES, &text, &len);
    if (rc)
        return fl_err_set(err, rc, "--calibrate %s: %s", path,
                          rc == -EFBIG ? "larger than 64 MiB" : strerror(-rc));
    int32_t *ids = NULL;
    int n = fl_tokenize_alloc(tok, text, len, true, false, &ids);
    free(text);
    if (n < 0)
        return fl_err_set(err, n, "--calibrate %s: cannot tokenize it: %s", path, strerror(-n));
    if (n < 2) {
        free(ids);
        return fl_err_set(err, -EINVAL, "--calibrate %s: no text to calibrate on", path);
    }
    *out = ids;
    return n;
}

static int collect(const struct selection_counts *c, struct pager_hot_unit **out, int *n)
{
    int64_t cells = (int64_t)c->n_layer * c->n_expert, used = 0;
    for (int64_t i = 0; i < cells; i++)
        used += c->count[i] > 0;
    struct pager_hot_unit *v = malloc(sizeof(*v) * (size_t)(used ? used : 1));
    if (!v)
        return -ENOMEM;
    int k = 0;
    for (int64_t i = 0; i < cells; i++)
        if (c->count[i])
            v[k++] = (struct pager_hot_unit){ (int32_t)(i / c->n_expert),
                                              (int32_t)(i % c->n_expert), c->count[i] };
    *out = v;
    *n = k;
    return 0;
}

int eng_calibrate(struct eng_session *s, const char *prompt_path,
                  const struct fl_progress *progress, struct pager_hot_unit **out,
                  int *n, int64_t *n_tokens, struct fl_err *err)
{
    const struct eng_hparams *hp = &eng_session_model(s)->hp;
    struct selection_counts c = { (int)hp->n_layer, (int)hp->n_expert, NULL };
    int32_t *ids = NULL;
    int n_ids = read_tokens(eng_session_tokenizer(s), prompt_path, &ids, err);
    if (n_ids < 0)
        return n_ids;
    c.count = calloc((size_t)c.n_layer * (size_t)(c.n_expert > 0 ? c.n_expert : 1),
                     sizeof(*c.count));
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    int rc = c.count && logits ? 0 : fl_err_set(err, -ENOMEM, "--calibrate: out of memory");
    struct eng_routing_sink sink = { &c, count_routing };
    eng_session_set_routing(s, &sink);
    const int window = eng_session_n_ctx(s);
    for (int done = 0; !rc && done < n_ids; done += window) {
        int len = n_ids - done < window ? n_ids - done : window;
        eng_session_reset(s);
        rc = eng_session_eval(s, ids + done, len, false, logits, err);
        fl_progress_report(progress, "calibrating", "tokens", (uint64_t)(done + len),
                           (uint64_t)n_ids, false);
    }
    fl_progress_report(progress, "calibrating", "tokens", (uint64_t)n_ids, (uint64_t)n_ids, true);
    eng_session_set_routing(s, NULL);
    eng_session_reset(s);
    if (!rc && (rc = collect(&c, out, n)))
        fl_err_set(err, rc, "--calibrate: out of memory");
    if (!rc)
        *n_tokens = n_ids;
    free(c.count);
    free(logits);
    free(ids);
    return rc;
}

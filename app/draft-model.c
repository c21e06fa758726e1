/* draft-model.c: see app/draft-model.h. */
#include "app/draft-model.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/gpu.h"
#include "model/arch.h"
#include "model/model.h"
#include "text/tokenizer.h"

/* llama.cpp's rules for a draft model's vocabulary (common/speculative.cpp) */
#define VOCAB_MAX_SIZE_DIFFERENCE 128
#define VOCAB_CHECK_START_TOKEN_ID 5
/* the draft's probability is its top token's among the 10 likeliest
 * (llama.cpp's draft sampler: top-k 10, then the softmax) */
#define DRAFT_TOP_K 10
/* A history's last tokens up to this many go into the first drafting
 * call with its last token (a draft kept whole leaves two unread: one
 * call fewer a step), the rest into calls of their own */
#define DRAFT_TAIL 16

struct eng_drafter {
    struct eng_session *s;
    struct eng_spec_draft_params p;
    int n_seq, n_ctx, n_batch, n_vocab, n_target_vocab;
    int32_t **fed; /* [n_seq]: the tokens each sequence's cells hold, in order */
    int *n_fed, *cap_fed;
    /* a recurrent draft model's state after each sequence's history (its
     * drafts' positions are taken back to it), and the positions it covers
     * (-1: none) */
    float *rs_snap;
    size_t rs_floats;
    int *snap_pos;
    int32_t *tokens;          /* [n_batch + n_seq] one forward call's */
    struct eng_span *spans;   /* [n_seq] */
    int *job_of;              /* [n_seq]: the job of each span */
    float *logits;            /* [n_seq][n_vocab] */
};

/* The vocabularies agree as llama.cpp asks (its wording). */
static int vocab_check(const struct fl_tokenizer *t, const struct fl_tokenizer *d,
                       struct fl_err *err)
{
    if (fl_tokenizer_model(t) != fl_tokenizer_model(d))
        return fl_err_set(err, -EINVAL, "the draft model's vocabulary is of another type than "
                          "the target's");
    if (fl_tokenizer_add_bos(t) != fl_tokenizer_add_bos(d) ||
        (fl_tokenizer_add_bos(t) && fl_token_bos(t) != fl_token_bos(d)))
        return fl_err_set(err, -EINVAL, "the draft model's BOS token is not the target's");
    if (fl_tokenizer_add_eos(t) != fl_tokenizer_add_eos(d) ||
        (fl_tokenizer_add_eos(t) && fl_token_eos(t) != fl_token_eos(d)))
        return fl_err_set(err, -EINVAL, "the draft model's EOS token is not the target's");
    const int nt = fl_n_vocab(t), nd = fl_n_vocab(d);
    if (abs(nt - nd) > VOCAB_MAX_SIZE_DIFFERENCE)
        return fl_err_set(err, -EINVAL, "the draft model's vocabulary has %d tokens, the "
                          "target's %d (at most %d apart)", nd, nt, VOCAB_MAX_SIZE_DIFFERENCE);
    for (int i = VOCAB_CHECK_START_TOKEN_ID; i < nt && i < nd; i++) {
        const char *a = fl_token_text(t, i), *b = fl_token_text(d, i);
        if (strcmp(a ? a : "", b ? b : ""))
            return fl_err_set(err, -EINVAL, "token %d of the draft model's vocabulary is not "
                              "the target's", i);
    }
    return 0;
}

static int check_params(const struct eng_spec_draft_params *p, struct fl_err *err)
{
    if (p->n_max < 1 || p->n_max > ENG_SPEC_DRAFT_MAX)
        return fl_err_set(err, -EINVAL, "--spec-draft-n-max is 1 to %d here (a draft and its "
                          "token stay a span of decode rows), not %d", ENG_SPEC_DRAFT_MAX, p->n_max);
    if (p->n_min < 0 || p->n_min > p->n_max)
        return fl_err_set(err, -EINVAL, "--spec-draft-n-min is 0 to --spec-draft-n-max (%d), "
                          "not %d", p->n_max, p->n_min);
    if (!(p->p_min >= 0.0f && p->p_min <= 1.0f))
        return fl_err_set(err, -EINVAL, "--spec-draft-p-min is a probability (0 to 1)");
    return 0;
}

/* The draft model's session: the target's sequences, context, batch and
 * threads; on the CPU, no prompt cache. */
static int open_session(struct eng_drafter *d, struct eng_session *target,
                        struct fl_err *err)
{
    struct eng_session_params sp;
    eng_session_params_init(&sp);
    sp.model_path = d->p.model;
    sp.n_ctx = eng_session_n_ctx(target);
    sp.n_batch = eng_session_n_batch(target);
    sp.n_seq = eng_session_n_seq(target);
    sp.no_prompt_cache = true;
    sp.n_threads = d->p.n_threads > 0 ? d->p.n_threads : eng_session_n_threads(target);
    sp.placement.n_gpu_layers = 0;
    sp.gpu_experts = ENG_GPU_EXPERTS_NONE;
    sp.cache_type_k = d->p.cache_type_k;
    sp.cache_type_v = d->p.cache_type_v;
    sp.check_tensors = eng_session_checked_tensors(target);
    struct fl_err e = { 0 };
    int rc = eng_session_open(&sp, &d->s, &e);
    if (rc)
        return fl_err_set(err, rc, "draft model: %s", e.msg);
    rc = vocab_check(eng_session_tokenizer(target), eng_session_tokenizer(d->s), &e);
    if (rc)
        return fl_err_set(err, rc, "draft model %s: %s", d->p.model, e.msg);
    /* the target's auto expert budget makes room for it (else it is refused
     * in one line): a memory cgroup would kill the process later */
    return eng_session_fit_beside(target, eng_session_host_need(d->s), err);
}

int eng_drafter_open(struct eng_session *target, const struct eng_spec_draft_params *p,
                     struct eng_drafter **out, struct fl_err *err)
{
    *out = NULL;
    int rc = check_params(p, err);
    if (rc)
        return rc;
    struct eng_drafter *d = calloc(1, sizeof(*d));
    if (!d)
        return fl_err_set(err, -ENOMEM, "out of memory");
    d->p = *p;
    if ((rc = open_session(d, target, err))) {
        eng_drafter_close(d);
        return rc;
    }
    d->n_seq = eng_session_n_seq(d->s);
    d->n_ctx = eng_session_n_ctx(d->s);
    d->n_batch = eng_session_n_batch(d->s);
    d->n_vocab = (int)eng_session_model(d->s)->hp.n_vocab;
    d->n_target_vocab = (int)eng_session_model(target)->hp.n_vocab;
    d->fed = calloc((size_t)d->n_seq, sizeof(*d->fed));
    d->n_fed = calloc((size_t)d->n_seq, sizeof(int));
    d->cap_fed = calloc((size_t)d->n_seq, sizeof(int));
    const int most = d->n_batch > d->n_seq * DRAFT_TAIL ? d->n_batch : d->n_seq * DRAFT_TAIL;
    d->tokens = malloc(sizeof(int32_t) * (size_t)most);
    d->spans = malloc(sizeof(*d->spans) * (size_t)d->n_seq);
    d->job_of = malloc(sizeof(int) * (size_t)d->n_seq);
    d->logits = malloc(sizeof(float) * (size_t)d->n_seq * (size_t)d->n_vocab);
    d->rs_floats = eng_session_rs_seq_floats(d->s);
    d->snap_pos = malloc(sizeof(int) * (size_t)d->n_seq);
    if (d->rs_floats)
        d->rs_snap = malloc(sizeof(float) * d->rs_floats * (size_t)d->n_seq);
    for (int i = 0; d->snap_pos && i < d->n_seq; i++)
        d->snap_pos[i] = -1;
    if (!d->fed || !d->n_fed || !d->cap_fed || !d->tokens || !d->spans || !d->job_of ||
        !d->logits || !d->snap_pos || (d->rs_floats && !d->rs_snap)) {
        eng_drafter_close(d);
        return fl_err_set(err, -ENOMEM, "out of memory for the draft model's batches");
    }
    *out = d;
    return 0;
}

void eng_drafter_close(struct eng_drafter *d)
{
    if (!d)
        return;
    for (int i = 0; d->fed && i < d->n_seq; i++)
        free(d->fed[i]);
    free(d->fed);
    free(d->n_fed);
    free(d->cap_fed);
    free(d->tokens);
    free(d->spans);
    free(d->job_of);
    free(d->logits);
    free(d->rs_snap);
    free(d->snap_pos);
    eng_session_close(d->s);
    free(d);
}

void eng_drafter_forget(struct eng_drafter *d, int seq)
{
    if (!d || seq < 0 || seq >= d->n_seq)
        return;
    eng_session_seq_free(d->s, seq);
    d->n_fed[seq] = 0;
    d->snap_pos[seq] = -1;
}

/* Token i of job j's history. */
static int32_t hist(const struct eng_draft_job *j, int i)
{
    return i < j->na ? j->a[i] : j->b[i - j->na];
}

static float *snap_of(const struct eng_drafter *d, int seq)
{
    return d->rs_snap + (size_t)seq * d->rs_floats;
}

/* Job j's sequence keeps the start its cells share with the history (never
 * the last token: its row is wanted); a recurrent model's state goes back
 * to its copy when that lies within the start, else to nothing. */
static void keep_common(struct eng_drafter *d, const struct eng_draft_job *j)
{
    const int nh = j->na + j->nb, seq = j->seq;
    int c = 0;
    while (c < d->n_fed[seq] && c < nh - 1 && d->fed[seq][c] == hist(j, c))
        c++;
    if (c == d->n_fed[seq])
        return;
    if (d->rs_snap) /* the copy's positions, or the start */
        c = d->snap_pos[seq] >= 0 && d->snap_pos[seq] <= c ? d->snap_pos[seq] : 0;
    eng_session_seq_truncate(d->s, seq, c);
    if (d->rs_snap && c > 0)
        eng_session_rs_restore(d->s, seq, snap_of(d, seq), c);
    d->n_fed[seq] = c;
}

/* Room for seq's tokens up to position n - 1, in the record and the cells. */
static bool room(struct eng_drafter *d, int seq, int n)
{
    if (n > d->cap_fed[seq]) {
        const int cap = n + n / 2 + 64 < d->n_ctx ? n + n / 2 + 64 : d->n_ctx;
        int32_t *f = realloc(d->fed[seq], sizeof(int32_t) * (size_t)cap);
        if (!f)
            return false;
        d->fed[seq] = f, d->cap_fed[seq] = cap;
    }
    struct fl_err e;
    return eng_session_seq_reserve(d->s, seq, n, &e) == 0;
}

/* One forward call over the first n_span spans; their tokens join the
 * records. */
static int run(struct eng_drafter *d, int n_span, int n_tok, struct fl_err *err)
{
    const struct eng_batch b = { .tokens = d->tokens, .n_tok = n_tok, .spans = d->spans,
                                 .n_spans = n_span, .logits = d->logits };
    int rc = eng_session_forward(d->s, &b, err);
    for (int i = 0, t = 0; !rc && i < n_span; t += d->spans[i++].n_tok) {
        const struct eng_span *sp = &d->spans[i];
        memcpy(d->fed[sp->seq] + sp->pos0, d->tokens + t, sizeof(int32_t) * (size_t)sp->n_tok);
        d->n_fed[sp->seq] = sp->pos0 + sp->n_tok;
    }
    return rc;
}

/* Feeds the jobs' histories but their last DRAFT_TAIL tokens, n_batch
 * tokens a call and read in all (<= 0: no bound); a job whose cells do not
 * fit, or whose history is not read that far, drafts nothing (max = -1). */
static int catch_up(struct eng_drafter *d, struct eng_draft_job *jobs, int n_jobs, int read,
                    struct fl_err *err)
{
    int left = read > 0 ? read : INT_MAX, rc = 0;
    while (!rc && left > 0) {
        int n_span = 0, n_tok = 0;
        const int most = left < d->n_batch ? left : d->n_batch;
        for (int k = 0; k < n_jobs && n_tok < most; k++) {
            struct eng_draft_job *j = &jobs[k];
            const int from = d->n_fed[j->seq], to = j->na + j->nb - DRAFT_TAIL;
            if (j->max < 0 || from >= to)
                continue;
            const int n = to - from < most - n_tok ? to - from : most - n_tok;
            if (!room(d, j->seq, from + n)) {
                j->max = -1;
                continue;
            }
            for (int i = 0; i < n; i++)
                d->tokens[n_tok + i] = hist(j, from + i);
            d->spans[n_span++] = (struct eng_span){ .seq = j->seq, .pos0 = from, .n_tok = n };
            n_tok += n;
        }
        if (!n_span)
            break;
        rc = run(d, n_span, n_tok, err);
        left -= n_tok;
    }
    for (int k = 0; k < n_jobs; k++) /* not read that far: no draft yet */
        if (jobs[k].max >= 0 && d->n_fed[jobs[k].seq] < jobs[k].na + jobs[k].nb - DRAFT_TAIL)
            jobs[k].max = -1;
    return rc;
}

/* The draft's token under a logits row, and its probability among the
 * DRAFT_TOP_K likeliest; -1 when the row has no finite value. */
static int32_t pick(const float *row, int n, float *p)
{
    float top[DRAFT_TOP_K];
    int k = 0;
    int32_t best = -1;
    for (int i = 0; i < n; i++) {
        const float v = row[i];
        if (!isfinite(v) || (k == DRAFT_TOP_K && v <= top[k - 1]))
            continue;
        int at = k < DRAFT_TOP_K ? k++ : k - 1;
        while (at > 0 && top[at - 1] < v) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = v;
        best = at == 0 ? i : best;
    }
    double z = 0;
    for (int i = 0; i < k; i++)
        z += exp((double)top[i] - (double)top[0]);
    *p = k ? (float)(1.0 / z) : 0.0f;
    return best;
}

/* Job j takes the token under its row, or stops drafting (max = 0). */
static void take(struct eng_drafter *d, struct eng_draft_job *j, const float *row)
{
    float p;
    const int32_t id = pick(row, d->n_vocab, &p);
    if (id < 0 || id >= d->n_target_vocab || p < d->p.p_min) {
        j->max = 0;
        return;
    }
    j->out[j->n++] = id;
    if (j->n >= j->max)
        j->max = 0;
}

int eng_drafter_draft(struct eng_drafter *d, struct eng_draft_job *jobs, int n_jobs, int read,
                      struct fl_err *err)
{
    for (int k = 0; k < n_jobs; k++) {
        struct eng_draft_job *j = &jobs[k];
        j->n = 0;
        const int nh = j->na + j->nb;
        /* the draft's last token is never fed: positions up to nh + max - 2 */
        j->max = j->max < d->p.n_max ? j->max : d->p.n_max;
        j->max = d->n_ctx - nh + 1 < j->max ? d->n_ctx - nh + 1 : j->max;
        if (nh < 1 || j->seq < 0 || j->seq >= d->n_seq)
            j->max = -1; /* -1: nothing to do; 0: read the history only */
        if (j->max >= 0)
            keep_common(d, j);
    }
    int rc = catch_up(d, jobs, n_jobs, read, err);
    for (;;) { /* every drafting job per call: its history's tail, then a draft token */
        int n_span = 0, n_tok = 0;
        for (int k = 0; !rc && k < n_jobs; k++) {
            struct eng_draft_job *j = &jobs[k];
            const int pos = d->n_fed[j->seq], nh = j->na + j->nb;
            const int n = j->n ? 1 : nh - pos;
            if (j->max < 1 || !room(d, j->seq, pos + n)) {
                j->max = 0;
                continue;
            }
            for (int i = 0; i < n; i++)
                d->tokens[n_tok + i] = j->n ? j->out[j->n - 1] : hist(j, pos + i);
            d->job_of[n_span] = k;
            d->spans[n_span++] = (struct eng_span){ .seq = j->seq, .pos0 = pos, .n_tok = n,
                                                    .logits = true };
            n_tok += n;
        }
        if (rc || !n_span)
            break;
        if ((rc = run(d, n_span, n_tok, err)))
            break;
        for (int i = 0; i < n_span; i++) {
            struct eng_draft_job *j = &jobs[d->job_of[i]];
            if (d->rs_snap && j->n == 0) { /* the state after the history, before the draft */
                eng_session_rs_save(d->s, j->seq, snap_of(d, j->seq));
                d->snap_pos[j->seq] = d->n_fed[j->seq];
            }
            take(d, j, d->logits + (size_t)i * (size_t)d->n_vocab);
        }
    }
    for (int k = 0; k < n_jobs; k++)
        if (rc || jobs[k].n < d->p.n_min)
            jobs[k].n = 0;
    return rc;
}

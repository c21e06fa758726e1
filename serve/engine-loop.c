/* engine-loop.c: the engine's thread and the jobs (engine-loop.h). */
#include "serve/engine-loop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/predict.h"
#include "base/clock.h"
#include "pager/pager.h"

enum loop_state { LOOP_LOADING, LOOP_RUNNING, LOOP_FAILED, LOOP_DRAINING, LOOP_STOPPING };

struct srv_loop {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* the loop waits here for posts and cancels */
    const struct eng_session_params *params;
    struct eng_spec_params spec;
    enum loop_state state;
    bool stopped;               /* the thread has been joined */
    struct fl_err load_err;
    int load_rc;
    struct eng_session *s;
    struct eng_sched *q;
    struct srv_job *posted, *posted_tail, *cancels;
    int n_posted;
    double drain_until;
    struct srv_stats st;
    struct eng_sched_slot *slots; /* [n_seq]: the sequences after the last step (/slots) */
    char fatal[256];            /* the engine's error that ended the running requests */
    /* a slot action waiting for the loop (one at a time: action_mu), and
     * where its poster waits for it */
    pthread_mutex_t action_mu;
    pthread_cond_t action_cv;
    struct srv_slot_action *action;
    /* tokens/s over a window: generated-token count at the window's start */
    double win_t0;
    uint64_t win_tokens0;
};

/* --- jobs --------------------------------------------------------------------------- */

struct srv_job *srv_job_new(void)
{
    struct srv_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    /* the text is a string from the start: a stream reads it (empty) before
     * the first token */
    if (!(j->text = calloc(1, j->cap = 256))) {
        free(j);
        return NULL;
    }
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->sched_id = -1;
    return j;
}

static void job_free(struct srv_job *j)
{
    pthread_cond_destroy(&j->cv);
    free(j->text);
    free(j->lp);
    free(j->plp);
    free(j->embd);
    free(j->echo_text);
    free(j->think_message_owned);
    free(j->grammar_owned);
    free(j->bias_owned);
    json_decref(j->schema_owned);
    free(j->prompt_owned);
    for (int i = 0; j->stop_copy && i < j->req.n_stop; i++)
        free(j->stop_copy[i]);
    free(j->stop_copy);
    free(j);
}

/* Under the mutex. */
static void job_unref(struct srv_job *j)
{
    if (--j->refs == 0)
        job_free(j);
}

/* The stop strings the HTTP side pointed at (into its request's JSON),
 * owned by the job: the loop submits it after the HTTP side may be gone. */
static int job_copy_stops(struct srv_job *j)
{
    j->stop_copy = calloc((size_t)(j->req.n_stop > 0 ? j->req.n_stop : 1), sizeof(char *));
    if (!j->stop_copy)
        return -ENOMEM;
    for (int i = 0; i < j->req.n_stop; i++)
        if (!(j->stop_copy[i] = strdup(j->req.stop[i])))
            return -ENOMEM;
    j->req.stop = (const char *const *)j->stop_copy;
    return 0;
}

int srv_job_post(struct srv_loop *l, struct srv_job *j, int max_waiting)
{
    int rc = job_copy_stops(j);
    pthread_mutex_lock(&l->mu);
    if (!rc && l->state != LOOP_RUNNING)
        rc = -ESHUTDOWN;
    if (!rc && l->n_posted + l->st.queued >= max_waiting)
        rc = -EAGAIN;
    if (!rc) {
        j->refs++;
        j->next = NULL;
        if (l->posted_tail)
            l->posted_tail->next = j;
        else
            l->posted = j;
        l->posted_tail = j;
        l->n_posted++;
        pthread_cond_signal(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void srv_loop_lock(struct srv_loop *l) { pthread_mutex_lock(&l->mu); }
void srv_loop_unlock(struct srv_loop *l) { pthread_mutex_unlock(&l->mu); }

void srv_job_wait(struct srv_loop *l, struct srv_job *j, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    ts.tv_sec += timeout_ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&j->cv, &l->mu, &ts);
}

void srv_job_release(struct srv_loop *l, struct srv_job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&l->mu);
    if (!j->done && !j->cancelled && j->refs > 1) { /* the loop still has it */
        j->cancelled = true;
        j->next_cancel = l->cancels;
        l->cancels = j;
        j->refs++; /* the cancel list's */
        pthread_cond_signal(&l->cv);
    }
    job_unref(j);
    pthread_mutex_unlock(&l->mu);
}

/* --- the scheduler's hooks (on the loop's thread, mutex not held) -------------------- */

/* Under the mutex: n more bytes of final text. */
static void job_append(struct srv_job *j, const char *piece, size_t n)
{
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1)
            cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t)
            return; /* the text stays short; the result's counts still tell */
        j->text = t;
        j->cap = cap;
    }
    memcpy(j->text + j->len, piece, n);
    j->len += n;
    j->text[j->len] = 0;
}

static void on_text(void *ctx, void *user, const char *piece, size_t n)
{
    struct srv_loop *l = ctx;
    struct srv_job *j = user;
    pthread_mutex_lock(&l->mu);
    job_append(j, piece, n);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Under the mutex: token i's figures (a restart sends the same again). */
static void job_set_logprob(struct srv_job *j, int i, const struct fl_token_logprob *e)
{
    if (i >= j->cap_lp) {
        int cap = j->cap_lp ? 2 * j->cap_lp : 64;
        while (cap <= i)
            cap *= 2;
        struct fl_token_logprob *v = realloc(j->lp, sizeof(*v) * (size_t)cap);
        if (!v)
            return; /* not kept: the answer then has fewer entries than tokens */
        j->lp = v;
        j->cap_lp = cap;
    }
    j->lp[i] = *e;
    if (i == j->n_lp) /* only in order: a gap (an entry not kept) ends the run */
        j->n_lp = i + 1;
}

static void on_logprob(void *ctx, void *user, int index, const struct fl_token_logprob *e)
{
    struct srv_loop *l = ctx;
    struct srv_job *j = user;
    pthread_mutex_lock(&l->mu);
    job_set_logprob(j, index, e);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&l->mu);
}

static void on_done(void *ctx, void *user, const struct eng_req_result *r)
{
    struct srv_loop *l = ctx;
    struct srv_job *j = user;
    pthread_mutex_lock(&l->mu);
    /* the text hook sent the result's bytes as they became final; the tail
     * it held back (it could have begun a stop string) comes now */
    if (r->len > j->len && r->finish != ENG_FINISH_CANCELLED)
        job_append(j, r->text + j->len, r->len - j->len);
    /* the logprob hook sent every token's figures before this (the same as
     * r->logprobs); the answer lists the first n_logprobs of them */
    j->n_lp_final = r->n_logprobs < j->n_lp ? r->n_logprobs : j->n_lp;
    if (r->prompt_logprobs && (j->plp = malloc(sizeof(*j->plp) * (size_t)(r->n_prompt + 1))))
        memcpy(j->plp, r->prompt_logprobs, sizeof(*j->plp) * (size_t)r->n_prompt);
    j->result = *r;
    j->result.prompt_logprobs = NULL;
    j->result.text = NULL;
    j->result.logprobs = NULL;
    j->result.tokens = NULL;
    j->result.error = NULL;
    const size_t embd = r->embd ? sizeof(float) * (size_t)r->n_embd_rows * (size_t)r->n_embd : 0;
    j->result.embd = embd && (j->embd = malloc(embd)) ? memcpy(j->embd, r->embd, embd) : NULL;
    if (embd && !j->embd) {
        j->result.finish = ENG_FINISH_ERROR;
        snprintf(j->error, sizeof(j->error), "out of memory for the embedding");
    } else if (r->finish == ENG_FINISH_CANCELLED && !j->cancelled && l->fatal[0]) {
        j->result.finish = ENG_FINISH_ERROR;
        snprintf(j->error, sizeof(j->error), "%s", l->fatal);
    } else if (r->error) {
        snprintf(j->error, sizeof(j->error), "%s", r->error);
    }
    j->done = true;
    l->st.requests_done += r->finish != ENG_FINISH_CANCELLED;
    l->st.requests_cancelled += r->finish == ENG_FINISH_CANCELLED;
    l->st.requests_failed += r->finish == ENG_FINISH_ERROR;
    l->st.prompt_tokens += (uint64_t)r->n_prompt;
    l->st.gen_tokens += (uint64_t)r->n_tokens;
    pthread_cond_broadcast(&j->cv);
    job_unref(j);
    pthread_mutex_unlock(&l->mu);
}

/* --- the thread ---------------------------------------------------------------------- */

/* Under the mutex: posted jobs to the scheduler, cancels to it. */
static void take_posts(struct srv_loop *l)
{
    while (l->posted) {
        struct srv_job *j = l->posted;
        l->posted = j->next;
        l->n_posted--;
        j->req.user = j;
        struct fl_err err = { "" };
        if (j->cancelled || (j->sched_id = eng_sched_submit(l->q, &j->req, &err)) < 0) {
            if (!j->cancelled)
                snprintf(j->error, sizeof(j->error), "%s", err.msg);
            j->result.finish = j->cancelled ? ENG_FINISH_CANCELLED : ENG_FINISH_ERROR;
            j->done = true;
            pthread_cond_broadcast(&j->cv);
            job_unref(j);
        }
    }
    l->posted_tail = NULL;
    while (l->cancels) {
        struct srv_job *j = l->cancels;
        l->cancels = j->next_cancel;
        if (!j->done && j->sched_id >= 0)
            eng_sched_cancel(l->q, j->sched_id);
        job_unref(j);
    }
}

/* Under the mutex, after a step: the gauges /metrics shows. */
static void take_stats(struct srv_loop *l)
{
    struct eng_sched_stats ss;
    eng_sched_get_stats(l->q, &ss);
    l->st.steps = ss.steps;
    l->st.restarts = ss.restarts;
    l->st.prompt_cached = ss.prompt_cached;
    l->st.cache_entries = ss.cache_entries;
    l->st.cache_tokens = ss.cache_tokens;
    l->st.drafted = ss.drafted;
    l->st.accepted = ss.accepted;
    l->st.draft_steps = ss.draft_spans;
    l->st.queued = eng_sched_queued(l->q);
    l->st.running = eng_sched_running(l->q);
    l->st.cells_used = l->st.cells_total - eng_session_cells_free(l->s);
    for (int i = 0; l->slots && i < l->st.n_seq; i++)
        eng_sched_slot(l->q, i, &l->slots[i]);
    struct pager *p = eng_session_pager(l->s);
    if (p) {
        struct pager_totals t;
        pager_stats_totals(p, &t);
        l->st.pager_bytes_read = t.bytes_read;
        l->st.pager_stall_ns = t.stall_ns;
        l->st.pager_hits = t.cache_hits + t.prefetch_hits;
        l->st.pager_acquires = t.cache_hits + t.prefetch_hits + t.misses;
    }
    const double t = fl_clock_s();
    if (t - l->win_t0 >= 10.0 || l->st.running == 0) {
        if (t > l->win_t0)
            l->st.gen_tps = (double)(l->st.gen_tokens - l->win_tokens0) / (t - l->win_t0);
        if (l->st.running == 0)
            l->st.gen_tps = 0;
        l->win_t0 = t;
        l->win_tokens0 = l->st.gen_tokens;
    }
}

static int loop_open(struct srv_loop *l)
{
    const struct eng_sched_hooks h = { .ctx = l, .done = on_done, .text = on_text,
                                       .logprob = on_logprob };
    int rc = eng_session_open(l->params, &l->s, &l->load_err);
    if (!rc)
        rc = eng_sched_create(l->s, &h, &l->q, &l->load_err);
    struct fl_err e;
    const int spec = rc ? 0 : eng_sched_set_spec(l->q, &l->spec, &e);
    if (spec && spec != -ENOTSUP) /* -ENOTSUP: a recurrent model decodes as before */
        rc = fl_err_set(&l->load_err, spec, "%s", e.msg);
    l->st.spec_on = !spec && eng_spec_on(&l->spec);
    if (!rc && !(l->slots = calloc((size_t)eng_session_n_seq(l->s), sizeof(*l->slots))))
        rc = fl_err_set(&l->load_err, -ENOMEM, "out of memory");
    pthread_mutex_lock(&l->mu);
    l->load_rc = rc;
    l->state = rc ? LOOP_FAILED : LOOP_RUNNING;
    if (!rc) {
        l->st.loaded = true;
        l->st.n_seq = eng_session_n_seq(l->s);
        l->st.cells_total = eng_session_cells_free(l->s);
        l->st.paged = eng_session_pager(l->s) && eng_session_paged(l->s);
        l->win_t0 = fl_clock_s();
    }
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

/* The action posted, between steps (mutex not held: it reads or writes a
 * file); the mutex is held again on return. */
static void run_action(struct srv_loop *l)
{
    struct srv_slot_action *a = l->action;
    pthread_mutex_unlock(&l->mu);
    const double t0 = fl_clock_s();
    struct fl_out out = FL_OUT_NONE;
    const char *inputs[] = { l->params->model_path };
    a->err.msg[0] = 0;
    switch (a->op) {
    case SRV_SLOT_SAVE:
        a->rc = fl_out_begin(&out, a->path, inputs, 1, false, &a->err);
        if (!a->rc)
            a->rc = eng_sched_slot_save(l->q, a->slot, &out, &a->n, &a->bytes, &a->err);
        break;
    case SRV_SLOT_RESTORE:
        a->rc = eng_sched_slot_restore(l->q, a->slot, a->path, &a->n, &a->bytes, &a->err);
        break;
    case SRV_SLOT_ERASE:
        a->rc = eng_sched_slot_erase(l->q, a->slot, &a->n, &a->err);
        break;
    }
    a->ms = (fl_clock_s() - t0) * 1e3;
    pthread_mutex_lock(&l->mu);
    take_stats(l); /* the prompt cache's gauges */
    l->action = NULL;
    pthread_cond_broadcast(&l->action_cv);
}

void srv_loop_slot_action(struct srv_loop *l, struct srv_slot_action *a)
{
    pthread_mutex_lock(&l->action_mu);
    pthread_mutex_lock(&l->mu);
    a->rc = l->state == LOOP_RUNNING ? 0 : -ESHUTDOWN;
    if (!a->rc) {
        l->action = a;
        pthread_cond_signal(&l->cv);
        while (l->action == a)
            pthread_cond_wait(&l->action_cv, &l->mu);
    }
    if (a->rc == -ESHUTDOWN)
        fl_err_set(&a->err, -ESHUTDOWN, "the server is stopping");
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_unlock(&l->action_mu);
}

static void *loop_main(void *arg)
{
    struct srv_loop *l = arg;
    if (loop_open(l))
        return NULL;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        take_posts(l);
        if (l->action)
            run_action(l);
        if (l->state == LOOP_DRAINING && fl_clock_s() >= l->drain_until) {
            eng_sched_cancel_all(l->q);
            l->state = LOOP_STOPPING;
        }
        const bool work = eng_sched_running(l->q) + eng_sched_queued(l->q) > 0;
        if (!work && l->state >= LOOP_DRAINING)
            break;
        if (!work) {
            pthread_cond_wait(&l->cv, &l->mu);
            continue;
        }
        pthread_mutex_unlock(&l->mu);
        struct fl_err err = { "" };
        const int rc = eng_sched_step(l->q, &err);
        pthread_mutex_lock(&l->mu);
        if (rc < 0) { /* the engine failed (an I/O error): the requests in it end with it */
            fprintf(stderr, "faultline serve: %s\n", err.msg);
            snprintf(l->fatal, sizeof(l->fatal), "%s", err.msg);
            eng_sched_cancel_all(l->q);
            pthread_mutex_unlock(&l->mu);
            struct fl_err e2 = { "" };
            eng_sched_step(l->q, &e2); /* only reaps: every request is cancelled */
            pthread_mutex_lock(&l->mu);
            l->fatal[0] = 0;
        }
        take_stats(l);
    }
    if (l->action) { /* posted as the loop stopped */
        l->action->rc = -ESHUTDOWN;
        l->action = NULL;
        pthread_cond_broadcast(&l->action_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int srv_loop_start(const struct eng_session_params *params, const struct eng_spec_params *spec,
                   struct srv_loop **out, struct fl_err *err)
{
    struct srv_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return fl_err_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    pthread_mutex_init(&l->action_mu, NULL);
    pthread_cond_init(&l->action_cv, NULL);
    l->params = params;
    l->spec = *spec;
    if (pthread_create(&l->thread, NULL, loop_main, l)) {
        free(l);
        return fl_err_set(err, -EAGAIN, "cannot start the engine's thread");
    }
    *out = l;
    return 0;
}

int srv_loop_wait_loaded(struct srv_loop *l, struct fl_err *err)
{
    pthread_mutex_lock(&l->mu);
    while (l->state == LOOP_LOADING)
        pthread_cond_wait(&l->cv, &l->mu);
    const int rc = l->load_rc;
    if (rc)
        *err = l->load_err;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

struct eng_session *srv_loop_session(struct srv_loop *l)
{
    pthread_mutex_lock(&l->mu);
    struct eng_session *s = l->state == LOOP_LOADING || l->state == LOOP_FAILED ? NULL : l->s;
    pthread_mutex_unlock(&l->mu);
    return s;
}

int srv_loop_slots(struct srv_loop *l, struct eng_sched_slot **out)
{
    pthread_mutex_lock(&l->mu);
    const int n = l->slots ? l->st.n_seq : 0;
    *out = n ? malloc(sizeof(**out) * (size_t)n) : NULL;
    if (*out)
        memcpy(*out, l->slots, sizeof(**out) * (size_t)n);
    pthread_mutex_unlock(&l->mu);
    return n && !*out ? -ENOMEM : n;
}

void srv_loop_stats(struct srv_loop *l, struct srv_stats *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->st;
    out->queued += l->n_posted;
    pthread_mutex_unlock(&l->mu);
}

void srv_loop_stop(struct srv_loop *l, double drain_s)
{
    if (!l || l->stopped)
        return;
    pthread_mutex_lock(&l->mu);
    if (l->state == LOOP_RUNNING) {
        l->state = LOOP_DRAINING;
        l->drain_until = fl_clock_s() + drain_s;
    }
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    /* a drain ends when the work does or at drain_until; the loop only
     * sleeps when idle, so a timer is not needed: a step is short */
    pthread_join(l->thread, NULL);
    l->stopped = true;
}

void srv_loop_free(struct srv_loop *l)
{
    if (!l)
        return;
    srv_loop_stop(l, 0);
    free(l->slots);
    eng_sched_free(l->q);
    eng_session_close(l->s);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->action_cv);
    pthread_mutex_destroy(&l->action_mu);
    free(l);
}

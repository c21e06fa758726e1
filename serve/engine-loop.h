/* engine-loop.h: the one thread that owns the session and its scheduler,
 * and the jobs HTTP threads hand it.
 *
 * HTTP threads never touch the engine: they build a job (prompt ids,
 * sampling, limits), post it, and wait on it; the loop submits posted jobs
 * to the scheduler between steps, steps while there is work, and fills each
 * job's text and result as the scheduler's hooks report them. One mutex
 * guards the posted list and every job's shared fields; a job has its own
 * condition variable, so a step wakes only the waiters it has news for.
 *
 * A job is shared by its HTTP side and the loop (two references): whoever
 * drops the last frees it. An HTTP side that goes away (the client
 * disconnected) cancels the job; its cells are free after the next step. */
#ifndef FL_SERVE_ENGINE_LOOP_H
#define FL_SERVE_ENGINE_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app/scheduler.h"
#include "app/session.h"
#include "base/error.h"

struct srv_loop;

struct srv_job {
    /* set by the HTTP side before srv_job_post, read-only after */
    struct eng_req req;     /* req.prompt is prompt_owned; stop strings are copied at post */
    int32_t *prompt_owned;  /* malloc'ed, the job's: freed with it */
    struct fl_logit_bias *bias_owned; /* likewise, what req.logit_bias points at */
    json_t *schema_owned;   /* a reference: what req.json_schema points at */
    char *echo_text;        /* echo: the prompt's text (malloc'ed; NULL without echo) */
    char *think_message_owned; /* what req.think_message points at (malloc'ed) */
    char *grammar_owned;       /* what req.grammar points at (malloc'ed) */
    size_t echo_len;
    int n_prompt;
    /* shared, under the loop's mutex */
    pthread_cond_t cv;      /* signalled on new text and at the end */
    char *text;             /* final text so far (held-back stop prefixes not included) */
    size_t len, cap;
    bool done, cancelled;
    /* with req.logprobs: generated tokens' figures by index, as they come
     * (n_lp known); when done, the first n_lp_final are the answer's */
    struct fl_token_logprob *lp;
    int n_lp, cap_lp, n_lp_final;
    struct fl_token_logprob *plp; /* when done, with echo and logprobs: the prompt's */
    struct eng_req_result result; /* when done: finish, n_tokens, n_prompt (text/tokens not kept;
                                   * an embedding's rows are: embd) */
    float *embd;            /* when done, an embedding's rows (result.embd points here) */
    char error[256];
    /* the loop's */
    int refs;
    int sched_id;           /* -1 until submitted */
    struct srv_job *next;   /* the posted list */
    struct srv_job *next_cancel; /* the cancel list (a posted job may be on both) */
    char **stop_copy;
};

/* What /metrics shows: counters since start and gauges of the last step. */
struct srv_stats {
    bool loaded;
    uint64_t requests_done, requests_cancelled, requests_failed;
    uint64_t prompt_tokens, gen_tokens, steps, restarts;
    uint64_t prompt_cached;    /* of prompt_tokens, read from the prompt cache */
    int cache_entries;         /* prefixes the prompt cache holds ... */
    int64_t cache_tokens;      /* ... and their positions */
    double gen_tps;        /* generated tokens per second over the last ~10 s */
    int queued, running, n_seq;
    int cells_used, cells_total;
    bool paged;
    uint64_t pager_bytes_read, pager_stall_ns, pager_hits, pager_acquires;
    bool spec_on;              /* speculative decoding drafts (the model allows it) */
    uint64_t drafted, accepted, draft_steps; /* draft tokens fed and kept; spans with one */
};

/* Starts the loop's thread, which opens the session (params must live
 * until srv_loop_stop); srv_loop_wait_loaded says how that went. */
int srv_loop_start(const struct eng_session_params *params, const struct eng_spec_params *spec,
                   struct srv_loop **out, struct fl_err *err);
/* Blocks until the session is open (0) or failed to open (-errno, err). */
int srv_loop_wait_loaded(struct srv_loop *l, struct fl_err *err);
/* The session once loaded (its tokenizer and model are read-only and may be
 * used from any thread); NULL before. */
struct eng_session *srv_loop_session(struct srv_loop *l);

/* A new job with one reference for the caller; NULL on out of memory. */
struct srv_job *srv_job_new(void);
/* Posts the job (the loop takes its own reference); -EAGAIN when max_waiting
 * jobs are already waiting for a sequence (queue full), -ESHUTDOWN when the
 * loop is stopping. */
int srv_job_post(struct srv_loop *l, struct srv_job *j, int max_waiting);
/* With the loop's mutex held (srv_loop_lock): waits up to timeout_ms for
 * the job to change; returns with it held again. */
void srv_job_wait(struct srv_loop *l, struct srv_job *j, int timeout_ms);
void srv_loop_lock(struct srv_loop *l);
void srv_loop_unlock(struct srv_loop *l);
/* Drops the HTTP side's reference; a job not done is cancelled. */
void srv_job_release(struct srv_loop *l, struct srv_job *j);

/* A slot file action (POST /slots/{id}?action=...: app/scheduler.h's
 * eng_sched_slot_*), run on the loop's thread between steps. */
enum srv_slot_op { SRV_SLOT_SAVE, SRV_SLOT_RESTORE, SRV_SLOT_ERASE };
struct srv_slot_action {
    enum srv_slot_op op;
    int slot;
    const char *path;       /* the file (save, restore) */
    /* the outcome */
    int rc, n;              /* n: positions saved, restored or erased */
    uint64_t bytes;         /* the file's size */
    double ms;
    struct fl_err err;
};
/* Runs a (one at a time) and waits for it: a->rc and a->err say how it
 * went (-ESHUTDOWN when the loop stops first). */
void srv_loop_slot_action(struct srv_loop *l, struct srv_slot_action *a);

void srv_loop_stats(struct srv_loop *l, struct srv_stats *out);
/* The sequences as the last step left them (eng_sched_slot's view),
 * *out malloc'ed: their count, 0 before the model is loaded, -ENOMEM. */
int srv_loop_slots(struct srv_loop *l, struct eng_sched_slot **out);
/* Refuses new posts, lets running and queued jobs finish within drain_s
 * seconds, cancels what is left and stops the thread (every job is done
 * then; the session stays open for srv_loop_session's users). */
void srv_loop_stop(struct srv_loop *l, double drain_s);
/* Stops (no drain) if needed and closes the session: after every HTTP
 * thread is gone. */
void srv_loop_free(struct srv_loop *l);

#endif

/* sched-impl.h: the scheduler's own state, shared by its files
 * (scheduler.c: requests, steps; sched-text.c: a request's text). Not an
 * interface: app/scheduler.h is. */
#ifndef FL_SCHED_IMPL_H
#define FL_SCHED_IMPL_H

#include "app/scheduler.h"
#include "app/draft-model.h"
#include "app/speculate.h"
#include "text/think-budget.h"

struct sched_req {
    int id;
    void *user;
    int32_t *prompt;
    int n_prompt, max_tokens, limit; /* limit: positions it may fill */
    bool ignore_eos, cancelled;
    int cut;             /* the stop string that ended the text, -1: none */
    int n_indent, t_max_ms; /* eng_req's n_indent and t_max_predict_ms */
    size_t line_at;      /* n_indent: where the line to check starts (0: no newline yet), */
    bool line_ok;        /* and whether it passed already */
    bool want_lp, no_cache, want_plp;
    bool embed;                 /* an embedding (eng_req): its rows, pooled ... */
    enum eng_pooling pool;
    double *sum;                /* ... ENG_POOL_MEAN: [n_embd] so far, in position order */
    float *embd;                /* ... the result: [n_prompt or 1][n_embd] */
    struct fl_schema *schema;   /* JSON mode or a JSON schema: what the answer must be, */
    struct fl_grammar *grammar; /* or a grammar ... */
    struct fl_constraint *cons; /* ... and the answer so far against it (NULL: free text) */
    bool think_limit;               /* the reasoning budget (eng_req) ... */
    struct fl_think_budget think;   /* ... and its state */
    int top_lp;
    struct fl_token_logprob *lp; /* [cap_gen] with want_lp */
    struct fl_token_logprob *plp; /* [n_prompt] with want_plp */
    char *stop[ENG_SCHED_MAX_STOP];
    int n_stop;
    size_t stop_max;
    struct fl_sampler_params sp;
    struct fl_sampler *smp;
    const char *error;   /* set: ends with ENG_FINISH_ERROR at the next step */
    int seq;             /* -1 while queued */
    int n_done;          /* prompt tokens evaluated (or read from the prompt cache) */
    int n_cached;        /* prompt tokens read from the prompt cache */
    /* waiting for a running request (id, sequence) to compute the first
     * lend_at positions of this prompt, to read them (-1: not waiting) */
    int lender, lend_seq, lend_at;
    int32_t next;        /* generating: the token to feed */
    int n_drafted, n_accepted; /* speculative decoding: draft tokens fed, and kept */
    /* a recurrent model's draft taken back: the state went back to the
     * span's start, and its kept positions (the last refeed before next)
     * are fed again with next */
    int refeed;
    int32_t *gen;
    int n_gen, cap_gen;
    char *text;
    size_t len, cap, emitted;
    double t_submit, t_start, t_first;
};

struct eng_sched {
    struct eng_session *s;
    struct eng_sched_hooks h;
    const struct fl_tokenizer *tok;
    int n_vocab, n_seq, n_batch, n_ctx, next_id;
    struct sched_req **slot;  /* [n_seq]: the request on each sequence, or NULL */
    struct sched_req **queue; /* FIFO */
    int n_queue, cap_queue;
    /* one step's batch: at most n_seq decodes + n_batch prompt and draft tokens */
    int32_t *tokens;
    struct eng_span *spans;
    struct sched_req **span_req;
    int *chunk;               /* [n_seq]: the step's prompt tokens of each sequence */
    float *logits;            /* [n_seq + ENG_SCHED_PLP_CHUNK (+ ENG_SCHED_DRAFT_STEP)][n_vocab] */
    float *embd;              /* [n_seq + n_batch][n_embd]: embedding rows (at the first) */
    int n_embd;
    struct eng_pcache *pc;    /* prompts' prefixes kept for later requests */
    struct fl_mask_vocab *jv; /* JSON mode's pieces, made at its first request */
    struct fl_dry_breakers *dry; /* the last DRY breakers a request named, for the next ones */
    float *masked;            /* [n_vocab]: a row masked to JSON */
    struct eng_spec_params spec; /* speculative decoding (app/speculate.h) */
    int spec_max;             /* the most draft tokens a sequence feeds a step (0: none) */
    struct eng_drafter *dr;   /* the draft model's drafts (app/draft-model.h), or NULL */
    int32_t *draft;           /* [n_seq][ENG_SPEC_DRAFT_MAX]: each sequence's draft, */
    int *n_draft;             /* [n_seq]: its length this step */
    struct eng_draft_job *jobs; /* [n_seq]: the step's sequences the draft model drafts for */
    float *rs_snap;           /* a recurrent model's: [n_seq][rs_floats] states before drafts */
    size_t rs_floats;
    struct eng_sched_stats st;
};

enum sched_appended { TEXT_GOES_ON, TEXT_STOPPED, TEXT_LIMITED };

/* Room for one more generated token (and its log-probability) and piece
 * more bytes of text: 0 or -ENOMEM. */
int sched_grow_gen(struct sched_req *r, size_t piece);
/* Appends token id's text: TEXT_STOPPED when a stop string now ends the
 * text (cut there), TEXT_LIMITED when n_indent cut it or, past
 * t_max_predict_ms, the piece holds a newline. Text that cannot begin a
 * stop string any more (nor be cut) goes to the text hook. */
enum sched_appended sched_append_text(struct eng_sched *q, struct sched_req *r, int32_t id);

#endif

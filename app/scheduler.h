/* scheduler.h: continuous batching over a session's sequences.
 *
 * Requests wait in a queue (first come, first served) until one of the
 * session's n_seq sequences and the KV cells for their prompt are free;
 * generated tokens take cells as they come. When the cache is full, the
 * most recently started request gives its cells back and starts over
 * later (vLLM's recompute preemption): the oldest always progresses, and
 * by batch invariance the restarted one produces the same tokens again.
 * Each step is one forward call: a token of every
 * sequence that is generating, then prompt chunks of those still reading
 * their prompt, up to n_batch prompt tokens per step (at least one chunk),
 * so a long new prompt delays running decodes by one chunk at a time.
 *
 * A prompt is cut into chunks at multiples of n_batch from its start, as
 * eng_session_eval cuts it, whatever else runs: with the engine's batch
 * invariance (model/arch.h) a request's logits, and so its tokens for a
 * given seed, are the same alone as with any neighbours.
 *
 * A request whose prompt starts with whole n_batch chunks another prompt
 * ran (a finished request's, kept in the prompt cache, app/prompt-cache.h,
 * or a running one's) reads their KV rows instead of computing them: the
 * same bits, so the same tokens. One admitted while a running request is
 * still computing those chunks waits for them. Cached prefixes hold only cells no
 * request needs: they are given back before a running request restarts.
 *
 * Every request has its own sampler (text/sampler.h: temperature, top-k,
 * top-p, min-p, penalties, seed), stop strings and token limit. Typical
 * use:
 *
 *   eng_sched_create(session, &hooks, &q, &err);
 *   eng_sched_submit(q, &req, &err);          // as many as wanted
 *   while ((rc = eng_sched_step(q, &err)) > 0)
 *       ;                                     // hooks.done hears each end
 *   eng_sched_free(q);
 *
 * Not thread-safe: one thread submits, cancels and steps. */
#ifndef FL_SCHEDULER_H
#define FL_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "app/session.h"
#include "app/speculate.h"
#include "base/error.h"
#include "base/out-file.h"
#include "text/logprob.h"
#include "text/sampler.h"

struct eng_sched;

#define ENG_SCHED_MAX_STOP 8
#define ENG_SCHED_PLP_CHUNK 16 /* prompt tokens a step with a row each (prompt_logprobs) */
#define ENG_SCHED_DRAFT_STEP 64 /* draft tokens a step feeds, all sequences together */

/* How an embedding request's rows become its vector (llama.cpp's pooling
 * types less rank): every prompt token's row, their mean, the first's, or
 * the last's. The rows are the final norm's output (before the output
 * projection), as llama.cpp's embeddings of a generative model. */
enum eng_pooling { ENG_POOL_NONE, ENG_POOL_MEAN, ENG_POOL_CLS, ENG_POOL_LAST };

/* "none", "mean", "cls", "last" ... and back (-1: another word). */
const char *eng_pooling_name(enum eng_pooling p);
int eng_pooling_parse(const char *s);

struct eng_req {
    const int32_t *prompt; /* copied at submit */
    int n_prompt;
    int max_tokens;        /* the context may end it sooner; 0: the prompt alone (its
                            * prompt_logprobs, or its rows left in the prompt cache) */
    struct fl_sampler_params sampling;
    const char *const *stop; /* up to ENG_SCHED_MAX_STOP strings, copied */
    int n_stop;
    bool ignore_eos;       /* go on past end-of-generation tokens */
    const struct fl_logit_bias *logit_bias; /* added to the logits (read at submit) */
    int n_logit_bias;
    bool json_object;      /* JSON mode: the answer is a JSON object (text/json-mode.h) */
    const json_t *json_schema; /* or a value this schema accepts (compiled at submit) */
    const char *grammar;   /* or a sentence of this GBNF grammar (text/grammar.h; compiled at
                            * submit, with the session's vocabulary for its tokens) */
    size_t grammar_len;
    bool logprobs;         /* each generated token's log-probability (text/logprob.h) */
    bool prompt_logprobs;  /* echo: max_tokens may be 0 (the prompt alone); with logprobs,
                            * each prompt token's after the first too: the prompt then runs
                            * in chunks of ENG_SCHED_PLP_CHUNK, one such chunk a step, and
                            * reads no cached prefix */
    int top_logprobs;      /* ... with this many most likely tokens (0..FL_MAX_TOP_LOGPROBS) */
    bool no_prompt_cache;  /* neither read a cached prefix nor leave one (cache_prompt: false) */
    /* llama-server's code-completion limits (0: off), each ending the answer
     * as ENG_FINISH_LENGTH: a line after the first newline whose first
     * other character comes after fewer than n_indent spaces or tabs (the
     * text cut before that character); a token with a newline once
     * t_max_predict_ms have passed since the first token */
    int n_indent, t_max_predict_ms;
    /* llama-server's reasoning budget: once a thinking model's reasoning
     * (text/reasoning.h; think_opened: the prompt opened it) holds
     * think_budget tokens, think_message (may be NULL) and "</think>" are
     * forced, one token a step, after a whole UTF-8 character */
    bool think_limit;
    bool think_opened;
    int think_budget;      /* >= 0 */
    const char *think_message;
    const struct fl_reasoning_tags *think_tags; /* the format's (NULL: <think>): its
                                                 * close tag is the one forced */
    /* an embedding: the prompt alone (max_tokens 0), its rows pooled so; it
     * neither reads nor leaves a cached prefix */
    bool embed;
    enum eng_pooling pooling;
    void *user;            /* handed back to the hooks */
};

enum eng_finish {
    ENG_FINISH_STOP,      /* an end-of-generation token or a stop string */
    ENG_FINISH_LENGTH,    /* max_tokens, or the context is full */
    ENG_FINISH_CANCELLED, /* eng_sched_cancel */
    ENG_FINISH_ERROR,     /* the request cannot run (message in error) */
};

/* "stop", "length", "cancelled", "error" (OpenAI's finish_reason words). */
const char *eng_finish_name(enum eng_finish f);

struct eng_req_result {
    enum eng_finish finish;
    const char *error;      /* ENG_FINISH_ERROR: why */
    const char *text;       /* the generated text, a stop string cut off; NUL-terminated */
    size_t len;
    const int32_t *tokens;  /* the generated tokens (an ending EOG token not included) */
    int n_tokens;
    /* with eng_req.logprobs: the first n_logprobs tokens' (those whose text
     * begins before a stop string cut it; all of them otherwise); NULL else */
    const struct fl_token_logprob *logprobs;
    int n_logprobs;
    /* with eng_req.prompt_logprobs and logprobs: one per prompt token (the
     * first's logprob NAN and no top: nothing predicts it); NULL else */
    const struct fl_token_logprob *prompt_logprobs;
    int n_prompt;
    int n_cached;           /* of them, read from the prompt cache (not computed) */
    double queued_s, prompt_s, gen_s; /* waiting, submit-to-first-token after it, the rest */
    int n_drafted, n_accepted; /* speculative decoding: draft tokens fed, and kept */
    int stop_index;         /* ENG_FINISH_STOP by stop string stop[i]: i; else -1 (an
                             * end-of-generation token, or the constraint's end) */
    /* an embedding request that ended with ENG_FINISH_STOP: n_embd_rows rows
     * of n_embd floats (one pooled row; ENG_POOL_NONE: one per prompt
     * token), not normalized; NULL else */
    const float *embd;
    int n_embd_rows, n_embd;
};

struct eng_sched_hooks {
    void *ctx;
    /* Required: a request ended; r and what it points to live during the call. */
    void (*done)(void *ctx, void *user, const struct eng_req_result *r);
    /* Optional: each logits row a request gets (its prompt's last, then one
     * per generated token), pos = the position the row predicts after. */
    void (*logits)(void *ctx, void *user, int pos, const float *row, int n_vocab);
    /* Optional: text as it becomes final (held back while it could be the
     * start of a stop string). A restarted request does not send again
     * what it sent before (the same bytes). */
    void (*text)(void *ctx, void *user, const char *piece, size_t n);
    /* Optional, for requests with logprobs: generated token `index`'s
     * figures, once its bytes are in the text. A restarted request sends
     * the same figures for the same indices again. */
    void (*logprob)(void *ctx, void *user, int index, const struct fl_token_logprob *e);
    /* Optional: a request starts over (the cache was full); its logits
     * rows come again from the first. */
    void (*restart)(void *ctx, void *user);
};

struct eng_sched_stats {
    uint64_t steps, prompt_tokens, gen_tokens, requests_done, restarts;
    uint64_t prompt_cached; /* prompt tokens ended requests read from the prompt cache (not
                             * in prompt_tokens, which counts those computed) */
    int cache_entries;      /* prefixes the prompt cache holds now ... */
    int64_t cache_tokens;   /* ... their positions in all */
    uint64_t cache_evicted; /* entries dropped for room */
    int max_running; /* most sequences in one step */
    uint64_t drafted, accepted; /* speculative decoding: draft tokens fed, and kept, */
    uint64_t draft_spans;       /* in this many spans */
};

int eng_sched_create(struct eng_session *s, const struct eng_sched_hooks *h, struct eng_sched **out,
                     struct fl_err *err);
/* Speculative decoding for the requests that generate (app/speculate.h):
 * with ngram-simple or a draft model (opened here: app/draft-model.h), each
 * step a generating sequence feeds a draft beside its token, within what
 * the step's prompt chunks leave of n_batch (and ENG_SCHED_DRAFT_STEP),
 * cells that are free and its token limit. The text is the same as
 * without (a recurrent model's state is copied before each draft, and a
 * rejected draft's kept positions are fed again in the next step).
 * -ENOTSUP for a recurrent model with a GPU (it then decodes as before),
 * -ENOMEM, the draft model's refusal (-EINVAL for draft-simple without
 * one). */
int eng_sched_set_spec(struct eng_sched *q, const struct eng_spec_params *p, struct fl_err *err);
/* Drops what is queued or running without calling done. */
void eng_sched_free(struct eng_sched *q);

/* Queues a request; returns its id (>= 0) or -EINVAL / -ENOMEM with err.
 * A request that can never run (empty prompt, prompt as long as the
 * context) is accepted and ends with ENG_FINISH_ERROR at the next step. */
int eng_sched_submit(struct eng_sched *q, const struct eng_req *r, struct fl_err *err);
/* Ends request id with ENG_FINISH_CANCELLED at the next step (its cells are
 * free then); unknown ids are ignored. */
void eng_sched_cancel(struct eng_sched *q, int id);
/* Every request, queued or running (a step then ends them all). */
void eng_sched_cancel_all(struct eng_sched *q);

/* One step. Returns 1 when there was work, 0 when nothing is queued or
 * running, or the engine's -errno (err says why; the running requests stay
 * as they were and may be stepped again or dropped). */
int eng_sched_step(struct eng_sched *q, struct fl_err *err);

int eng_sched_running(const struct eng_sched *q);
int eng_sched_queued(const struct eng_sched *q);
void eng_sched_get_stats(const struct eng_sched *q, struct eng_sched_stats *out);

/* What sequence i runs (llama-server's /slots): busy or not, and the
 * request's id, its prompt (positions, evaluated so far, read from the
 * prompt cache), its tokens generated and still allowed, its sampling. */
struct eng_sched_slot {
    bool busy;
    int id;
    int n_prompt, n_prompt_done, n_cached, n_gen, n_remain;
    struct fl_sampler_params sampling;
    int max_tokens;
    bool ignore_eos;
};
void eng_sched_slot(const struct eng_sched *q, int i, struct eng_sched_slot *out);

/* llama-server's slot files (POST /slots/{id}?action=...; sched-slots.c):
 * sequence slot's prompt cache (app/prompt-cache.h: the newest entry its
 * requests kept) written to, read back from or dropped. *n: the positions
 * saved, restored or erased; *bytes: the file's size. Errors in err, one
 * line: -EINVAL (a slot out of range, nothing to save, a file of another
 * model or settings, damaged), -ENOENT (no such file), -ENOSPC (the cache
 * has no room now), -ENOTSUP (no prompt cache, or a GPU), -errno. */
int eng_sched_slot_save(struct eng_sched *q, int slot, struct fl_out *out, int *n,
                        uint64_t *bytes, struct fl_err *err);
int eng_sched_slot_restore(struct eng_sched *q, int slot, const char *path, int *n,
                           uint64_t *bytes, struct fl_err *err);
int eng_sched_slot_erase(struct eng_sched *q, int slot, int *n, struct fl_err *err);

#endif

/* scheduler.c: continuous batching (scheduler.h). */
#include "app/sched-impl.h"

#include "app/prompt-cache.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "model/arch.h"
#include "model/kv-cache.h"
#include "text/constrain.h"
#include "text/dry.h"
#include "text/grammar.h"
#include "text/json-mode.h"
#include "text/json-schema.h"
#include "text/reasoning.h"
#include "text/think-budget.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

static const char *const pooling_names[] = { "none", "mean", "cls", "last" };

const char *eng_pooling_name(enum eng_pooling p)
{
    return (unsigned)p < 4 ? pooling_names[p] : "?";
}

int eng_pooling_parse(const char *s)
{
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, pooling_names[i]))
            return i;
    return -1;
}

const char *eng_finish_name(enum eng_finish f)
{
    static const char *const names[] = { "stop", "length", "cancelled", "error" };
    return (unsigned)f < 4 ? names[f] : "?";
}

int eng_sched_create(struct eng_session *s, const struct eng_sched_hooks *h, struct eng_sched **out,
                     struct fl_err *err)
{
    if (!h || !h->done)
        return fl_err_set(err, -EINVAL, "scheduler: a done hook is needed");
    struct eng_sched *q = calloc(1, sizeof(*q));
    if (!q)
        return fl_err_set(err, -ENOMEM, "out of memory");
    q->s = s;
    q->h = *h;
    q->tok = eng_session_tokenizer(s);
    q->n_vocab = (int)eng_session_model(s)->hp.n_vocab;
    q->n_seq = eng_session_n_seq(s);
    q->n_batch = eng_session_n_batch(s);
    q->n_ctx = eng_session_n_ctx(s);
    q->n_embd = (int)eng_session_model(s)->hp.n_embd;
    q->spec = ENG_SPEC_PARAMS_DEFAULT;
    const size_t n_tok = (size_t)(q->n_seq + q->n_batch), n_span = (size_t)q->n_seq;
    q->slot = calloc(n_span, sizeof(*q->slot));
    q->tokens = malloc(n_tok * sizeof(*q->tokens));
    q->spans = malloc(n_span * sizeof(*q->spans));
    q->span_req = malloc(n_span * sizeof(*q->span_req));
    q->chunk = malloc(n_span * sizeof(*q->chunk));
    q->draft = malloc(n_span * ENG_SPEC_DRAFT_MAX * sizeof(*q->draft));
    q->n_draft = calloc(n_span, sizeof(*q->n_draft));
    q->jobs = malloc(n_span * sizeof(*q->jobs));
    /* a row per span, and one prompt_logprobs chunk's */
    q->logits = malloc((n_span + ENG_SCHED_PLP_CHUNK) * (size_t)q->n_vocab * sizeof(float));
    if (!q->slot || !q->tokens || !q->spans || !q->span_req || !q->logits || !q->chunk ||
        !q->draft || !q->n_draft || !q->jobs) {
        eng_sched_free(q);
        return fl_err_set(err, -ENOMEM, "out of memory for %d sequences' batch", q->n_seq);
    }
    int rc = eng_pcache_create(s, &q->pc, err);
    if (rc) {
        eng_sched_free(q);
        return rc;
    }
    *out = q;
    return 0;
}

/* A recurrent model takes a rejected draft back by its state before the
 * span (a copy per sequence) and its kept positions fed again with the
 * next token (up to ENG_SPAN_SHORT_MAX tokens a sequence). */
static int keep_states(struct eng_sched *q, struct fl_err *err)
{
    if (eng_session_gpu(q->s))
        return fl_err_set(err, -ENOTSUP, "speculative decoding is off: this model's recurrent "
                          "state is in VRAM, where a rejected draft cannot be taken back");
    q->rs_floats = eng_session_rs_seq_floats(q->s);
    free(q->rs_snap);
    q->rs_snap = malloc(sizeof(float) * q->rs_floats * (size_t)q->n_seq);
    int32_t *t = realloc(q->tokens, sizeof(int32_t) *
                                        (size_t)(q->n_seq * ENG_SPAN_SHORT_MAX + q->n_batch));
    if (t)
        q->tokens = t;
    return q->rs_snap && t ? 0 : fl_err_set(err, -ENOMEM, "out of memory for the sequences' "
                                            "recurrent states");
}

int eng_sched_set_spec(struct eng_sched *q, const struct eng_spec_params *p, struct fl_err *err)
{
    q->spec = *p;
    q->spec_max = 0;
    eng_drafter_close(q->dr);
    q->dr = NULL;
    if (p->draft.named && !p->draft.model)
        return fl_err_set(err, -EINVAL, "--spec-type draft-simple needs a draft model (-md FILE)");
    if (!eng_spec_on(p))
        return 0;
    int rc = eng_session_recurrent(q->s) ? keep_states(q, err) : 0;
    if (rc)
        return rc;
    /* the decodes' rows, a prompt_logprobs chunk's and the drafts' */
    const size_t rows = (size_t)(q->n_seq + ENG_SCHED_PLP_CHUNK + ENG_SCHED_DRAFT_STEP);
    float *l = realloc(q->logits, rows * (size_t)q->n_vocab * sizeof(float));
    if (!l)
        return fl_err_set(err, -ENOMEM, "out of memory for the drafts' logits rows");
    q->logits = l;
    rc = p->draft.model ? eng_drafter_open(q->s, &p->draft, &q->dr, err) : 0;
    if (rc)
        return rc;
    const int most = p->type != ENG_SPEC_NONE ? p->size_m : 0;
    q->spec_max = q->dr && p->draft.n_max > most ? p->draft.n_max : most;
    q->spec_max = q->spec_max < ENG_SPEC_DRAFT_MAX ? q->spec_max : ENG_SPEC_DRAFT_MAX;
    return 0;
}

static void req_free(struct sched_req *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    fl_sampler_free(r->smp);
    fl_constraint_free(r->cons);
    fl_schema_free(r->schema);
    fl_grammar_free(r->grammar);
    fl_think_budget_free(&r->think);
    free(r->prompt);
    free(r->gen);
    free(r->lp);
    free(r->plp);
    free(r->sum);
    free(r->embd);
    free(r->text);
    free(r);
}

void eng_sched_free(struct eng_sched *q)
{
    if (!q)
        return;
    for (int i = 0; q->slot && i < q->n_seq; i++) {
        if (q->slot[i])
            eng_session_seq_free(q->s, i);
        req_free(q->slot[i]);
    }
    for (int i = 0; i < q->n_queue; i++)
        req_free(q->queue[i]);
    eng_pcache_free(q->pc);
    fl_dry_breakers_unref(q->dry);
    free(q->queue);
    free(q->slot);
    free(q->tokens);
    free(q->spans);
    free(q->span_req);
    free(q->chunk);
    free(q->draft);
    free(q->n_draft);
    free(q->jobs);
    free(q->rs_snap);
    eng_drafter_close(q->dr);
    free(q->logits);
    free(q->embd);
    free(q->masked);
    fl_mask_vocab_free(q->jv);
    free(q);
}

/* --- submit and cancel -------------------------------------------------------- */

/* DRY's breakers for a request: the last request's when it named the same
 * strings (building them walks the whole vocabulary, 2-8 ms that would
 * stall every sequence's step), else built and kept for the next. */
static int dry_breakers(struct eng_sched *q, const struct fl_sampler_params *p)
{
    if (p->dry_multiplier == 0.0f || p->n_dry_breakers <= 0 ||
        fl_dry_breakers_match(q->dry, q->tok, p->dry_breakers, p->n_dry_breakers))
        return 0;
    struct fl_dry_breakers *b;
    int rc = fl_dry_breakers_new(p->dry_breakers, p->n_dry_breakers, q->tok, &b);
    if (rc)
        return rc == -EINVAL ? 0 : rc; /* fl_sampler_new says what is wrong */
    fl_dry_breakers_unref(q->dry); /* samplers made with it hold their own references */
    q->dry = b;
    return 0;
}

static int copy_request(struct eng_sched *q, struct sched_req *r, const struct eng_req *in)
{
    if (in->n_prompt > 0 && !(r->prompt = malloc(sizeof(int32_t) * (size_t)in->n_prompt)))
        return -ENOMEM;
    if (in->n_prompt > 0)
        memcpy(r->prompt, in->prompt, sizeof(int32_t) * (size_t)in->n_prompt);
    for (int i = 0; i < in->n_stop; i++) {
        if (!(r->stop[r->n_stop] = strdup(in->stop[i])))
            return -ENOMEM;
        size_t n = strlen(r->stop[r->n_stop++]);
        r->stop_max = n > r->stop_max ? n : r->stop_max;
    }
    struct fl_sampler_params sp = in->sampling;
    int rc = dry_breakers(q, &sp);
    sp.dry_table = q->dry;
    if (!rc)
        rc = fl_sampler_new(&sp, q->n_vocab, q->tok, &r->smp);
    /* the breakers' strings are the caller's: the sampler holds their tokens */
    memset(r->sp.dry_breakers, 0, sizeof(r->sp.dry_breakers));
    r->sp.n_dry_breakers = 0;
    r->sp.dry_table = NULL;
    if (!rc && in->n_logit_bias > 0) /* the sampler keeps its own copy */
        rc = fl_sampler_set_bias(r->smp, in->logit_bias, in->n_logit_bias);
    return rc;
}

/* An embedding's buffers: its result's rows, the mean's sums, and the
 * step's embedding rows (made at the first such request). */
static int embed_init(struct eng_sched *q, struct sched_req *r)
{
    const size_t e = (size_t)q->n_embd;
    const size_t rows = r->pool == ENG_POOL_NONE && r->n_prompt > 0 ? (size_t)r->n_prompt : 1;
    if (!(r->embd = calloc(rows * e, sizeof(float))))
        return -ENOMEM;
    if (r->pool == ENG_POOL_MEAN && !(r->sum = calloc(e, sizeof(double))))
        return -ENOMEM;
    if (!q->embd && !(q->embd = malloc((size_t)(q->n_seq + q->n_batch) * e * sizeof(float))))
        return -ENOMEM;
    return 0;
}

/* Why a request can never run, or NULL. */
static const char *unrunnable(const struct eng_sched *q, const struct sched_req *r)
{
    if (r->n_prompt < 1)
        return "the prompt is empty";
    if (r->n_prompt >= q->n_ctx)
        return "the prompt does not fit the context";
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= q->n_vocab)
            return "the prompt holds a token id outside the vocabulary";
    return NULL;
}

int eng_sched_submit(struct eng_sched *q, const struct eng_req *in, struct fl_err *err)
{
    if (in->max_tokens < 0 || in->n_stop < 0 ||
        in->n_stop > ENG_SCHED_MAX_STOP || in->n_prompt < 0)
        return fl_err_set(err, -EINVAL, "request: max_tokens %d, %d stop strings (at most %d)",
                          in->max_tokens, in->n_stop, ENG_SCHED_MAX_STOP);
    if (in->embed && (in->max_tokens != 0 || (unsigned)in->pooling > ENG_POOL_LAST))
        return fl_err_set(err, -EINVAL, "request: an embedding generates nothing (max_tokens %d, "
                          "pooling %d)", in->max_tokens, (int)in->pooling);
    for (int i = 0; i < in->n_stop; i++)
        if (!in->stop[i] || !in->stop[i][0])
            return fl_err_set(err, -EINVAL, "request: an empty stop string");
    struct sched_req *r = calloc(1, sizeof(*r));
    if (!r)
        return fl_err_set(err, -ENOMEM, "out of memory");
    *r = (struct sched_req){ .id = q->next_id, .user = in->user, .n_prompt = in->n_prompt,
                             .max_tokens = in->max_tokens, .ignore_eos = in->ignore_eos,
                             .n_indent = in->n_indent, .t_max_ms = in->t_max_predict_ms,
                             .sp = in->sampling, .seq = -1, .t_submit = fl_clock_s(),
                             .want_lp = in->logprobs, .top_lp = in->top_logprobs,
                             .no_cache = in->no_prompt_cache || in->embed ||
                                         (in->prompt_logprobs && in->logprobs),
                             .embed = in->embed, .pool = in->pooling,
                             .want_plp = in->prompt_logprobs && in->logprobs,
                             .think_limit = in->think_limit && !in->json_object &&
                                            !in->json_schema && !in->grammar,
                             .lender = -1, .cut = -1 };
    int rc = copy_request(q, r, in);
    if (!rc && r->embed)
        rc = embed_init(q, r);
    if (!rc && r->think_limit)
        rc = fl_think_budget_init(&r->think, q->tok, in->think_tags, in->think_opened,
                                  in->think_budget, in->think_message);
    if (!rc && r->want_plp && !(r->plp = calloc((size_t)r->n_prompt + 1, sizeof(*r->plp))))
        rc = -ENOMEM;
    if (!rc && r->want_plp && r->n_prompt) /* nothing predicts the first token */
        r->plp[0].token = (struct fl_logprob){ r->prompt[0], NAN };
    if (!rc && ((in->json_schema && (rc = fl_schema_compile(in->json_schema, &r->schema, err))) ||
                (!in->json_schema && in->grammar &&
                 (rc = fl_grammar_compile(in->grammar, in->grammar_len, q->tok, &r->grammar,
                                          err))))) {
        req_free(r);
        return rc;
    }
    const bool constrained = in->json_object || in->json_schema || in->grammar;
    if (!rc && constrained && !r->schema && !r->grammar)
        rc = fl_schema_any_object(&r->schema);
    if (!rc && constrained)
        rc = fl_constraint_new(r->schema, r->grammar, &r->cons);
    if (!rc && constrained && !q->jv) {
        rc = fl_mask_vocab_new(q->tok, q->n_vocab, &q->jv);
        if (!rc && !(q->masked = malloc(sizeof(float) * (size_t)q->n_vocab)))
            rc = -ENOMEM;
    }
    if (!rc && q->n_queue + q->n_seq >= q->cap_queue) { /* room to requeue the running too */
        const int cap = q->cap_queue ? 2 * q->cap_queue : 16;
        struct sched_req **nq = realloc(q->queue, sizeof(*nq) * (size_t)cap);
        rc = nq ? 0 : -ENOMEM;
        if (nq)
            q->queue = nq, q->cap_queue = cap;
    }
    if (rc) {
        req_free(r);
        return fl_err_set(err, rc, rc == -ENOMEM ? "out of memory" : "request: bad sampling");
    }
    r->error = unrunnable(q, r);
    const int64_t limit = (int64_t)r->n_prompt + r->max_tokens;
    r->limit = limit < q->n_ctx ? (int)limit : q->n_ctx;
    for (int i = 0; i < r->n_prompt && !r->error; i++)
        fl_sampler_accept(r->smp, r->prompt[i]); /* the penalties see the prompt, as run's */
    q->queue[q->n_queue++] = r;
    return q->next_id++;
}

void eng_sched_cancel(struct eng_sched *q, int id)
{
    for (int i = 0; i < q->n_seq; i++)
        if (q->slot[i] && q->slot[i]->id == id)
            q->slot[i]->cancelled = true;
    for (int i = 0; i < q->n_queue; i++)
        if (q->queue[i]->id == id)
            q->queue[i]->cancelled = true;
}

void eng_sched_cancel_all(struct eng_sched *q)
{
    for (int i = 0; i < q->n_seq; i++)
        if (q->slot[i])
            q->slot[i]->cancelled = true;
    for (int i = 0; i < q->n_queue; i++)
        q->queue[i]->cancelled = true;
}

int eng_sched_running(const struct eng_sched *q)
{
    int n = 0;
    for (int i = 0; i < q->n_seq; i++)
        n += q->slot[i] != NULL;
    return n;
}

int eng_sched_queued(const struct eng_sched *q) { return q->n_queue; }

void eng_sched_slot(const struct eng_sched *q, int i, struct eng_sched_slot *out)
{
    const struct sched_req *r = i >= 0 && i < q->n_seq ? q->slot[i] : NULL;
    *out = (struct eng_sched_slot){ .busy = r != NULL, .id = -1 };
    if (!r)
        return;
    const int limit = r->max_tokens < r->limit - r->n_prompt ? r->max_tokens : r->limit - r->n_prompt;
    *out = (struct eng_sched_slot){
        .busy = true, .id = r->id, .n_prompt = r->n_prompt,
        .n_prompt_done = r->n_done < r->n_prompt ? r->n_done : r->n_prompt,
        .n_cached = r->n_cached, .n_gen = r->n_gen,
        .n_remain = limit - r->n_gen > 0 ? limit - r->n_gen : 0, .sampling = r->sp,
        .max_tokens = r->max_tokens, .ignore_eos = r->ignore_eos,
    };
}

void eng_sched_get_stats(const struct eng_sched *q, struct eng_sched_stats *out)
{
    struct eng_pcache_stats pc;
    eng_pcache_get_stats(q->pc, &pc);
    *out = q->st;
    out->cache_entries = pc.entries;
    out->cache_tokens = pc.tokens;
    out->cache_evicted = pc.evicted;
}

/* --- ending a request ----------------------------------------------------------- */

/* Prompt positions r has computed or read (in whole chunks from 0). */
static int prompt_ran(const struct sched_req *r)
{
    return r->n_done < r->n_prompt ? r->n_done : r->n_prompt;
}

static void finish(struct eng_sched *q, struct sched_req *r, enum eng_finish why)
{
    const double t = fl_clock_s();
    if (r->seq >= 0) {
        /* its prompt's whole chunks, for the requests after it (a recurrent
         * model's were kept as they ran: its state has moved on since) */
        if (!r->no_cache && !eng_pcache_whole(q->pc))
            eng_pcache_keep(q->pc, r->seq, r->prompt, eng_pcache_reusable(q->pc, prompt_ran(r)));
        eng_session_seq_free(q->s, r->seq);
        eng_drafter_forget(q->dr, r->seq);
        q->slot[r->seq] = NULL;
    }
    if (q->h.text && r->len > r->emitted) /* what was held back is final now */
        q->h.text(q->h.ctx, r->user, r->text + r->emitted, r->len - r->emitted);
    const double start = r->seq >= 0 ? r->t_start : t, first = r->t_first ? r->t_first : t;
    int n_lp = r->want_lp ? r->n_gen : 0; /* tokens wholly inside a cut stop string: none */
    while (r->cut >= 0 && n_lp > 0 && r->lp[n_lp - 1].text_start >= r->len)
        n_lp--;
    const struct eng_req_result res = {
        .finish = why, .error = why == ENG_FINISH_ERROR ? r->error : NULL,
        .text = r->text ? r->text : "", .len = r->len, .tokens = r->gen, .n_tokens = r->n_gen,
        .n_prompt = r->n_prompt, .n_cached = r->n_cached, .queued_s = start - r->t_submit,
        .prompt_s = first - start, .gen_s = t - first, .logprobs = r->want_lp ? r->lp : NULL,
        .n_logprobs = n_lp, .prompt_logprobs = r->want_plp ? r->plp : NULL,
        .stop_index = why == ENG_FINISH_STOP ? r->cut : -1,
        .n_drafted = r->n_drafted, .n_accepted = r->n_accepted,
        .embd = r->embed && why == ENG_FINISH_STOP ? r->embd : NULL,
        .n_embd_rows = r->pool == ENG_POOL_NONE ? r->n_prompt : 1, .n_embd = q->n_embd,
    };
    q->st.requests_done++;
    q->st.prompt_cached += (uint64_t)r->n_cached; /* with prompt_tokens: requests that ended */
    q->h.done(q->h.ctx, r->user, &res);
    req_free(r);
}

/* Ends the queued and running requests that were cancelled or cannot run. */
static void reap(struct eng_sched *q)
{
    for (int i = 0; i < q->n_seq; i++)
        if (q->slot[i] && q->slot[i]->cancelled)
            finish(q, q->slot[i], ENG_FINISH_CANCELLED);
    int kept = 0;
    for (int i = 0; i < q->n_queue; i++) {
        struct sched_req *r = q->queue[i];
        if (r->cancelled || r->error)
            finish(q, r, r->cancelled ? ENG_FINISH_CANCELLED : ENG_FINISH_ERROR);
        else
            q->queue[kept++] = r;
    }
    q->n_queue = kept;
}

/* The most positions of r's prompt another sequence holds (a cache entry,
 * or a running request's prompt chunks so far; with future, the chunks a
 * running request will have once its prompt is read), and that sequence. */
static int cached_prefix(struct eng_sched *q, const struct sched_req *r, bool future, int *src)
{
    int best = r->no_cache || future ? 0 : eng_pcache_match(q->pc, r->prompt, r->n_prompt, src);
    /* a running recurrent sequence's state is past its chunks: nothing to lend */
    const bool lends = !r->no_cache && eng_session_n_held(q->s) > 0 && !eng_pcache_whole(q->pc);
    for (int i = 0; i < q->n_seq && lends; i++) {
        const struct sched_req *x = q->slot[i];
        if (!x || x == r || x->no_cache) /* cache_prompt false: its prompt is not lent */
            continue;
        const int done = future ? x->n_prompt : prompt_ran(x);
        const int n = eng_pcache_usable(q->pc, x->prompt, eng_pcache_reusable(q->pc, done),
                                        r->prompt, r->n_prompt);
        if (n > best)
            best = n, *src = i;
    }
    return best;
}

/* A request admitted while another computes more of its prompt's start
 * than anything holds now (requests started together, n > 1 answers to
 * one prompt) waits for those chunks instead of computing them again. */
static void wait_for_lender(struct eng_sched *q, struct sched_req *r, int have)
{
    int slot = -1;
    const int later = cached_prefix(q, r, true, &slot);
    r->lender = -1;
    if (later > have && later > q->slot[slot]->n_done) {
        r->lender = q->slot[slot]->id;
        r->lend_seq = slot;
        r->lend_at = later;
    }
}

/* Whether r still waits: its lender runs and has not computed the chunks. */
static bool waiting(const struct eng_sched *q, const struct sched_req *r)
{
    const struct sched_req *x = r->lender >= 0 ? q->slot[r->lend_seq] : NULL;
    return x && x->id == r->lender && x->n_done < r->lend_at;
}

/* Sequence seq gets the cells of r's cached prefix (if any) and of the rest
 * of its prompt and first token, prompt cache entries giving theirs back
 * while the pool is short; how many prompt positions it has, or -1 (then
 * seq holds nothing). */
static int take_cells(struct eng_sched *q, struct sched_req *r, int seq)
{
    struct fl_err e;
    int src = -1, n = cached_prefix(q, r, false, &src);
    if (n > 0 && eng_session_seq_share(q->s, seq, src, n, &e))
        n = 0; /* cannot happen: whole units of a held sequence */
    const int short_by = eng_session_seq_lacks(q->s, seq, r->n_prompt + 1);
    /* entries go only when that makes room, or when nothing runs (then
     * nothing else will): otherwise the request waits and they stay */
    if (short_by > 0 && eng_sched_running(q) > 0 && eng_pcache_owned(q->pc) < short_by) {
        eng_session_seq_free(q->s, seq);
        return -1;
    }
    while (eng_session_seq_reserve(q->s, seq, r->n_prompt + 1, &e))
        if (!eng_pcache_evict(q->pc)) {
            eng_session_seq_free(q->s, seq);
            return -1;
        }
    if (n > 0)
        eng_pcache_used(q->pc, src);
    wait_for_lender(q, r, n);
    return n;
}

/* Requests whose wait is over (the chunks are there, or the lender is
 * gone) take their cells again, reading what is held now: they have
 * computed nothing yet, and what they give back covers what they lack. */
static void end_waits(struct eng_sched *q)
{
    for (int i = 0; i < q->n_seq; i++) {
        struct sched_req *r = q->slot[i];
        if (!r || r->lender < 0 || waiting(q, r))
            continue;
        eng_session_seq_free(q->s, i);
        const int cached = take_cells(q, r, i);
        if (cached < 0) {
            r->error = "the KV cache is full"; /* cannot happen (above) */
            finish(q, r, ENG_FINISH_ERROR);
        } else {
            r->n_done = r->n_cached = cached;
        }
    }
}

/* Starts queued requests, in order, while a sequence and the cells of
 * their prompt (and first token) are free; later tokens take cells as they
 * come (make_room). */
static void admit(struct eng_sched *q)
{
    while (q->n_queue > 0) {
        int seq = 0;
        while (seq < q->n_seq && q->slot[seq])
            seq++;
        struct sched_req *r = q->queue[0];
        const int cached = seq < q->n_seq ? take_cells(q, r, seq) : -1;
        if (cached < 0)
            return; /* waits for a sequence to end */
        memmove(q->queue, q->queue + 1, sizeof(*q->queue) * (size_t)--q->n_queue);
        r->seq = seq;
        r->n_done = r->n_cached = cached;
        r->t_start = fl_clock_s();
        q->slot[seq] = r;
    }
}

/* --- a step ------------------------------------------------------------------------ */

/* Back to the front of the queue, to start over: its cells are given back
 * now. With batch invariance it will produce the same tokens again. */
static void restart(struct eng_sched *q, struct sched_req *r)
{
    eng_session_seq_free(q->s, r->seq);
    eng_drafter_forget(q->dr, r->seq);
    q->slot[r->seq] = NULL;
    r->seq = -1;
    r->refeed = 0;
    r->n_done = r->n_gen = r->n_cached = 0;
    r->n_drafted = r->n_accepted = 0;
    r->lender = -1;
    r->len = r->line_at = 0;
    r->line_ok = false;
    r->t_first = 0;
    if (r->sum) /* an embedding's mean starts over with its rows */
        memset(r->sum, 0, sizeof(double) * (size_t)q->n_embd);
    if (r->cons)
        fl_constraint_reset(r->cons);
    fl_think_budget_reset(&r->think);
    fl_sampler_reset(r->smp, r->sp.seed);
    for (int i = 0; i < r->n_prompt; i++)
        fl_sampler_accept(r->smp, r->prompt[i]);
    memmove(q->queue + 1, q->queue, sizeof(*q->queue) * (size_t)q->n_queue++);
    q->queue[0] = r;
    q->st.restarts++;
    if (q->h.restart)
        q->h.restart(q->h.ctx, r->user);
}

/* The most recently started running request. */
static struct sched_req *youngest(const struct eng_sched *q)
{
    struct sched_req *y = NULL;
    for (int i = 0; i < q->n_seq; i++)
        if (q->slot[i] && (!y || q->slot[i]->t_start > y->t_start))
            y = q->slot[i];
    return y;
}

/* A cell for every generating sequence's next token. When the cache is
 * full the youngest request starts over (vLLM's recompute preemption), so
 * the oldest always goes on. */
static void make_room(struct eng_sched *q)
{
    for (int i = 0; i < q->n_seq; i++) {
        struct sched_req *r = q->slot[i];
        struct fl_err e;
        while (r && r->n_done >= r->n_prompt &&
               eng_session_seq_reserve(q->s, i, r->n_prompt + r->n_gen, &e)) {
            if (eng_pcache_evict(q->pc)) /* cached prefixes go before running requests */
                continue;
            if (q->n_queue == q->cap_queue) { /* cannot requeue: let it end */
                r->error = "the KV cache is full";
                finish(q, r, ENG_FINISH_ERROR);
                break;
            }
            struct sched_req *y = youngest(q);
            restart(q, y);
            if (y == r)
                break;
        }
    }
}

/* The step's prompt chunks, into q->chunk (0: none): those still reading
 * their prompt, while the prompt tokens stay within n_batch (at least one
 * chunk). Returns their tokens. */
static int plan_prompts(struct eng_sched *q)
{
    int prompt = 0;
    bool rows = false; /* one chunk with a row per token a step (q->logits' room) */
    for (int i = 0; i < q->n_seq; i++) {
        struct sched_req *r = q->slot[i];
        q->chunk[i] = 0;
        if (!r || r->n_done >= r->n_prompt || waiting(q, r) || (r->want_plp && rows))
            continue;
        const int most = r->want_plp && ENG_SCHED_PLP_CHUNK < q->n_batch ? ENG_SCHED_PLP_CHUNK
                                                                          : q->n_batch;
        const int left = r->n_prompt - r->n_done, chunk = left < most ? left : most;
        if (prompt > 0 && prompt + chunk > q->n_batch)
            continue;
        rows |= r->want_plp;
        q->chunk[i] = chunk;
        prompt += chunk;
    }
    return prompt;
}

/* The most draft tokens sequence seq's request r may feed beside its
 * token: budget's, none past its token limit or the context. */
static int draft_room(const struct eng_sched *q, const struct sched_req *r, int budget)
{
    const int pos0 = r->n_prompt + r->n_gen - 1; /* where r->next goes */
    if (r->refeed) /* a span of kept positions again first, without a draft */
        return 0;
    int most = q->spec_max < budget ? q->spec_max : budget;
    most = r->limit - 1 - pos0 < most ? r->limit - 1 - pos0 : most;
    return r->max_tokens - r->n_gen - 1 < most ? r->max_tokens - r->n_gen - 1 : most;
}

/* Whether the cells of seq's draft of n tokens are free (a draft never
 * makes another request give its cells back); they are taken. */
static bool draft_cells(struct eng_sched *q, const struct sched_req *r, int seq, int n)
{
    struct fl_err e;
    return !eng_session_seq_reserve(q->s, seq, r->n_prompt + r->n_gen + n, &e);
}

/* Every generating sequence's draft (q->draft, q->n_draft) in what budget
 * leaves: ngram-simple's first, else the draft model's, whose sequences
 * draft together (and read the prompts being read). Returns 0 or the draft
 * model's error. */
static int make_drafts(struct eng_sched *q, int budget, struct fl_err *err)
{
    int n_jobs = 0;
    for (int i = 0; i < q->n_seq; i++) {
        struct sched_req *r = q->slot[i];
        q->n_draft[i] = 0;
        if (!r || r->n_done < r->n_prompt || q->spec_max < 1)
            continue;
        const int most = draft_room(q, r, budget);
        int32_t *out = q->draft + (size_t)i * ENG_SPEC_DRAFT_MAX;
        if (most < 1)
            continue;
        const int n = eng_spec_draft(&q->spec, r->prompt, r->n_prompt, r->gen, r->n_gen, out, most);
        if (n > 0 && draft_cells(q, r, i, n)) {
            q->n_draft[i] = n;
            budget -= n;
        } else if (n == 0 && q->dr) { /* its budget is kept for it */
            q->jobs[n_jobs++] = (struct eng_draft_job){ .seq = i, .a = r->prompt, .na = r->n_prompt,
                                                        .b = r->gen, .nb = r->n_gen, .max = most,
                                                        .out = out };
            budget -= most < q->spec.draft.n_max ? most : q->spec.draft.n_max;
        }
    }
    /* prompts being read: the draft model reads what the target has, so
     * that their first drafts are ready when they generate */
    for (int i = 0; q->dr && i < q->n_seq; i++) {
        const struct sched_req *r = q->slot[i];
        if (r && r->n_done < r->n_prompt && !r->embed)
            q->jobs[n_jobs++] = (struct eng_draft_job){ .seq = i, .a = r->prompt,
                                                        .na = r->n_done + q->chunk[i] };
    }
    /* at most -b history tokens a step: a long prompt read from the
     * prompt cache catches up over several steps, drafting none meanwhile */
    int rc = n_jobs ? eng_drafter_draft(q->dr, q->jobs, n_jobs, q->n_batch, err) : 0;
    for (int k = 0; !rc && k < n_jobs; k++) {
        const struct eng_draft_job *j = &q->jobs[k];
        if (j->n > 0 && draft_cells(q, q->slot[j->seq], j->seq, j->n))
            q->n_draft[j->seq] = j->n;
    }
    return rc;
}

/* The step's spans: every generating sequence's next token (and its
 * draft, in what the prompt chunks leave of n_batch), then the prompt
 * chunks. Returns the count, or the draft model's error. */
static int build_batch(struct eng_sched *q, int *n_tok, struct fl_err *err)
{
    const int prompt = plan_prompts(q);
    int n_span = 0, n = 0;
    const int budget = q->n_batch - prompt < ENG_SCHED_DRAFT_STEP ? q->n_batch - prompt
                                                                   : ENG_SCHED_DRAFT_STEP;
    int rc = make_drafts(q, budget, err);
    if (rc)
        return rc;
    for (int i = 0; i < q->n_seq; i++) {
        struct sched_req *r = q->slot[i];
        if (!r || r->n_done < r->n_prompt)
            continue;
        const int nd = q->n_draft[i], back = r->refeed;
        /* positions a recurrent model feeds again come from the answer */
        memcpy(q->tokens + n, r->gen + r->n_gen - 1 - back, sizeof(int32_t) * (size_t)back);
        q->tokens[n + back] = r->next;
        memcpy(q->tokens + n + back + 1, q->draft + (size_t)i * ENG_SPEC_DRAFT_MAX,
               sizeof(int32_t) * (size_t)nd);
        r->n_drafted += nd;
        q->st.drafted += (uint64_t)nd;
        q->st.draft_spans += nd > 0;
        q->span_req[n_span] = r;
        if (nd && q->rs_snap) /* a recurrent model's state before the draft */
            eng_session_rs_save(q->s, i, q->rs_snap + (size_t)i * q->rs_floats);
        r->refeed = 0;
        /* with a draft, a row per token: each draft token is checked against the row before it */
        q->spans[n_span++] = (struct eng_span){ .seq = i, .pos0 = r->n_prompt + r->n_gen - 1 - back,
                                                .n_tok = back + 1 + nd, .logits = true,
                                                .all_rows = nd > 0 };
        n += back + 1 + nd;
    }
    for (int i = 0; i < q->n_seq; i++) {
        struct sched_req *r = q->slot[i];
        const int chunk = q->chunk[i];
        if (!chunk)
            continue;
        const int left = r->n_prompt - r->n_done;
        memcpy(q->tokens + n, r->prompt + r->n_done, sizeof(int32_t) * (size_t)chunk);
        q->span_req[n_span] = r;
        /* an embedding: every row but with last-token pooling, whose prompt's last */
        const bool all = r->want_plp || (r->embed && r->pool != ENG_POOL_LAST);
        q->spans[n_span++] = (struct eng_span){ .seq = i, .pos0 = r->n_done, .n_tok = chunk,
                                                .logits = chunk == left, .all_rows = all,
                                                .embd = r->embed };
        n += chunk;
    }
    *n_tok = n;
    return n_span;
}

/* Token id's figures under row (lse: its log-sum-exp): its log-probability
 * and r's top_logprobs likeliest. */
static void figures(const struct eng_sched *q, const struct sched_req *r, const float *row,
                    double lse, int32_t id, struct fl_token_logprob *e)
{
    e->token = (struct fl_logprob){ id, (float)((double)row[id] - lse) };
    e->n_top = fl_top_logprobs(row, q->n_vocab, lse, r->top_lp, e->top);
}

/* Prompt token p's figures under the row before it. */
static void score_prompt(struct eng_sched *q, struct sched_req *r, int p, const float *row)
{
    figures(q, r, row, fl_logsumexp(row, q->n_vocab), r->prompt[p], &r->plp[p]);
}

/* A logits row for r: sample, and end r or queue the token for the next
 * step. Returns whether r goes on (else it ended: r is gone). */
static bool take_row(struct eng_sched *q, struct sched_req *r, const float *row)
{
    if (r->max_tokens == 0) { /* the prompt alone (its log-probabilities, or the cache) */
        finish(q, r, ENG_FINISH_LENGTH);
        return false;
    }
    const int pos = r->n_prompt + r->n_gen;
    if (q->h.logits)
        q->h.logits(q->h.ctx, r->user, pos, row, q->n_vocab);
    if (!r->t_first)
        r->t_first = fl_clock_s();
    const double lse = r->want_lp ? fl_logsumexp(row, q->n_vocab) : 0;
    /* JSON mode, a schema or a grammar: only tokens that keep the answer a prefix */
    if (r->cons && fl_constraint_mask(r->cons, q->jv, row, q->masked) == 0) {
        r->error = r->grammar ? "grammar: no token of the vocabulary continues the answer"
                              : "JSON mode: no token of the vocabulary continues the answer";
        finish(q, r, ENG_FINISH_ERROR);
        return false;
    }
    const int32_t forced = r->think_limit ? fl_think_budget_next(&r->think, r->text, r->len, r->n_gen)
                                          : -1;
    const int32_t id = forced >= 0 ? forced : fl_sampler_sample(r->smp, r->cons ? q->masked : row);
    if (id < 0) {
        r->error = "no token can be drawn (the logits are not finite, or logit_bias left none)";
        finish(q, r, ENG_FINISH_ERROR);
        return false;
    }
    if (r->cons && !fl_constraint_accept(r->cons, q->jv, id)) { /* the mask's contract */
        r->error = "a token the mask allowed does not continue the answer";
        finish(q, r, ENG_FINISH_ERROR);
        return false;
    }
    if ((!r->ignore_eos || r->cons) && fl_token_is_eog(q->tok, id)) {
        finish(q, r, ENG_FINISH_STOP);
        return false;
    }
    if (sched_grow_gen(r, 256)) {
        r->error = "out of memory";
        finish(q, r, ENG_FINISH_ERROR);
        return false;
    }
    fl_sampler_accept(r->smp, id);
    struct fl_token_logprob *e = r->want_lp ? &r->lp[r->n_gen] : NULL;
    if (e) {
        figures(q, r, row, lse, id, e);
        e->text_start = r->len;
    }
    r->gen[r->n_gen++] = id;
    q->st.gen_tokens++;
    /* the object closed: the answer is whole (a stop string may end it sooner) */
    const enum sched_appended a = sched_append_text(q, r, id);
    const bool stop = a == TEXT_STOPPED || (a == TEXT_GOES_ON && r->cons && fl_constraint_done(r->cons));
    if (e) {
        e->text_end = r->len > e->text_start ? r->len : e->text_start;
        if (q->h.logprob)
            q->h.logprob(q->h.ctx, r->user, r->n_gen - 1, e);
    }
    /* pos >= limit: no cell to feed it */
    const bool ends = stop || a == TEXT_LIMITED || r->n_gen >= r->max_tokens || pos >= r->limit;
    if (ends)
        finish(q, r, stop ? ENG_FINISH_STOP : ENG_FINISH_LENGTH);
    else
        r->next = id;
    return !ends;
}

/* A decode span's rows: its token's, then one per draft token. Each is
 * sampled as a lone decode's would be; a draft token is kept while it is
 * the token drawn before it, and the cells past the last kept one are
 * given back (their rows were a rejected future). */
static void verify(struct eng_sched *q, struct sched_req *r, const struct eng_span *sp,
                   const int32_t *draft, const float *rows)
{
    const int nd = sp->all_rows ? sp->n_tok - 1 : 0; /* a span fed again has no draft */
    for (int k = 0; take_row(q, r, rows + (size_t)k * (size_t)q->n_vocab); k++) {
        if (k == nd || r->next != draft[k]) {
            const int kept = r->n_prompt + r->n_gen - 1;
            if (k < nd)
                eng_session_seq_truncate(q->s, r->seq, kept);
            if (k < nd && q->rs_snap) { /* the state before the span; the kept positions again */
                eng_session_rs_restore(q->s, r->seq, q->rs_snap + (size_t)r->seq * q->rs_floats,
                                       sp->pos0);
                r->refeed = kept - sp->pos0;
            }
            return;
        }
        r->n_accepted++;
        q->st.accepted++;
    }
}



/* A recurrent model's prompt cache entry is kept when the prompt's last
 * whole unit has just run: its state is at the unit's end only now. */
static void keep_state(struct eng_sched *q, const struct sched_req *r)
{
    const int whole = eng_pcache_reusable(q->pc, r->n_prompt);
    if (eng_pcache_whole(q->pc) && !r->no_cache && whole > r->n_cached && r->n_done == whole)
        eng_pcache_keep(q->pc, r->seq, r->prompt, whole);
}

/* An embedding's prompt chunk ran: its rows (those the span asked for, at
 * rows) go into the result or the mean's sums, in position order; the
 * prompt's end ends the request. Returns the rows read. */
static int pool_rows(struct eng_sched *q, struct sched_req *r, const struct eng_span *sp,
                     const float *rows)
{
    const size_t e = (size_t)q->n_embd;
    const int n = sp->all_rows ? sp->n_tok : sp->logits;
    if (r->pool == ENG_POOL_NONE)
        memcpy(r->embd + (size_t)sp->pos0 * e, rows, sizeof(float) * e * (size_t)n);
    else if (r->pool == ENG_POOL_CLS && sp->pos0 == 0)
        memcpy(r->embd, rows, sizeof(float) * e);
    else if (r->pool == ENG_POOL_LAST && n > 0)
        memcpy(r->embd, rows, sizeof(float) * e);
    for (int j = 0; r->pool == ENG_POOL_MEAN && j < n; j++)
        for (size_t k = 0; k < e; k++)
            r->sum[k] += rows[(size_t)j * e + k];
    r->n_done += sp->n_tok;
    q->st.prompt_tokens += (uint64_t)sp->n_tok;
    if (r->n_done < r->n_prompt)
        return n;
    for (size_t k = 0; r->pool == ENG_POOL_MEAN && k < e; k++)
        r->embd[k] = (float)(r->sum[k] / r->n_prompt);
    if (!r->t_first)
        r->t_first = fl_clock_s();
    finish(q, r, ENG_FINISH_STOP);
    return n;
}

int eng_sched_step(struct eng_sched *q, struct fl_err *err)
{
    reap(q);
    make_room(q);
    admit(q);
    end_waits(q);
    int n_tok = 0, n_span = build_batch(q, &n_tok, err);
    if (n_span < 0)
        return n_span;
    if (n_span == 0)
        return q->n_queue > 0 ? fl_err_set(err, -EDEADLK, "scheduler: queued requests cannot start")
                              : 0;
    const struct eng_batch b = { .tokens = q->tokens, .n_tok = n_tok, .spans = q->spans,
                                 .n_spans = n_span, .logits = q->logits, .embd = q->embd };
    int rc = eng_session_forward(q->s, &b, err);
    if (rc)
        return rc;
    q->st.steps++;
    q->st.max_running = n_span > q->st.max_running ? n_span : q->st.max_running;
    int row = 0, erow = 0;
    for (int i = 0, t0 = 0; i < n_span; t0 += q->spans[i++].n_tok) {
        struct sched_req *r = q->span_req[i];
        const struct eng_span *sp = &q->spans[i];
        if (sp->embd) {
            erow += pool_rows(q, r, sp, q->embd + (size_t)erow * (size_t)q->n_embd);
            continue;
        }
        if (r->n_done >= r->n_prompt) { /* a decode: its token's row, and its draft's */
            verify(q, r, sp, q->tokens + t0 + 1, q->logits + (size_t)row * (size_t)q->n_vocab);
            row += sp->all_rows ? sp->n_tok : 1;
            continue;
        }
        /* a row per token: each scores the prompt token after it */
        for (int j = 0; sp->all_rows && j < sp->n_tok && sp->pos0 + j + 1 < r->n_prompt; j++)
            score_prompt(q, r, sp->pos0 + j + 1, q->logits + (size_t)(row + j) * (size_t)q->n_vocab);
        row += sp->all_rows ? sp->n_tok - sp->logits : 0;
        r->n_done += sp->n_tok;
        q->st.prompt_tokens += (uint64_t)sp->n_tok;
        keep_state(q, r);
        if (sp->logits)
            take_row(q, r, q->logits + (size_t)row++ * (size_t)q->n_vocab);
    }
    return 1;
}

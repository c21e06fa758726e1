/* test-prompt-logprobs: echo's prompt log-probabilities (app/scheduler.h's
 * prompt_logprobs). A 70-token prompt's figures from the scheduler, while
 * another request generates beside it, equal bit for bit the log-softmax of
 * the rows a lone evaluation of the prompt gives (the same chunks of
 * ENG_SCHED_PLP_CHUNK): each token's logprob under the row before it, the
 * top tokens, the first token without one. max_tokens 0 ends the request
 * after its prompt ("length"); with tokens to make, the answer's own
 * logprobs follow as usual. A session whose steps hold only 8 tokens (-b 8)
 * scores in chunks of 8, as an evaluation in 8s does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/scheduler.h"
#include "model/model.h"
#include "tests/check.h"
#include "text/tokenizer.h"

#define MODEL "tests/data/qwen3moe-tiny-F16.gguf"
#define TOP 3

static const char *const prompt =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity.";

struct got {
    bool done;
    enum eng_finish finish;
    int n_prompt, n_tokens, n_logprobs;
    struct fl_token_logprob *plp;
};

static void on_done(void *ctx, void *user, const struct eng_req_result *r)
{
    (void)ctx;
    struct got *g = user;
    g->done = true;
    g->finish = r->finish;
    g->n_prompt = r->n_prompt;
    g->n_tokens = r->n_tokens;
    g->n_logprobs = r->n_logprobs;
    if (r->prompt_logprobs && (g->plp = malloc(sizeof(*g->plp) * (size_t)r->n_prompt)))
        memcpy(g->plp, r->prompt_logprobs, sizeof(*g->plp) * (size_t)r->n_prompt);
}

static int open_session(int n_seq, int n_batch, struct eng_session **s, struct fl_err *err)
{
    struct eng_session_params p;
    eng_session_params_init(&p);
    p.model_path = MODEL;
    p.n_ctx = 256;
    p.n_batch = n_batch;
    p.n_seq = n_seq;
    p.n_threads = 2;
    return eng_session_open(&p, s, err);
}

/* The reference: the prompt evaluated alone in chunks of the same size. */
static float *reference_rows(const int32_t *ids, int n, int chunk, int *n_vocab)
{
    struct eng_session *s = NULL;
    struct fl_err err = { "" };
    if (open_session(1, chunk, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        return NULL;
    }
    *n_vocab = (int)eng_session_model(s)->hp.n_vocab;
    float *rows = malloc(sizeof(float) * (size_t)n * (size_t)*n_vocab);
    CHECK(rows && !eng_session_eval(s, ids, n, true, rows, &err), "eval: %s", err.msg);
    eng_session_close(s);
    return rows;
}

static void compare(const struct got *g, const float *rows, const int32_t *ids, int n, int V)
{
    CHECK(g->plp && g->n_prompt == n, "prompt logprobs for %d tokens (%d)", n, g->n_prompt);
    if (!g->plp)
        return;
    CHECK(g->plp[0].token.id == ids[0] && isnan(g->plp[0].token.logprob) && !g->plp[0].n_top,
          "the first token has no logprob");
    int same = 0;
    for (int p = 1; p < n; p++) {
        const float *row = rows + (size_t)(p - 1) * (size_t)V;
        const double lse = fl_logsumexp(row, V);
        struct fl_logprob top[TOP];
        const int k = fl_top_logprobs(row, V, lse, TOP, top);
        const struct fl_token_logprob *e = &g->plp[p];
        bool ok = e->token.id == ids[p] && e->token.logprob == (float)((double)row[ids[p]] - lse) &&
                  e->n_top == k;
        for (int t = 0; ok && t < k; t++)
            ok = e->top[t].id == top[t].id && e->top[t].logprob == top[t].logprob;
        same += ok;
        CHECK(ok, "position %d: %d %.9g (want %d %.9g)", p, e->token.id, e->token.logprob, ids[p],
              (double)row[ids[p]] - lse);
    }
    printf("%d prompt positions equal a lone evaluation's log-softmax, bit for bit\n", same);
}

/* A session whose steps hold fewer tokens than a scored chunk (-b 8):
 * its chunks are 8, and the same figures as an evaluation in 8s. */
static void small_batch(const int32_t *ids, int n)
{
    struct eng_session *s = NULL;
    struct fl_err err = { "" };
    int V = 0;
    float *rows = reference_rows(ids, n, 8, &V);
    struct got g = { 0 };
    static const struct eng_sched_hooks hooks = { .done = on_done };
    struct eng_sched *q = NULL;
    struct eng_req a = { .prompt = ids, .n_prompt = n, .max_tokens = 0, .logprobs = true,
                         .top_logprobs = TOP, .prompt_logprobs = true, .user = &g };
    fl_sampler_defaults(&a.sampling, 0);
    if (!open_session(1, 8, &s, &err) && !eng_sched_create(s, &hooks, &q, &err) &&
        eng_sched_submit(q, &a, &err) >= 0)
        while (eng_sched_step(q, &err) > 0)
            ;
    CHECK(g.done && g.finish == ENG_FINISH_LENGTH, "-b 8: %s", err.msg);
    if (rows)
        compare(&g, rows, ids, n, V);
    eng_sched_free(q);
    eng_session_close(s);
    free(g.plp);
    free(rows);
}

int main(void)
{
    struct eng_session *s = NULL;
    struct fl_err err = { "" };
    if (open_session(2, 64, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        return check_summary("test-prompt-logprobs");
    }
    int32_t *ids = NULL;
    const int n = fl_tokenize_alloc(eng_session_tokenizer(s), prompt, strlen(prompt), true, false,
                                    &ids);
    CHECK(n > 4 * ENG_SCHED_PLP_CHUNK, "a prompt of several chunks (%d tokens)", n);
    int V = 0;
    float *rows = reference_rows(ids, n, ENG_SCHED_PLP_CHUNK, &V);
    struct got echo0 = { 0 }, echo3 = { 0 }, other = { 0 };
    static const struct eng_sched_hooks hooks = { .done = on_done };
    struct eng_sched *q = NULL;
    CHECK(!eng_sched_create(s, &hooks, &q, &err), "scheduler: %s", err.msg);
    const int32_t side[] = { 5, 6, 7, 8, 9 };
    struct eng_req a = { .prompt = ids, .n_prompt = n, .max_tokens = 0, .logprobs = true,
                         .top_logprobs = TOP, .prompt_logprobs = true, .user = &echo0 };
    struct eng_req b = a;
    b.max_tokens = 3;
    b.user = &echo3;
    struct eng_req c = { .prompt = side, .n_prompt = 5, .max_tokens = 20, .user = &other };
    fl_sampler_defaults(&a.sampling, 0);
    a.sampling.temperature = b.sampling.temperature = c.sampling.temperature = 0;
    b.sampling = c.sampling = a.sampling;
    CHECK(q && eng_sched_submit(q, &c, &err) >= 0 && eng_sched_submit(q, &a, &err) >= 0 &&
              eng_sched_submit(q, &b, &err) >= 0, "submit: %s", err.msg);
    int rc;
    while (q && (rc = eng_sched_step(q, &err)) > 0)
        ;
    CHECK(q && rc == 0, "steps: %s", err.msg);
    CHECK(echo0.done && echo0.finish == ENG_FINISH_LENGTH && echo0.n_tokens == 0,
          "max_tokens 0: the prompt alone, finish length (%d, %d tokens)", echo0.finish,
          echo0.n_tokens);
    CHECK(echo3.done && echo3.n_tokens == 3 && echo3.n_logprobs == 3,
          "max_tokens 3: the answer's own logprobs too (%d)", echo3.n_logprobs);
    CHECK(other.done && other.n_tokens > 0 && !other.plp, "the request beside them: no prompt's");
    if (rows) {
        compare(&echo0, rows, ids, n, V);
        compare(&echo3, rows, ids, n, V);
    }
    eng_sched_free(q);
    small_batch(ids, n);
    free(echo0.plp);
    free(echo3.plp);
    free(rows);
    free(ids);
    eng_session_close(s);
    return check_summary("test-prompt-logprobs");
}

/* embeddings.c: POST /v1/embeddings, /embeddings and /embedding (http.h):
 * each input one job of the engine (a prompt alone, its rows pooled),
 * posted together so they run side by side, then one answer. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "api/embeddings.h"
#include "serve/engine-request.h"
#include "serve/http.h"

/* Input i's job: its tokens, no generation, the server's pooling. */
static int post_input(struct srv_conn *k, const struct api_embd_input *in, int i,
                      enum eng_pooling pool, enum MHD_Result *rc)
{
    struct srv *s = k->s;
    struct eng_session *ses = srv_loop_session(s->loop);
    char why[160];
    int32_t *ids = NULL;
    const int n = srv_embd_tokens(eng_session_tokenizer(ses), in, eng_session_n_ctx(ses), &ids,
                                  why, sizeof(why));
    if (n < 0) {
        srv_conn_release_jobs(k);
        *rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                              strstr(why, "(-c)") ? "context_length_exceeded" : "invalid_input",
                              "input[%d]: %s", i, why);
        return -1;
    }
    struct srv_job *j = srv_job_new();
    if (j) {
        j->prompt_owned = ids;
        j->req = (struct eng_req){ .prompt = ids, .n_prompt = n, .embed = true, .pooling = pool,
                                   .sampling = s->o->samp };
        j->n_prompt = n;
    } else {
        free(ids);
    }
    /* the queue's limit counts requests: a list's later inputs join its first */
    const int prc = j ? srv_job_post(s->loop, j, i ? INT_MAX : s->o->max_queue) : -ENOMEM;
    if (prc) {
        srv_job_release(s->loop, j);
        *rc = srv_post_failed(k, prc);
        return -1;
    }
    k->jobs[k->n_jobs++] = j;
    return 0;
}

/* The answer once every job ended: rows normalized (pooled ones only, as
 * llama-server does), or the first failure. */
static enum MHD_Result answer(struct srv_conn *k, const struct api_embd_request *r,
                              enum eng_pooling pool)
{
    const int n = k->n_jobs;
    const float **rows = calloc((size_t)n, sizeof(*rows));
    int *n_rows = calloc((size_t)n, sizeof(int)), *n_tok = calloc((size_t)n, sizeof(int));
    int n_embd = 0;
    json_t *doc = NULL;
    for (int i = 0; rows && n_rows && n_tok && i < n; i++) {
        struct srv_job *j = k->jobs[i];
        if (!j->result.embd) { /* each job is done: no lock needed to read it */
            free(rows), free(n_rows), free(n_tok);
            return srv_reply_error(k, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error",
                                   "engine_error", "input[%d]: %s", i,
                                   j->error[0] ? j->error : "the request failed");
        }
        n_embd = j->result.n_embd;
        n_rows[i] = j->result.n_embd_rows;
        n_tok[i] = j->result.n_prompt;
        if (pool != ENG_POOL_NONE)
            api_embd_normalize(j->embd, j->embd, n_embd, r->normalize);
        rows[i] = j->embd;
    }
    if (rows && n_rows && n_tok)
        doc = api_embd_answer(r, k->s->model_name, rows, n_rows, n_embd, n_tok);
    free(rows), free(n_rows), free(n_tok);
    return doc ? srv_reply_json(k, MHD_HTTP_OK, doc)
               : srv_reply_error(k, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "oom",
                                 "out of memory");
}

enum MHD_Result srv_embeddings(struct srv_conn *k, bool oai)
{
    enum MHD_Result rc;
    json_t *body = srv_body_object(k, &rc);
    if (!body)
        return rc;
    struct api_embd_request r;
    struct fl_err err = { "" };
    const int prc = api_embd_from_json(body, oai, k->s->o->embd_normalize, &r, &err);
    json_decref(body);
    const enum eng_pooling pool = srv_embd_pooling(srv_loop_session(k->s->loop), k->s->o->pooling);
    if (prc)
        rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_request",
                             "%s", err.msg);
    else if (r.oai && pool == ENG_POOL_NONE)
        rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_request",
                             "--pooling none gives a row per token, which OpenAI's answer has no "
                             "room for: use /embedding, or start the server with --pooling "
                             "mean, cls or last");
    else if (!(k->jobs = calloc((size_t)r.n_in, sizeof(*k->jobs))))
        rc = srv_post_failed(k, -ENOMEM);
    else {
        int i = 0;
        while (i < r.n_in && !post_input(k, &r.in[i], i, pool, &rc))
            i++;
        if (i == r.n_in)
            rc = srv_wait_jobs(k) ? answer(k, &r, pool) : MHD_NO;
    }
    api_embd_free(&r);
    return rc;
}

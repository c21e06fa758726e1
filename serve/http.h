/* http.h: what the HTTP side's files share (serve/http.c: completions and
 * replies; serve/endpoints.c: the other endpoints; serve/server.c: the
 * daemon, routing, limits). Not an interface outside serve/. */
#ifndef FL_SERVE_HTTP_H
#define FL_SERVE_HTTP_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/openai.h"
#include "base/json.h"
#include "serve/engine-loop.h"
#include "serve/server.h"

#define SRV_N_ROUTES 9

struct srv {
    const struct srv_opts *o;
    struct srv_loop *loop;
    struct MHD_Daemon *d;
    char model_name[256];
    enum fl_chat_format chat;
    int64_t started;                /* unix seconds */
    pthread_mutex_t mu;             /* next_id, seed_state, the counters */
    unsigned long long next_id;
    uint64_t seed_state;
    uint64_t responses[SRV_N_ROUTES][6]; /* per route: 2xx 4xx 5xx 401 413 503 */
};

/* One request on a connection. */
struct srv_conn {
    struct srv *s;
    struct MHD_Connection *c;
    int route;                      /* index into the route table, -1: unknown */
    char *body;                     /* the request body (max_body at most) */
    size_t body_len;
    bool too_big, answered, streaming;
    unsigned status;
    /* a completion (a stream's job belongs to its response) */
    enum api_kind kind;
    struct srv_job **jobs;          /* one per prompt and choice ("n"; job p * n + c; a
                                     * stream's belong to its response) */
    int n_jobs, n_choice;
    char id[64];
    int64_t created;
    struct api_answer_reader answer; /* how its answer's reasoning and calls are read */
};

/* Releases a connection's jobs: those not done are cancelled. */
void srv_conn_release_jobs(struct srv_conn *k);

enum MHD_Result srv_reply(struct MHD_Connection *c, unsigned status, const char *type,
                          const char *body, size_t n);
enum MHD_Result srv_reply_json(struct srv_conn *k, unsigned status, json_t *v);
enum MHD_Result srv_reply_error(struct srv_conn *k, unsigned status, const char *type,
                                const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The body as a JSON object, or NULL with a 400 already queued (*rc). */
json_t *srv_body_object(struct srv_conn *k, enum MHD_Result *rc);
/* The body as a request of kind (api_request_free it), or false with a 400
 * already queued (*rc). */
bool srv_request(struct srv_conn *k, enum api_kind kind, struct api_request *req,
                 enum MHD_Result *rc);

enum MHD_Result srv_completion(struct srv_conn *k, enum api_kind kind);
enum MHD_Result srv_models(struct srv_conn *k);
enum MHD_Result srv_health(struct srv_conn *k);
enum MHD_Result srv_metrics(struct srv_conn *k);
enum MHD_Result srv_tokenize(struct srv_conn *k);
enum MHD_Result srv_detokenize(struct srv_conn *k);
/* llama-server's /apply-template: a chat body's prompt text, {"prompt"}. */
enum MHD_Result srv_apply_template(struct srv_conn *k);

#endif

/* server.h: `faultline serve` — an OpenAI-compatible HTTP server
 * (libmicrohttpd) over the many-sequences engine (docs/serve.md).
 *
 * Endpoints as llama-server serves them: POST /v1/chat/completions and
 * /v1/completions (plain and stream: true as server-sent events ending
 * with "data: [DONE]"), GET /v1/models, /health (503 while loading),
 * /metrics (Prometheus text), POST /tokenize, /detokenize and /apply-template;
 * tools and tool calls for chat formats that have them (api/openai.h). Errors are
 * OpenAI's {"error": {"message", "type", "code"}} with the status they
 * call for. One engine thread steps every request's sequence together
 * (serve/engine-loop.h); each connection has its own thread. */
#ifndef FL_SERVE_SERVER_H
#define FL_SERVE_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "api/openai.h"
#include "app/session.h"
#include "app/speculate.h"
#include "base/error.h"
#include "text/chat.h"
#include "text/sampler.h"

struct srv_opts {
    struct eng_session_params sp;
    const char *host;          /* default 127.0.0.1 */
    int port;                  /* default 8080; 0: any free port (printed) */
    const char *api_key;       /* the keys, comma-separated (llama-server's list); NULL: none */
    const char *alias;         /* the model's name in responses (default: the file's) */
    enum fl_chat_format chat;  /* FL_CHAT_UNKNOWN: the model's own */
    struct fl_sampler_params samp; /* what a request does not say */
    struct api_reasoning_defaults reasoning; /* ... about reasoning */
    struct api_constraint_defaults constraint; /* ... about the answer's form (-j, --grammar) */
    int max_tokens;            /* a request without max_tokens: -1 = up to the context */
    int max_queue;             /* requests waiting for a sequence before 503 */
    size_t max_body;           /* bytes; more: 413 */
    int max_conn;              /* connections at once */
    int timeout_s;             /* an idle connection is closed after it */
    double drain_s;            /* SIGINT/SIGTERM: in-flight requests get this long */
    int infill_batch;          /* -b: /infill keeps prefix and suffix within it (2048) */
    bool spm_infill;           /* --spm-infill: /infill's prompt puts the suffix first */
    bool no_slots;             /* --no-slots: GET /slots answers 501 */
    const char *slot_save_path; /* --slot-save-path DIR: POST /slots/{id}?action=... (NULL:
                                 * they answer 501) */
    int pooling;               /* --pooling (enum eng_pooling); -1: the model's pooling_type,
                                * else last */
    int embd_normalize;        /* --embd-normalize (api/embeddings.h) */
    struct eng_spec_params spec; /* --spec-type ... (app/speculate.h) */
};

void srv_opts_init(struct srv_opts *o);

/* Listens, loads the model, serves until SIGINT/SIGTERM, drains, returns
 * 0; or -errno with err (cannot bind, the model does not open). */
int srv_run(const struct srv_opts *o, struct fl_err *err);

#endif

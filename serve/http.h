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

#define SRV_N_ROUTES 18

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
    bool native;                    /* llama-server's /completion answers (serve/native.c), */
    int n_predict;                  /* its request's n_predict (-1: not given) */
    bool return_tokens;             /* and return_tokens, */
    json_t *fields;                 /* and response_fields (a reference; NULL: all) */
    bool anthropic;                 /* Anthropic's /v1/messages: its answers and errors
                                     * (serve/anthropic.c) */
    bool responses;                 /* OpenAI's /v1/responses (serve/responses.c) */
    char path_arg[32];              /* the {id} of /slots/{id} (serve/slots.c) */
};

/* A call as a stream sent it so far. */
struct srv_call_out {
    char *name, *args;
};

/* One choice of a streamed completion. */
struct srv_choice {
    struct srv_job *job;
    bool sent_role, ended;
    bool sent_echo;                 /* echo: the prompt went first */
    size_t sent;                    /* bytes of the answer's content streamed */
    size_t r_sent;                  /* bytes of the reasoning streamed */
    size_t seen;                    /* bytes of the text looked at: sent plus held back */
    int lp_sent;                    /* tokens whose logprobs were streamed */
    int calls_sent;                 /* calls streamed as they grow (their first chunk out), */
    struct srv_call_out *calls_out; /* and each one's name and the arguments its chunks carried; */
    double calls_read_at;           /* when the growing answer's calls were last read */
    int blocks;                     /* Anthropic's content blocks / the Responses API's output
                                     * items started, */
    char open;                      /* and the open one's kind (0: none; Anthropic's 't'hinking,
                                     * 'x' text; the Responses API's 'r'easoning, 'm'essage), */
    int open_at;                    /* and (Responses) its output index: a message stays open
                                     * while calls are added after it */
};

/* A streamed completion: owned by its MHD response (freed with it). */
struct srv_stream {
    struct srv *s;
    int fd;
    enum api_kind kind;
    bool native;                    /* llama-server's /completion events (serve/native.c) */
    bool anthropic;                 /* Anthropic's message events (serve/anthropic.c) */
    bool responses;                 /* the Responses API's events (serve/responses.c), */
    int seq;                        /* and their sequence numbers */
    int n_predict;                  /* ... and its request's n_predict, for the settings, */
    json_t *fields;                 /* and response_fields for the last event (a reference) */
    char id[64];
    int64_t created;
    bool include_usage, ended;
    const struct eng_session *ses;  /* its tokenizer renders logprobs (taken before the loop's
                                     * mutex is held: srv_loop_session takes it) */
    char *out;                      /* events not yet handed to the socket */
    size_t out_len, out_off;
    double last_out;                /* when bytes last went out (fl_clock_s) */
    struct api_answer_reader answer; /* content is held back where a call may start */
    int n;                          /* choices: prompts times "n" */
    int n_choice;                   /* "n": choice c is prompt c / n_choice's */
    struct srv_choice ch[];
};



/* One "data: {...}\n\n" event onto a stream's pending bytes (takes v);
 * named: "event: NAME\n" before it. */
void srv_sse_event(struct srv_stream *k, json_t *v);
void srv_sse_named(struct srv_stream *k, const char *event, json_t *v);

struct fl_reasoning_split;
/* How much of job j's content (sp's part of its text) may go out (mutex
 * held): the whole UTF-8 characters, but where a tool call may start;
 * once done, its calls read into ans (fl_tool_answer_free it), and the
 * content up to the first. */
size_t srv_content_settled(const struct api_tool_reader *tools, const struct srv_job *j,
                           const struct fl_reasoning_split *sp, struct fl_tool_answer *ans);
/* A call's growth as an API streams it: its first piece (name given: the
 * call starts) or more of its arguments (args[0..n)). */
typedef void srv_call_piece_fn(struct srv_stream *k, struct srv_choice *o, int i, const char *name,
                               const char *args, size_t n);
/* Call i of choice o, its name and the arguments it has so far: what is new
 * to the stream goes out through emit (calls start in order; arguments
 * that do not extend what went out wait). Mutex held. */
void srv_call_grow(struct srv_stream *k, struct srv_choice *o, int i, const char *name,
                   const char *args, size_t len, srv_call_piece_fn *emit);
/* The calls choice o's growing content text[0..len) has begun, grown
 * (api_tool_partial); once one has begun, read at most every 0.1 s (each
 * read parses the whole answer, with the engine's mutex held: a long
 * call's arguments would cost their square). */
void srv_calls_partial(struct srv_stream *k, struct srv_choice *o, const char *text, size_t len,
                       srv_call_piece_fn *emit);
/* The content an answer with calls still has to send once sent bytes of
 * text went out (*rest, and its length). */
size_t srv_calls_rest(const char *text, size_t sent, const struct fl_tool_answer *ans,
                      const char **rest);

/* --- Anthropic's /v1/messages (serve/anthropic.c) --- */
/* A finished job's message, or NULL: the request failed or memory ran out. */
json_t *srv_anthropic_result(struct srv_conn *k, struct srv_job *j);
/* Choice c's events (the loop's mutex held): message_start, the thinking,
 * text and tool_use blocks as they settle, message_delta, message_stop. */
void srv_anthropic_news(struct srv_stream *k, int c);
/* POST /v1/messages/count_tokens: {"input_tokens"} of a request's prompt. */
enum MHD_Result srv_count_tokens(struct srv_conn *k);

/* --- OpenAI's /v1/responses (serve/responses.c) --- */
/* A finished job's response object, or NULL: the request failed. */
json_t *srv_responses_result(struct srv_conn *k, struct srv_job *j);
/* Choice c's events (the loop's mutex held): response.created, the
 * reasoning, message and function_call items as they settle,
 * response.completed (or incomplete, failed). */
void srv_responses_news(struct srv_stream *k, int c);

/* --- llama-server's /completion (serve/native.c) --- */
/* A finished job's result object (index: its place in the request), or
 * NULL: the request failed or memory ran out. */
json_t *srv_native_result(struct srv_conn *k, struct srv_job *j, int index);
/* Choice c's events (the loop's mutex held): text and its tokens as they
 * settle, then the last event with every field, or the error. */
void srv_native_news(struct srv_stream *k, int c);
/* GET /props: the server's settings as llama-server's /props gives them. */
enum MHD_Result srv_props(struct srv_conn *k);
/* GET /slots: each sequence as llama-server's slots (its request's prompt
 * progress, tokens, settings); ?fail_on_no_slot=1: 503 when none is idle;
 * 501 with --no-slots. */
enum MHD_Result srv_slots(struct srv_conn *k);
/* POST /slots/{id}?action=save|restore|erase (serve/slots.c). */
enum MHD_Result srv_slot_action(struct srv_conn *k);

/* Releases a connection's jobs: those not done are cancelled. */
void srv_conn_release_jobs(struct srv_conn *k);
/* Waits for every job of k to end; false (jobs released) when the client
 * went away meanwhile. */
bool srv_wait_jobs(struct srv_conn *k);
/* The answer when posting a job failed with rc (-ENOMEM: 500, -EAGAIN: 503
 * queue full, else 503 stopping); k's jobs are released. */
enum MHD_Result srv_post_failed(struct srv_conn *k, int rc);

enum MHD_Result srv_reply(struct MHD_Connection *c, unsigned status, const char *type,
                          const char *body, size_t n);
enum MHD_Result srv_reply_json(struct srv_conn *k, unsigned status, json_t *v);
enum MHD_Result srv_reply_error(struct srv_conn *k, unsigned status, const char *type,
                                const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The body as a JSON object, or NULL with a 400 already queued (*rc). */
json_t *srv_body_object(struct srv_conn *k, enum MHD_Result *rc);
/* Whose request a completion endpoint reads: OpenAI's, llama-server's
 * /completion, or its /infill (api/native.h), or Anthropic's /v1/messages
 * (api/anthropic.h), or OpenAI's /v1/responses (api/responses.h), both
 * read as OpenAI chat requests. */
enum srv_flavour { SRV_OPENAI, SRV_NATIVE, SRV_INFILL, SRV_ANTHROPIC, SRV_RESPONSES };

/* The body as a request of kind in flavour f (api_request_free it), or
 * false with a 400 already queued (*rc). */
bool srv_request(struct srv_conn *k, enum api_kind kind, enum srv_flavour f,
                 struct api_request *req, enum MHD_Result *rc);

/* A completion endpoint: OpenAI's of kind, or llama-server's /completion
 * or /infill (a model without FIM tokens: 501). */
enum MHD_Result srv_completion(struct srv_conn *k, enum api_kind kind, enum srv_flavour f);
enum MHD_Result srv_models(struct srv_conn *k);
enum MHD_Result srv_health(struct srv_conn *k);
enum MHD_Result srv_metrics(struct srv_conn *k);
enum MHD_Result srv_tokenize(struct srv_conn *k);
enum MHD_Result srv_detokenize(struct srv_conn *k);
/* llama-server's /apply-template: a chat body's prompt text, {"prompt"}. */
enum MHD_Result srv_apply_template(struct srv_conn *k);
/* Embeddings (serve/embeddings.c): OpenAI's /v1/embeddings (oai) or
 * llama-server's /embedding and /embeddings (api/embeddings.h). */
enum MHD_Result srv_embeddings(struct srv_conn *k, bool oai);

#endif

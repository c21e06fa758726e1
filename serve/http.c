/* http.c: the HTTP side of `faultline serve` (server.h): libmicrohttpd,
 * one thread per connection, routing, limits, authentication, and the
 * completion endpoints; the others are in endpoints.c. */
#include "serve/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/anthropic.h"
#include "api/embeddings.h"
#include "api/native.h"
#include "api/responses.h"
#include "api/openai.h"
#include "base/clock.h"
#include "serve/engine-request.h"
#include "text/tokenizer.h"
#include "text/tool-calls.h"
#include "text/unicode.h"

void srv_opts_init(struct srv_opts *o)
{
    memset(o, 0, sizeof(*o));
    eng_session_params_init(&o->sp);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->chat = FL_CHAT_UNKNOWN;
    fl_sampler_defaults(&o->samp, 0);
    o->reasoning = (struct api_reasoning_defaults){ .format = API_REASONING_DEEPSEEK, .thinking = -1,
                                                    .budget = -1 };
    o->max_tokens = -1;
    o->max_queue = 64;
    o->max_body = 8u << 20;
    o->max_conn = 512;
    o->timeout_s = 60;
    o->drain_s = 10;
    o->infill_batch = 2048;
    o->pooling = -1;
    o->embd_normalize = API_EMBD_NORM_DEFAULT;
    o->spec = ENG_SPEC_PARAMS_DEFAULT;
}

/* --- responses ------------------------------------------------------------------------ */

enum MHD_Result srv_reply(struct MHD_Connection *c, unsigned status, const char *type,
                          const char *body, size_t n)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(r, "Retry-After", "1");
    const enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Takes v's reference. An error on Anthropic's endpoints goes in its shape. */
enum MHD_Result srv_reply_json(struct srv_conn *k, unsigned status, json_t *v)
{
    if (k->anthropic && status >= 400)
        v = api_anthropic_error_json(v, status);
    char *s = fl_json_line(v);
    json_decref(v);
    k->status = s ? status : MHD_HTTP_INTERNAL_SERVER_ERROR;
    const enum MHD_Result rc = s ? srv_reply(k->c, status, "application/json", s, strlen(s))
                                 : srv_reply(k->c, k->status, "text/plain", "out of memory", 13);
    free(s);
    return rc;
}

enum MHD_Result srv_reply_error(struct srv_conn *k, unsigned status, const char *type,
                                const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return srv_reply_json(k, status, api_error_json(type, code, msg));
}

json_t *srv_body_object(struct srv_conn *k, enum MHD_Result *rc)
{
    json_t *body = NULL;
    struct fl_err err = { "" };
    if (fl_json_load_bytes(k->body, k->body_len, false, "the body", &body, &err)) {
        *rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_json",
                              "%s", err.msg);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        *rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                              "invalid_request", "body: expected an object");
        return NULL;
    }
    return body;
}

/* --- the completion endpoints --------------------------------------------------------- */

static void new_id(struct srv_conn *k)
{
    struct srv *s = k->s;
    pthread_mutex_lock(&s->mu);
    const unsigned long long seq = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    snprintf(k->id, sizeof(k->id), "%s%llx%llx",
             k->anthropic ? "msg_" : k->responses ? "resp_" : k->kind == API_CHAT ? "chatcmpl-"
             : "cmpl-",
             (unsigned long long)s->started, seq);
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* The client closed its end (a pipelined request would be POLLIN only). */
static bool client_gone(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLRDHUP };
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void srv_conn_release_jobs(struct srv_conn *k)
{
    for (int c = 0; c < k->n_jobs; c++)
        srv_job_release(k->s->loop, k->jobs[c]); /* cancels: its cells are free next step */
    free(k->jobs);
    k->jobs = NULL;
    k->n_jobs = 0;
}

static enum MHD_Result finish_error(struct srv_conn *k, const struct srv_job *j)
{
    return srv_reply_error(k, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "engine_error",
                           "%s", j->error[0] ? j->error : "the request failed");
}

/* A finished job's choice as a whole completion object, or NULL: the
 * request failed (or memory ran out). */
static json_t *choice_json(struct srv_conn *k, struct srv_job *j)
{
    srv_loop_lock(k->s->loop);
    const struct eng_req_result r = j->result;
    char *text = j->len ? strndup(j->text, j->len) : strdup("");
    const int n_lp = j->req.logprobs ? j->n_lp_final : 0;
    struct fl_token_logprob *lp = j->req.logprobs ? malloc(sizeof(*lp) * (size_t)(n_lp + 1)) : NULL;
    if (lp && n_lp)
        memcpy(lp, j->lp, sizeof(*lp) * (size_t)n_lp);
    srv_loop_unlock(k->s->loop);
    json_t *doc = NULL;
    struct api_answer ans = { 0 };
    const bool echo_lp = j->echo_text && j->req.logprobs;
    if (r.finish != ENG_FINISH_ERROR && text && (!j->req.logprobs || lp) && (!echo_lp || j->plp) &&
        !api_answer_read(&k->answer, text, strlen(text), r.finish != ENG_FINISH_LENGTH, &ans)) {
        const struct api_completion c = {
            .kind = k->kind, .id = k->id, .model = k->s->model_name, .created = k->created,
            .text = ans.content, .len = ans.content_len, .finish_reason = eng_finish_name(r.finish),
            .prompt_tokens = r.n_prompt, .completion_tokens = r.n_tokens, .logprobs = lp,
            .n_logprobs = n_lp, .tok = eng_session_tokenizer(srv_loop_session(k->s->loop)),
            .cached_tokens = r.n_cached, .tools = ans.has_tools ? &ans.tools : NULL,
            .reasoning = ans.reasoning, .reasoning_len = ans.reasoning_len,
            .echo = j->echo_text != NULL, .prompt = j->echo_text, .prompt_len = j->echo_len,
            .prompt_logprobs = j->plp,
        };
        doc = api_completion_json(&c);
    }
    api_answer_free(&ans);
    free(lp);
    free(text);
    return doc;
}

/* /completion's answer: one result object, or an array of them (several
 * prompts or choices), as llama-server's. */
static enum MHD_Result reply_native(struct srv_conn *k)
{
    json_t *arr = json_array();
    for (int c = 0; arr && c < k->n_jobs; c++) {
        json_t *one = srv_native_result(k, k->jobs[c], c);
        if (!one || json_array_append_new(arr, one)) {
            json_decref(arr);
            return finish_error(k, k->jobs[c]);
        }
    }
    if (!arr)
        return finish_error(k, k->jobs[0]);
    json_t *doc = k->n_jobs == 1 ? json_incref(json_array_get(arr, 0)) : json_incref(arr);
    json_decref(arr);
    return srv_reply_json(k, MHD_HTTP_OK, doc);
}

bool srv_wait_jobs(struct srv_conn *k)
{
    srv_loop_lock(k->s->loop);
    for (int c = 0; c < k->n_jobs; c++) {
        struct srv_job *j = k->jobs[c];
        while (!j->done) {
            srv_loop_unlock(k->s->loop);
            if (client_gone(conn_fd(k->c))) {
                srv_conn_release_jobs(k);
                return false;
            }
            srv_loop_lock(k->s->loop);
            if (!j->done)
                srv_job_wait(k->s->loop, j, 100);
        }
    }
    srv_loop_unlock(k->s->loop);
    return true;
}

/* stream: false — wait for the ends (noticing a client that leaves), then
 * one JSON object with a choice per job. */
static enum MHD_Result reply_whole(struct srv_conn *k)
{
    if (!srv_wait_jobs(k))
        return MHD_NO;
    if (k->native)
        return reply_native(k);
    if (k->anthropic || k->responses) { /* one answer: these requests have no "n" */
        json_t *m = k->anthropic ? srv_anthropic_result(k, k->jobs[0])
                                 : srv_responses_result(k, k->jobs[0]);
        return m ? srv_reply_json(k, MHD_HTTP_OK, m) : finish_error(k, k->jobs[0]);
    }
    json_t **one = calloc((size_t)k->n_jobs, sizeof(*one));
    int failed = one ? -1 : 0; /* the first choice that has no object */
    for (int c = 0; one && c < k->n_jobs; c++)
        if (!(one[c] = choice_json(k, k->jobs[c])) && failed < 0)
            failed = c;
    json_t *doc = one ? api_completion_merge(one, k->n_jobs, k->n_choice) : NULL;
    free(one);
    return doc ? srv_reply_json(k, MHD_HTTP_OK, doc)
               : finish_error(k, k->jobs[failed < 0 ? 0 : failed]);
}

void srv_sse_named(struct srv_stream *k, const char *event, json_t *v)
{
    char *s = fl_json_line(v);
    json_decref(v);
    if (!s)
        return;
    const size_t n = strlen(s), e = event ? strlen(event) + 8 : 0; /* "event: X\n" */
    char *p = realloc(k->out, k->out_len + e + n + 9);
    if (p) {
        k->out = p;
        if (event)
            snprintf(p + k->out_len, e + 1, "event: %s\n", event);
        memcpy(p + k->out_len + e, "data: ", 6);
        memcpy(p + k->out_len + e + 6, s, n);
        memcpy(p + k->out_len + e + 6 + n, "\n\n", 2);
        k->out_len += e + n + 8;
    }
    free(s);
}

void srv_sse_event(struct srv_stream *k, json_t *v)
{
    srv_sse_named(k, NULL, v);
}

static void sse_raw(struct srv_stream *k, const char *s)
{
    const size_t n = strlen(s);
    char *p = realloc(k->out, k->out_len + n);
    if (p) {
        k->out = p;
        memcpy(p + k->out_len, s, n);
        k->out_len += n;
    }
}

size_t srv_calls_rest(const char *text, size_t sent, const struct fl_tool_answer *ans,
                      const char **rest)
{
    size_t lead = 0;
    while (lead < sent && isspace((unsigned char)text[lead]))
        lead++;
    *rest = ans->content + (sent - lead);
    return ans->content_len > sent - lead ? ans->content_len - (sent - lead) : 0;
}

/* Call i's slot as it begins: its name, no arguments yet (NULL: no memory). */
static struct srv_call_out *call_begin(struct srv_choice *o, int i, const char *name)
{
    struct srv_call_out *v = realloc(o->calls_out, sizeof(*v) * (size_t)(i + 1));
    if (!v)
        return NULL;
    o->calls_out = v;
    v[i] = (struct srv_call_out){ .name = strdup(name), .args = strdup("") };
    if (v[i].name && v[i].args)
        return &v[i];
    free(v[i].name);
    free(v[i].args);
    return NULL;
}

void srv_call_grow(struct srv_stream *k, struct srv_choice *o, int i, const char *name,
                   const char *args, size_t len, srv_call_piece_fn *emit)
{
    const bool begins = i == o->calls_sent;
    struct srv_call_out *c = begins ? NULL : &o->calls_out[i];
    const size_t sent = c ? strlen(c->args) : 0;
    if (i > o->calls_sent || (c && (len <= sent || strncmp(args, c->args, sent))))
        return;
    if (begins && !(c = call_begin(o, i, name)))
        return;
    char *copy = strndup(args, len);
    if (!copy) {
        if (begins) {
            free(c->name);
            free(c->args);
        }
        return;
    }
    emit(k, o, i, begins ? name : NULL, args + sent, len - sent);
    if (begins)
        o->calls_sent++;
    free(c->args);
    c->args = copy;
}

void srv_calls_partial(struct srv_stream *k, struct srv_choice *o, const char *text, size_t len,
                       srv_call_piece_fn *emit)
{
    const double now = fl_clock_s();
    if (now - o->calls_read_at < 0.1)
        return;
    struct fl_tool_partial *p = NULL;
    const int n = api_tool_partial(&k->answer.tools, text, len, &p);
    if (n > 0) /* before a call begins, a read is a search for its opening */
        o->calls_read_at = now;
    for (int i = 0; i < n; i++)
        srv_call_grow(k, o, i, p[i].name, p[i].args, p[i].args_len, emit);
    fl_tool_partials_free(p, n);
}

/* A chat chunk of call i's growth. */
static void chat_call_piece(struct srv_stream *k, struct srv_choice *o, int i, const char *name,
                            const char *args, size_t n)
{
    struct api_chunk ch = { .kind = k->kind, .id = k->id, .model = k->s->model_name,
                            .created = k->created, .tok = eng_session_tokenizer(k->ses),
                            .index = (int)(o - k->ch), .call = i + 1, .call_name = name,
                            .call_args = args, .call_args_len = n };
    srv_sse_event(k, api_chunk_json(&ch));
}

/* An answer's calls when it ends, after the content still to go: the rest
 * of those streamed as they grew, the others whole. */
static void stream_calls(struct srv_stream *k, struct srv_choice *o, struct api_chunk *ch,
                         const char *text, size_t sent, const struct fl_tool_answer *ans)
{
    const char *rest;
    const size_t n = srv_calls_rest(text, sent, ans, &rest);
    if (n) {
        ch->text = rest;
        ch->len = n;
        srv_sse_event(k, api_chunk_json(ch));
    }
    ch->text = NULL;
    for (int i = 0; i < ans->n_calls; i++)
        srv_call_grow(k, o, i, ans->calls[i].name, ans->calls[i].arguments,
                      strlen(ans->calls[i].arguments), chat_call_piece);
}

size_t srv_content_settled(const struct api_tool_reader *tools, const struct srv_job *j,
                           const struct fl_reasoning_split *sp, struct fl_tool_answer *ans)
{
    const char *text = j->text + sp->c_off;
    const size_t len = sp->c_len;
    size_t avail = j->done ? len : fl_utf8_whole(text, len);
    if (tools->mode != API_TOOLS_OFF && !j->done) {
        const size_t p = api_tool_content_prefix(tools, text, len);
        avail = p < avail ? fl_utf8_whole(text, p) : avail;
    } else if (tools->mode != API_TOOLS_OFF && j->result.finish != ENG_FINISH_ERROR &&
               !api_tool_read(tools, text, len, j->result.finish != ENG_FINISH_LENGTH, ans) &&
               ans->n_calls) {
        avail = api_tool_content_prefix(tools, text, len); /* up to the first call */
    }
    return avail;
}

/* The reasoning's settled growth as delta.reasoning_content. */
static void stream_reasoning(struct srv_stream *k, struct srv_choice *o, struct api_chunk *ch,
                             const char *text, const struct fl_reasoning_split *sp, bool done)
{
    const char *r = text + sp->r_off;
    const size_t avail = done ? sp->r_len : fl_utf8_whole(r, sp->r_len);
    if (avail <= o->r_sent)
        return;
    ch->reasoning = true;
    ch->text = r + o->r_sent;
    ch->len = avail - o->r_sent;
    srv_sse_event(k, api_chunk_json(ch));
    ch->reasoning = false;
    o->r_sent = avail;
}

/* The events choice c's news makes (mutex held). The answer's reasoning
 * goes out as it settles; its content (text[c_off..]) too, but where a
 * tool call may start. */
static void stream_news(struct srv_stream *k, int c)
{
    struct srv_choice *o = &k->ch[c];
    struct srv_job *j = o->job;
    struct api_chunk ch = { .kind = k->kind, .id = k->id, .model = k->s->model_name,
                            .created = k->created, .tok = eng_session_tokenizer(k->ses),
                            .index = c };
    if (!o->sent_role && k->kind == API_CHAT) {
        ch.role = true;
        ch.text = "";
        srv_sse_event(k, api_chunk_json(&ch));
        ch.role = false;
        o->sent_role = true;
    }
    if (j->echo_text && !o->sent_echo) { /* echo: the prompt's text first */
        ch.text = j->echo_text;
        ch.len = j->echo_len;
        srv_sse_event(k, api_chunk_json(&ch));
        o->sent_echo = true;
    }
    struct fl_reasoning_split sp;
    api_answer_progress(&k->answer, j->text, j->len, j->done, &sp);
    stream_reasoning(k, o, &ch, j->text, &sp, j->done);
    const char *text = j->text + sp.c_off;
    const size_t len = sp.c_len;
    o->seen = j->len;
    struct fl_tool_answer ans = { 0 };
    const size_t avail = srv_content_settled(&k->answer.tools, j, &sp, &ans);
    /* a token's logprobs go with the chunk that completes its bytes (one
     * without bytes, once text follows it: a stop string may yet cut it);
     * the rest of the answer's with the last text */
    const size_t settled = len ? sp.c_off + avail : sp.settled;
    int lp_end = o->lp_sent;
    if (j->req.logprobs)
        while (j->done ? lp_end < j->n_lp_final
                       : lp_end < j->n_lp && j->lp[lp_end].text_end <= settled &&
                             j->lp[lp_end].text_start < settled)
            lp_end++;
    if (avail > o->sent || lp_end > o->lp_sent) {
        ch.text = text + o->sent;
        ch.len = avail - o->sent;
        ch.logprobs = lp_end > o->lp_sent ? j->lp + o->lp_sent : NULL;
        ch.n_logprobs = lp_end - o->lp_sent;
        srv_sse_event(k, api_chunk_json(&ch));
        ch.logprobs = NULL;
        ch.n_logprobs = 0;
        o->sent = avail;
        o->lp_sent = lp_end;
    }
    if (!j->done) {
        if (k->answer.tools.mode != API_TOOLS_OFF)
            srv_calls_partial(k, o, text, len, chat_call_piece);
        return;
    }
    if (ans.n_calls) /* the calls, after any content between or after them */
        stream_calls(k, o, &ch, text, avail, &ans);
    if (j->result.finish == ENG_FINISH_ERROR) {
        srv_sse_event(k, api_error_json("server_error", "engine_error",
                                    j->error[0] ? j->error : "the request failed"));
    } else {
        ch.text = NULL;
        ch.finish_reason = ans.n_calls ? "tool_calls" : eng_finish_name(j->result.finish);
        srv_sse_event(k, api_chunk_json(&ch));
    }
    o->ended = true;
    fl_tool_answer_free(&ans);
}

/* Every choice ended: the usage chunk (the prompt once, every choice's
 * tokens) and [DONE] (mutex held). */
static void stream_end(struct srv_stream *k)
{
    if (k->include_usage) {
        struct api_chunk ch = { .kind = k->kind, .id = k->id, .model = k->s->model_name,
                                .created = k->created, .tok = eng_session_tokenizer(k->ses),
                                .usage = true };
        for (int c = 0; c < k->n; c++) { /* each prompt once */
            const struct eng_req_result *r = &k->ch[c].job->result;
            ch.completion_tokens += r->n_tokens;
            ch.prompt_tokens += c % k->n_choice ? 0 : r->n_prompt;
            ch.cached_tokens += c % k->n_choice ? 0 : r->n_cached;
        }
        srv_sse_event(k, api_chunk_json(&ch));
    }
    sse_raw(k, "data: [DONE]\n\n");
    k->ended = true;
}

/* Whether a choice has something to say (mutex held). New means bytes not
 * looked at yet: a token that ends inside a UTF-8 character adds bytes
 * that are held back, and reporting nothing new for them would have this
 * thread spin through poll() until the next token. */
static bool stream_has_news(const struct srv_stream *k)
{
    for (int c = 0; c < k->n; c++) {
        const struct srv_choice *o = &k->ch[c];
        if (!o->ended && (o->job->done || o->job->len != o->seen ||
                          (o->job->echo_text && !o->sent_echo) ||
                          (!o->sent_role && k->kind == API_CHAT)))
            return true;
    }
    return false;
}

/* A stream that has said nothing for a while says it is alive: the
 * connection timeout (--timeout) counts a response's silence too, and a
 * long prompt under the disk tier or a wait for a free sequence would have
 * it cut the stream (so would a client's idle timeout: undici's is 300 s).
 * An SSE comment, which every client skips; Anthropic's ping event. */
static void keep_alive(struct srv_stream *k)
{
    const double now = fl_clock_s();
    if (k->out_len) {
        k->last_out = now;
        return;
    }
    const double every = k->s->o->timeout_s > 0 && k->s->o->timeout_s < 30
                             ? k->s->o->timeout_s / 2.0 : 15.0;
    if (k->ended || now - k->last_out < every)
        return;
    sse_raw(k, k->anthropic ? "event: ping\ndata: {\"type\":\"ping\"}\n\n" : ": keep-alive\n\n");
    k->last_out = now;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct srv_stream *k = cls;
    if (k->out_off == k->out_len) {
        k->out_off = k->out_len = 0;
        if (k->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (client_gone(k->fd))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        srv_loop_lock(k->s->loop);
        int first = 0; /* nothing new: wait a while for the first choice still going */
        while (first + 1 < k->n && k->ch[first].ended)
            first++;
        if (!stream_has_news(k))
            srv_job_wait(k->s->loop, k->ch[first].job, k->n > 1 ? 20 : 100);
        bool all = true;
        for (int c = 0; c < k->n; c++) {
            if (!k->ch[c].ended && k->native)
                srv_native_news(k, c);
            else if (!k->ch[c].ended && k->anthropic)
                srv_anthropic_news(k, c);
            else if (!k->ch[c].ended && k->responses)
                srv_responses_news(k, c);
            else if (!k->ch[c].ended)
                stream_news(k, c);
            all = all && k->ch[c].ended;
        }
        if (all && (k->native || k->anthropic || k->responses)) /* these end without [DONE] */
            k->ended = true;
        else if (all)
            stream_end(k);
        srv_loop_unlock(k->s->loop);
        keep_alive(k);
    }
    const size_t n = k->out_len - k->out_off < max ? k->out_len - k->out_off : max;
    if (n) /* 0: nothing yet, MHD calls again */
        memcpy(buf, k->out + k->out_off, n);
    k->out_off += n;
    return (ssize_t)n;
}

/* The response is gone (sent, or the client left): the jobs go too. */
static void stream_free(void *cls)
{
    struct srv_stream *k = cls;
    for (int c = 0; c < k->n; c++) {
        srv_job_release(k->s->loop, k->ch[c].job);
        for (int i = 0; i < k->ch[c].calls_sent; i++) {
            free(k->ch[c].calls_out[i].name);
            free(k->ch[c].calls_out[i].args);
        }
        free(k->ch[c].calls_out);
    }
    json_decref(k->fields);
    free(k->out);
    free(k);
}

static enum MHD_Result reply_stream(struct srv_conn *k, bool include_usage)
{
    struct srv_stream *st = calloc(1, sizeof(*st) + sizeof(st->ch[0]) * (size_t)k->n_jobs);
    if (!st)
        return MHD_NO; /* on_completed releases the jobs */
    *st = (struct srv_stream){ .s = k->s, .fd = conn_fd(k->c), .kind = k->kind,
                               .created = k->created, .include_usage = include_usage,
                               .answer = k->answer, .n = k->n_jobs, .n_choice = k->n_choice,
                               .native = k->native, .anthropic = k->anthropic,
                               .responses = k->responses, .fields = json_incref(k->fields),
                               .n_predict = k->n_predict, .last_out = fl_clock_s(),
                               .ses = srv_loop_session(k->s->loop) };
    for (int c = 0; c < k->n_jobs; c++)
        st->ch[c] = (struct srv_choice){ .job = k->jobs[c] };
    snprintf(st->id, sizeof(st->id), "%s", k->id);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!r) {
        free(st);
        return MHD_NO;
    }
    free(k->jobs); /* the response's now */
    k->jobs = NULL;
    k->n_jobs = 0;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    k->status = MHD_HTTP_OK;
    k->streaming = true;
    const enum MHD_Result rc = MHD_queue_response(k->c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* Choice c's job: the prompt ids taken over (the job frees them, also
 * when this fails); NULL: out of memory. Choice c of a seeded request
 * samples with seed + c; unseeded ones each draw a seed, as OpenAI's
 * differ. */
static struct srv_job *new_job(struct srv_conn *k, const struct api_request *req, int32_t *ids,
                               int n, int c)
{
    struct srv *s = k->s;
    struct eng_session *ses = srv_loop_session(s->loop);
    struct srv_job *j = srv_job_new();
    if (!j) {
        free(ids);
        return NULL;
    }
    j->prompt_owned = ids;
    /* the loop submits the job after this request's JSON is gone: what the
     * engine request points at in it, the job owns a copy of */
    char *call_grammar = NULL;
    srv_engine_request(req, &k->answer, eng_session_tokenizer(ses), &s->o->samp, s->o->max_tokens,
                       eng_session_n_ctx(ses), &j->req, &j->schema_owned, &call_grammar);
    j->req.prompt = ids;
    j->req.n_prompt = n;
    j->req.logit_bias = NULL;
    j->req.n_logit_bias = 0;
    j->req.think_message = NULL;
    j->req.grammar = NULL;
    if (!j->schema_owned) /* a forced call's schema, or the request's */
        j->schema_owned = json_incref((json_t *)req->json_schema);
    j->req.json_schema = j->schema_owned;
    if (req->n_logit_bias > 0 &&
        (j->bias_owned = malloc(sizeof(*j->bias_owned) * (size_t)req->n_logit_bias))) {
        memcpy(j->bias_owned, req->logit_bias, sizeof(*j->bias_owned) * (size_t)req->n_logit_bias);
        j->req.logit_bias = j->bias_owned;
        j->req.n_logit_bias = req->n_logit_bias;
    }
    if (k->answer.budget >= 0 && k->answer.budget_message)
        j->req.think_message = j->think_message_owned = strdup(k->answer.budget_message);
    if (call_grammar) /* a forced call's */
        j->req.grammar = j->grammar_owned = call_grammar;
    else if (req->grammar && (j->req.grammar = j->grammar_owned = strndup(req->grammar,
                                                                          req->grammar_len)))
        j->req.grammar_len = req->grammar_len;
    if (req->echo)
        j->echo_text = api_prompt_text(req, eng_session_tokenizer(ses), ids, n, &j->echo_len);
    if ((req->n_logit_bias > 0 && !j->bias_owned) || (req->echo && !j->echo_text) ||
        (k->answer.budget >= 0 && k->answer.budget_message && !j->think_message_owned) ||
        (req->grammar && !j->grammar_owned)) {
        srv_job_release(s->loop, j);
        return NULL;
    }
    j->req.sampling.seed += (uint64_t)c;
    if (!req->has_seed) {
        pthread_mutex_lock(&s->mu);
        j->req.sampling.seed = s->seed_state = s->seed_state * 6364136223846793005ull + 1442695040888963407ull;
        pthread_mutex_unlock(&s->mu);
    }
    return j;
}

/* Prompt p's tokens (the request's selected prompt), or an error reply in
 * *rc (NULL). */
static int32_t *prompt_tokens(struct srv_conn *k, struct api_request *req, int p, int *n,
                              enum MHD_Result *rc)
{
    struct eng_session *ses = srv_loop_session(k->s->loop);
    int32_t *ids = NULL;
    const char *why = "out of memory";
    char at[32] = "";
    if (req->n_prompts > 1)
        snprintf(at, sizeof(at), "prompt[%d]: ", p);
    const struct srv_opts *o = k->s->o;
    const struct api_infill_limits lim = { o->infill_batch, o->max_tokens,
                                           eng_session_n_ctx(ses), o->spm_infill };
    *n = api_request_select_prompt(req, p) ? -ENOMEM
         : api_request_prompt_tokens(eng_session_tokenizer(ses), k->s->chat, req, &lim, &ids, &why);
    if (*n < 0)
        *rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_prompt",
                              "%s%s", at, why);
    else if (*n == 0)
        *rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_prompt",
                              "%sthe prompt is empty", at);
    else if (*n + 1 > eng_session_n_ctx(ses))
        *rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                              "context_length_exceeded",
                              "%sthe prompt has %d tokens; a sequence holds %d (-c)", at, *n,
                              eng_session_n_ctx(ses));
    else
        return ids;
    free(ids);
    return NULL;
}

enum MHD_Result srv_post_failed(struct srv_conn *k, int rc)
{
    struct srv *s = k->s;
    srv_conn_release_jobs(k); /* the jobs posted before are cancelled */
    return rc == -ENOMEM
        ? srv_reply_error(k, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "oom", "out of memory")
        : rc == -EAGAIN
        ? srv_reply_error(k, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "queue_full",
                          "%d requests are waiting; try again", s->o->max_queue)
        : srv_reply_error(k, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "shutting_down",
                          "the server is stopping");
}

/* The request's jobs, one per prompt and choice (job p * n + c), posted
 * together: a prompt's later choices read its first's prompt as it is
 * computed (the scheduler's prompt sharing). */
static enum MHD_Result post_jobs(struct srv_conn *k, struct api_request *req)
{
    struct srv *s = k->s;
    struct eng_session *ses = srv_loop_session(s->loop);
    struct fl_err err;
    if (req->n > eng_session_n_seq(ses)) /* as llama-server's limit on n_cmpl */
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_value",
                               "n: %d choices; the server runs %d sequences at once (-np)",
                               req->n, eng_session_n_seq(ses));
    if (api_request_check_vocab(req, eng_session_tokenizer(ses), &err))
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                               "invalid_value", "%s", err.msg);
    if (!(k->jobs = calloc((size_t)req->n_prompts * (size_t)req->n, sizeof(*k->jobs))))
        return srv_post_failed(k, -ENOMEM);
    k->n_choice = req->n;
    for (int p = 0; p < req->n_prompts; p++) {
        int n;
        enum MHD_Result rc;
        int32_t *ids = prompt_tokens(k, req, p, &n, &rc);
        if (!ids) {
            srv_conn_release_jobs(k);
            return rc;
        }
        for (int c = 0; c < req->n; c++) {
            int32_t *own = malloc(sizeof(*own) * (size_t)n);
            if (own)
                memcpy(own, ids, sizeof(*own) * (size_t)n);
            struct srv_job *j = own ? new_job(k, req, own, n, c) : NULL;
            /* the queue's limit counts requests: a list's later prompts join its first */
            const int prc = j ? srv_job_post(s->loop, j, k->n_jobs ? INT_MAX : s->o->max_queue)
                              : -ENOMEM;
            if (prc) {
                srv_job_release(s->loop, j);
                free(ids);
                return srv_post_failed(k, prc);
            }
            k->jobs[k->n_jobs++] = j;
        }
        free(ids);
    }
    new_id(k);
    k->created = (int64_t)time(NULL);
    return req->stream ? reply_stream(k, req->include_usage) : reply_whole(k);
}

bool srv_request(struct srv_conn *k, enum api_kind kind, enum srv_flavour f,
                 struct api_request *req, enum MHD_Result *rc)
{
    json_t *body = srv_body_object(k, rc);
    if (!body)
        return false;
    struct fl_err err = { "" };
    json_t *chat = NULL; /* Anthropic's request as OpenAI's */
    const int prc = f == SRV_INFILL ? api_request_parse_infill(body, req, &err)
                    : f == SRV_NATIVE ? api_request_parse_native(body, req, &err)
                    : f == SRV_ANTHROPIC
                        ? api_anthropic_to_chat(body, &chat, &err) ||
                              api_request_parse(chat, API_CHAT, req, &err)
                    : f == SRV_RESPONSES
                        ? api_responses_to_chat(body, &chat, &err) ||
                              api_request_parse(chat, API_CHAT, req, &err)
                    : api_request_parse(body, kind, req, &err);
    json_decref(chat);
    json_decref(body);
    if (!prc) {
        api_request_reasoning_defaults(req, &k->s->o->reasoning);
        api_request_constraint_defaults(req, &k->s->o->constraint);
    }
    if (prc)
        *rc = srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_request",
                              "%s", err.msg);
    return !prc;
}

enum MHD_Result srv_completion(struct srv_conn *k, enum api_kind kind, enum srv_flavour f)
{
    enum MHD_Result rc;
    struct api_request req;
    /* llama-server's answer to /infill on a model without FIM tokens */
    if (f == SRV_INFILL && !api_infill_supported(eng_session_tokenizer(srv_loop_session(k->s->loop))))
        return srv_reply_error(k, 501, "not_supported_error", "not_supported",
                               "Infill is not supported by this model: it has no fill-in-the-middle "
                               "prefix, suffix and middle tokens");
    if (!srv_request(k, kind, f, &req, &rc))
        return rc;
    k->kind = kind;
    k->native = f == SRV_NATIVE || f == SRV_INFILL;
    k->responses = f == SRV_RESPONSES;
    k->fields = json_incref((json_t *)req.response_fields); /* outlives the request's JSON */
    k->n_predict = req.max_tokens;
    k->return_tokens = req.return_tokens;
    api_answer_reader_init(&req, k->s->chat, &k->answer);
    rc = post_jobs(k, &req);
    api_request_free(&req);
    return rc;
}

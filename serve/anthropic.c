/* anthropic.c: Anthropic's Messages API in `faultline serve` (http.h):
 * /v1/messages' message, whole and as Anthropic's stream of events, and
 * /v1/messages/count_tokens. The request itself is an OpenAI chat request
 * by then (api/anthropic.h), so prompts, tools, reasoning and sampling are
 * the chat endpoint's. */
#include <stdlib.h>
#include <string.h>

#include "api/anthropic.h"
#include "serve/http.h"
#include "text/reasoning.h"
#include "text/unicode.h"

/* The stop string that ended job j, or NULL. */
static const char *stop_string(const struct srv_job *j)
{
    const int i = j->result.stop_index;
    return j->result.finish == ENG_FINISH_STOP && i >= 0 && i < j->req.n_stop && j->stop_copy
               ? j->stop_copy[i] : NULL;
}

json_t *srv_anthropic_result(struct srv_conn *k, struct srv_job *j)
{
    srv_loop_lock(k->s->loop);
    const struct eng_req_result r = j->result;
    char *text = j->len ? strndup(j->text, j->len) : strdup("");
    const char *stop = stop_string(j);
    srv_loop_unlock(k->s->loop);
    json_t *doc = NULL;
    struct api_answer ans = { 0 };
    if (r.finish != ENG_FINISH_ERROR && text &&
        !api_answer_read(&k->answer, text, strlen(text), r.finish != ENG_FINISH_LENGTH, &ans)) {
        const bool calls = ans.has_tools && ans.tools.n_calls;
        const struct api_anthropic_message m = {
            .id = k->id, .model = k->s->model_name, .reasoning = ans.reasoning,
            .reasoning_len = ans.reasoning_len, .text = ans.content, .len = ans.content_len,
            .tools = calls ? &ans.tools : NULL,
            .stop_reason = api_anthropic_stop_reason(eng_finish_name(r.finish), stop, calls),
            .stop_sequence = calls ? NULL : stop, .input_tokens = r.n_prompt,
            .cached_tokens = r.n_cached, .output_tokens = r.n_tokens,
        };
        doc = api_anthropic_message_json(&m);
    }
    api_answer_free(&ans);
    free(text);
    return doc;
}

/* --- the stream ------------------------------------------------------------------- */

static void block_stop(struct srv_stream *k, struct srv_choice *o)
{
    if (!o->open)
        return;
    srv_sse_named(k, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop",
                                                     "index", o->blocks - 1));
    o->open = 0;
}

/* Opens a block (closing the one before) with its start event (takes block). */
static void block_start(struct srv_stream *k, struct srv_choice *o, char kind, json_t *block)
{
    block_stop(k, o);
    srv_sse_named(k, "content_block_start", json_pack("{s:s, s:i, s:o}", "type",
                                                      "content_block_start", "index", o->blocks,
                                                      "content_block", block));
    o->blocks++;
    o->open = kind;
}

/* text[0..n) onto the open block of this kind (opened when another is). */
static void block_text(struct srv_stream *k, struct srv_choice *o, char kind, const char *text,
                       size_t n)
{
    const char *field = kind == 't' ? "thinking" : "text";
    if (o->open != kind)
        block_start(k, o, kind, json_pack("{s:s, s:s}", "type", field, field, ""));
    srv_sse_named(k, "content_block_delta",
                  json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index",
                            o->blocks - 1, "delta", "type",
                            kind == 't' ? "thinking_delta" : "text_delta", field,
                            fl_json_stringn(text, n)));
}

/* A call's growth: its tool_use block opened (the block before closed),
 * then its input as input_json_delta pieces as they come. */
static void call_piece(struct srv_stream *k, struct srv_choice *o, int i, const char *name,
                       const char *args, size_t n)
{
    if (name) {
        const struct fl_tool_call c = { .name = (char *)name };
        block_start(k, o, 'u', api_anthropic_tool_use_json(k->id, i, &c, true));
    }
    if (n)
        srv_sse_named(k, "content_block_delta",
                      json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta",
                                "index", o->blocks - 1, "delta", "type", "input_json_delta",
                                "partial_json", fl_json_stringn(args, n)));
}

/* The calls when the answer ends: the rest of those streamed as they grew,
 * the others whole. */
static void tool_blocks(struct srv_stream *k, struct srv_choice *o, const struct fl_tool_answer *a)
{
    for (int i = 0; i < a->n_calls; i++)
        srv_call_grow(k, o, i, a->calls[i].name, a->calls[i].arguments,
                      strlen(a->calls[i].arguments), call_piece);
    block_stop(k, o);
}

static void message_start(struct srv_stream *k, const struct srv_job *j)
{
    srv_sse_named(k, "message_start",
                  json_pack("{s:s, s:{s:s, s:s, s:s, s:[], s:s, s:n, s:n, s:{s:i, s:i}}}",
                            "type", "message_start", "message", "id", k->id, "type", "message",
                            "role", "assistant", "content", "model", k->s->model_name,
                            "stop_reason", "stop_sequence", "usage", "input_tokens",
                            j->req.n_prompt, "output_tokens", 0));
}

static void message_end(struct srv_stream *k, const struct srv_job *j, bool calls)
{
    const char *stop = calls ? NULL : stop_string(j);
    const char *reason = api_anthropic_stop_reason(eng_finish_name(j->result.finish), stop, calls);
    srv_sse_named(k, "message_delta",
                  json_pack("{s:s, s:{s:s, s:o}, s:{s:i, s:i, s:i}}", "type", "message_delta",
                            "delta", "stop_reason", reason, "stop_sequence", fl_json_string(stop),
                            "usage", "input_tokens", j->result.n_prompt - j->result.n_cached,
                            "cache_read_input_tokens", j->result.n_cached, "output_tokens",
                            j->result.n_tokens));
    srv_sse_named(k, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

void srv_anthropic_news(struct srv_stream *k, int c)
{
    struct srv_choice *o = &k->ch[c];
    struct srv_job *j = o->job;
    if (!o->sent_role) {
        message_start(k, j);
        o->sent_role = true;
    }
    struct fl_reasoning_split sp;
    api_answer_progress(&k->answer, j->text, j->len, j->done, &sp);
    const char *r = j->text + sp.r_off;
    const size_t r_avail = j->done ? sp.r_len : fl_utf8_whole(r, sp.r_len);
    if (r_avail > o->r_sent)
        block_text(k, o, 't', r + o->r_sent, r_avail - o->r_sent);
    o->r_sent = r_avail > o->r_sent ? r_avail : o->r_sent;
    const char *text = j->text + sp.c_off;
    struct fl_tool_answer ans = { 0 };
    const size_t avail = srv_content_settled(&k->answer.tools, j, &sp, &ans);
    o->seen = j->len;
    if (avail > o->sent)
        block_text(k, o, 'x', text + o->sent, avail - o->sent);
    o->sent = avail > o->sent ? avail : o->sent;
    if (!j->done) {
        if (k->answer.tools.mode != API_TOOLS_OFF) /* the calls as they grow */
            srv_calls_partial(k, o, text, sp.c_len, call_piece);
        return;
    }
    const char *rest;
    const size_t n_rest = ans.n_calls ? srv_calls_rest(text, o->sent, &ans, &rest) : 0;
    const bool grew = o->calls_sent > 0; /* calls streamed as they grew: their blocks are out, */
    if (!grew) {                         /* the last one open for the rest of its input */
        if (n_rest) /* content between or after the calls, before them */
            block_text(k, o, 'x', rest, n_rest);
        block_stop(k, o);
    }
    tool_blocks(k, o, &ans);
    if (n_rest && grew) /* ... or after them */
        block_text(k, o, 'x', rest, n_rest);
    block_stop(k, o);
    if (j->result.finish == ENG_FINISH_ERROR)
        srv_sse_named(k, "error", json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error",
                                            "type", "api_error", "message",
                                            j->error[0] ? j->error : "the request failed"));
    else
        message_end(k, j, ans.n_calls > 0);
    o->ended = true;
    fl_tool_answer_free(&ans);
}

enum MHD_Result srv_count_tokens(struct srv_conn *k)
{
    enum MHD_Result rc;
    struct api_request req;
    if (!srv_request(k, API_CHAT, SRV_ANTHROPIC, &req, &rc))
        return rc;
    int32_t *ids = NULL;
    const char *why = "";
    const int n = api_request_tokens(eng_session_tokenizer(srv_loop_session(k->s->loop)),
                                     k->s->chat, &req, &ids, &why);
    free(ids);
    api_request_free(&req);
    if (n < 0)
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_request",
                               "%s", why);
    return srv_reply_json(k, MHD_HTTP_OK, json_pack("{s:i}", "input_tokens", n));
}

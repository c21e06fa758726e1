/* responses.c: OpenAI's Responses API in `faultline serve` (http.h):
 * /v1/responses' response object, whole and as its stream of events
 * (response.created ... response.completed). The request is an OpenAI chat
 * request by then (api/responses.h). */
#include <stdlib.h>
#include <string.h>

#include "api/responses.h"
#include "serve/http.h"
#include "text/reasoning.h"
#include "text/unicode.h"

/* The response of done job j with its answer read from text[0..len). */
static json_t *response_json(struct srv *s, const char *id, int64_t created,
                             const struct api_answer_reader *rd, const struct srv_job *j,
                             const char *text, size_t len)
{
    struct api_answer ans = { 0 };
    json_t *o = NULL;
    const struct eng_req_result *r = &j->result;
    if (!api_answer_read(rd, text, len, r->finish != ENG_FINISH_LENGTH, &ans)) {
        const struct api_response res = {
            .id = id, .model = s->model_name, .created = created,
            .incomplete = r->finish == ENG_FINISH_LENGTH, .input_tokens = r->n_prompt,
            .cached_tokens = r->n_cached, .output_tokens = r->n_tokens,
        };
        o = api_response_answer_json(&res, &ans);
    }
    api_answer_free(&ans);
    return o;
}

json_t *srv_responses_result(struct srv_conn *k, struct srv_job *j)
{
    srv_loop_lock(k->s->loop);
    char *text = j->len ? strndup(j->text, j->len) : strdup("");
    const bool failed = j->result.finish == ENG_FINISH_ERROR;
    srv_loop_unlock(k->s->loop);
    json_t *o = text && !failed ? response_json(k->s, k->id, k->created, &k->answer, j, text,
                                                strlen(text)) : NULL;
    free(text);
    return o;
}

/* --- the stream ------------------------------------------------------------------- */

/* One event: its type and sequence number added to v (taken). */
static void event(struct srv_stream *k, const char *type, json_t *v)
{
    if (v) {
        fl_json_set(v, "type", json_string(type));
        fl_json_set(v, "sequence_number", json_integer(k->seq++));
    }
    srv_sse_named(k, type, v);
}

static struct api_response ids(const struct srv_stream *k)
{
    return (struct api_response){ .id = k->id, .model = k->s->model_name, .created = k->created };
}

static json_t *shell(const struct srv_stream *k, const char *status)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:[]}", "id", k->id, "object", "response",
                     "created_at", (json_int_t)k->created, "status", status, "model",
                     k->s->model_name, "output");
}

/* Closes the open item: its text's done events with text[0..n) (cut: the
 * answer ran out of tokens in it). */
static void item_done(struct srv_stream *k, struct srv_choice *o, const char *text, size_t n,
                      bool cut)
{
    if (!o->open)
        return;
    struct api_response r = ids(k);
    r.incomplete = cut;
    char id[96];
    const int at = o->blocks - 1;
    api_response_item_id(&r, o->open == 'r' ? 'r' : 'm', 0, id, sizeof(id));
    event(k, o->open == 'r' ? "response.reasoning_text.done" : "response.output_text.done",
          json_pack("{s:s, s:i, s:i, s:o}", "item_id", id, "output_index", at, "content_index", 0,
                    "text", fl_json_stringn(text, n)));
    json_t *item;
    if (o->open == 'r') {
        r.reasoning = text, r.reasoning_len = n;
        item = api_response_reasoning_item(&r, true);
    } else {
        r.text = text, r.len = n;
        item = api_response_message_item(&r, true);
        event(k, "response.content_part.done",
              json_pack("{s:s, s:i, s:i, s:O}", "item_id", id, "output_index", at,
                        "content_index", 0, "part", json_array_get(json_object_get(item, "content"), 0)));
    }
    event(k, "response.output_item.done", json_pack("{s:i, s:o}", "output_index", at, "item", item));
    o->open = 0;
}

/* Opens an item of this kind ('r'easoning, 'm'essage) after closing the
 * other (prev: its text so far, for its done events). */
static void item_open(struct srv_stream *k, struct srv_choice *o, char kind, const char *prev,
                      size_t n_prev)
{
    item_done(k, o, prev, n_prev, false);
    const struct api_response r = ids(k);
    char id[96];
    api_response_item_id(&r, kind, 0, id, sizeof(id));
    event(k, "response.output_item.added",
          json_pack("{s:i, s:o}", "output_index", o->blocks,
                    "item", kind == 'r' ? api_response_reasoning_item(&r, false)
                                        : api_response_message_item(&r, false)));
    if (kind == 'm')
        event(k, "response.content_part.added",
              json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[]}}", "item_id", id, "output_index",
                        o->blocks, "content_index", 0, "part", "type", "output_text", "text", "",
                        "annotations"));
    o->blocks++;
    o->open = kind;
}

static void delta(struct srv_stream *k, struct srv_choice *o, const char *s, size_t n)
{
    const struct api_response r = ids(k);
    char id[96];
    api_response_item_id(&r, o->open, 0, id, sizeof(id));
    event(k, o->open == 'r' ? "response.reasoning_text.delta" : "response.output_text.delta",
          json_pack("{s:s, s:i, s:i, s:o}", "item_id", id, "output_index", o->blocks - 1,
                    "content_index", 0, "delta", fl_json_stringn(s, n)));
}

/* The calls: each a function_call item whose arguments come in one delta. */
static void call_items(struct srv_stream *k, struct srv_choice *o, const struct fl_tool_answer *a)
{
    struct api_response r = ids(k);
    r.tools = a;
    for (int i = 0; i < a->n_calls; i++, o->blocks++) {
        char id[96];
        api_response_item_id(&r, 'f', i, id, sizeof(id));
        event(k, "response.output_item.added", json_pack("{s:i, s:o}", "output_index", o->blocks,
                                                         "item", api_response_call_item(&r, i, false)));
        event(k, "response.function_call_arguments.delta",
              json_pack("{s:s, s:i, s:s}", "item_id", id, "output_index", o->blocks, "delta",
                        a->calls[i].arguments));
        event(k, "response.function_call_arguments.done",
              json_pack("{s:s, s:i, s:s}", "item_id", id, "output_index", o->blocks, "arguments",
                        a->calls[i].arguments));
        event(k, "response.output_item.done", json_pack("{s:i, s:o}", "output_index", o->blocks,
                                                        "item", api_response_call_item(&r, i, true)));
    }
}

/* The end: the content after the calls, the open item closed, the calls,
 * and response.completed / incomplete with the whole response (or
 * response.failed). */
static void finish(struct srv_stream *k, struct srv_choice *o, const char *r, const char *text,
                   const struct fl_tool_answer *ans)
{
    const struct srv_job *j = o->job;
    const char *rest;
    const size_t n_rest = ans->n_calls ? srv_calls_rest(text, o->sent, ans, &rest) : 0;
    char *all = n_rest ? malloc(o->sent + n_rest) : NULL; /* the message's whole text */
    if (all) {
        memcpy(all, text, o->sent);
        memcpy(all + o->sent, rest, n_rest);
        if (o->open != 'm')
            item_open(k, o, 'm', r, o->r_sent);
        delta(k, o, rest, n_rest);
    }
    item_done(k, o, all ? all : o->open == 'r' ? r : text,
              all ? o->sent + n_rest : o->open == 'r' ? o->r_sent : o->sent,
              j->result.finish == ENG_FINISH_LENGTH);
    free(all);
    call_items(k, o, ans);
    if (j->result.finish == ENG_FINISH_ERROR) {
        json_t *failed = shell(k, "failed");
        if (failed)
            fl_json_set(failed, "error", json_pack("{s:s, s:s}", "code", "server_error", "message",
                                                   j->error[0] ? j->error : "the request failed"));
        event(k, "response.failed", json_pack("{s:o}", "response", failed));
        return;
    }
    json_t *whole = response_json(k->s, k->id, k->created, &k->answer, j, j->text, j->len);
    event(k, j->result.finish == ENG_FINISH_LENGTH ? "response.incomplete" : "response.completed",
          json_pack("{s:o}", "response", whole));
}

void srv_responses_news(struct srv_stream *k, int c)
{
    struct srv_choice *o = &k->ch[c];
    struct srv_job *j = o->job;
    if (!o->sent_role) {
        event(k, "response.created", json_pack("{s:o}", "response", shell(k, "in_progress")));
        event(k, "response.in_progress", json_pack("{s:o}", "response", shell(k, "in_progress")));
        o->sent_role = true;
    }
    struct fl_reasoning_split sp;
    api_answer_progress(&k->answer, j->text, j->len, j->done, &sp);
    const char *r = j->text + sp.r_off, *text = j->text + sp.c_off;
    const size_t r_avail = j->done ? sp.r_len : fl_utf8_whole(r, sp.r_len);
    if (r_avail > o->r_sent) {
        if (o->open != 'r')
            item_open(k, o, 'r', text, o->sent);
        delta(k, o, r + o->r_sent, r_avail - o->r_sent);
        o->r_sent = r_avail;
    }
    struct fl_tool_answer ans = { 0 };
    const size_t avail = srv_content_settled(&k->answer.tools, j, &sp, &ans);
    o->seen = j->len;
    if (avail > o->sent) {
        if (o->open != 'm')
            item_open(k, o, 'm', r, o->r_sent);
        delta(k, o, text + o->sent, avail - o->sent);
        o->sent = avail;
    }
    if (j->done) {
        finish(k, o, r, text, &ans);
        o->ended = true;
    }
    fl_tool_answer_free(&ans);
}

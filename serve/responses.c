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
                             const char *text, size_t len, bool text_last)
{
    struct api_answer ans = { 0 };
    json_t *o = NULL;
    const struct eng_req_result *r = &j->result;
    if (!api_answer_read(rd, text, len, r->finish != ENG_FINISH_LENGTH, &ans)) {
        const struct api_response res = {
            .id = id, .model = s->model_name, .created = created,
            .incomplete = r->finish == ENG_FINISH_LENGTH, .input_tokens = r->n_prompt,
            .cached_tokens = r->n_cached, .output_tokens = r->n_tokens, .text_last = text_last,
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
                                                strlen(text), false) : NULL;
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

/* Closes the open text item: its text's done events with text[0..n) (cut:
 * the answer ran out of tokens in it). */
static void item_done(struct srv_stream *k, struct srv_choice *o, const char *text, size_t n,
                      bool cut)
{
    if (!o->open)
        return;
    struct api_response r = ids(k);
    r.incomplete = cut;
    char id[96];
    const int at = o->open_at;
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

/* Opens a text item of this kind ('r'easoning, 'm'essage) after closing the
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
    o->open_at = o->blocks++;
    o->open = kind;
}

static void delta(struct srv_stream *k, struct srv_choice *o, const char *s, size_t n)
{
    const struct api_response r = ids(k);
    char id[96];
    api_response_item_id(&r, o->open, 0, id, sizeof(id));
    event(k, o->open == 'r' ? "response.reasoning_text.delta" : "response.output_text.delta",
          json_pack("{s:s, s:i, s:i, s:o}", "item_id", id, "output_index", o->open_at,
                    "content_index", 0, "delta", fl_json_stringn(s, n)));
}

/* --- the calls, as they grow --------------------------------------------------------
 * Each call is a function_call item, added when its name is out, its
 * arguments function_call_arguments.delta events as they come. The calls
 * are the last items added until the answer ends (text cannot follow a call
 * before then), so call i is item calls_at(o) + i; all are closed at the
 * end. Reasoning ends where the first call begins; a message before the
 * calls stays open for content after them. */
static int calls_at(const struct srv_choice *o)
{
    return o->blocks - o->calls_sent;
}

static void call_piece(struct srv_stream *k, struct srv_choice *o, int i, const char *name,
                       const char *args, size_t n)
{
    const struct api_response r = ids(k);
    const int at = name ? o->blocks : calls_at(o) + i;
    if (name) {
        if (o->open == 'r') { /* the reasoning so far is all of it */
            const struct srv_job *j = o->job;
            struct fl_reasoning_split sp;
            api_answer_progress(&k->answer, j->text, j->len, j->done, &sp);
            item_done(k, o, j->text + sp.r_off, o->r_sent, false);
        }
        event(k, "response.output_item.added",
              json_pack("{s:i, s:o}", "output_index", at,
                        "item", api_response_call_item(&r, i, name, "", false)));
        o->blocks++;
    }
    if (!n)
        return;
    char id[96];
    api_response_item_id(&r, 'f', i, id, sizeof(id));
    event(k, "response.function_call_arguments.delta",
          json_pack("{s:s, s:i, s:o}", "item_id", id, "output_index", at, "delta",
                    fl_json_stringn(args, n)));
}

/* Every call's rest once the answer ended (calls that did not grow begin
 * here), then each closed: its arguments as read from the whole answer,
 * or a call the whole answer does not hold (it proved no call) as sent,
 * incomplete. */
static void calls_end(struct srv_stream *k, struct srv_choice *o, const struct fl_tool_answer *a)
{
    for (int i = 0; i < a->n_calls; i++)
        srv_call_grow(k, o, i, a->calls[i].name, a->calls[i].arguments,
                      strlen(a->calls[i].arguments), call_piece);
    const int at = calls_at(o);
    for (int i = 0; i < o->calls_sent; i++) {
        struct api_response r = ids(k);
        const bool read = i < a->n_calls;
        const char *args = read ? a->calls[i].arguments : o->calls_out[i].args;
        char id[96];
        api_response_item_id(&r, 'f', i, id, sizeof(id));
        event(k, "response.function_call_arguments.done",
              json_pack("{s:s, s:i, s:o}", "item_id", id, "output_index", at + i, "arguments",
                        fl_json_string(args)));
        json_t *item = api_response_call_item(&r, i, o->calls_out[i].name, args, true);
        if (!read && item)
            fl_json_set(item, "status", json_string("incomplete"));
        event(k, "response.output_item.done",
              json_pack("{s:i, s:o}", "output_index", at + i, "item", item));
    }
}

/* The end: the calls' rest and their done events; the content still to go
 * (avail: the content settled) into the message (opened after the calls
 * when none was open); the open item closed; response.completed /
 * incomplete with the whole response (or response.failed). Calls that did
 * not grow (the answer ended as they began) go after the text, as the
 * response object has them. */
static void finish(struct srv_stream *k, struct srv_choice *o, const char *r, const char *text,
                   size_t avail, const struct fl_tool_answer *ans)
{
    const struct srv_job *j = o->job;
    const bool grew = o->calls_sent > 0;
    if (grew)
        calls_end(k, o, ans);
    const char *rest = text + o->sent; /* content not sent: after the calls, or all of it when */
    size_t n_rest = avail > o->sent ? avail - o->sent : 0; /* what grew proved no call */
    if (ans->n_calls)
        n_rest = srv_calls_rest(text, o->sent, ans, &rest);
    const bool text_last = grew && n_rest && o->open != 'm';
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
    if (!grew)
        calls_end(k, o, ans);
    if (j->result.finish == ENG_FINISH_ERROR) {
        json_t *failed = shell(k, "failed");
        if (failed)
            fl_json_set(failed, "error", json_pack("{s:s, s:s}", "code", "server_error", "message",
                                                   j->error[0] ? j->error : "the request failed"));
        event(k, "response.failed", json_pack("{s:o}", "response", failed));
        return;
    }
    json_t *whole = response_json(k->s, k->id, k->created, &k->answer, j, j->text, j->len,
                                  text_last);
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
    if (r_avail > o->r_sent && !o->calls_sent) {
        if (o->open != 'r')
            item_open(k, o, 'r', text, o->sent);
        delta(k, o, r + o->r_sent, r_avail - o->r_sent);
        o->r_sent = r_avail;
    }
    struct fl_tool_answer ans = { 0 };
    const size_t avail = srv_content_settled(&k->answer.tools, j, &sp, &ans);
    o->seen = j->len;
    if (avail > o->sent && !o->calls_sent) {
        if (o->open != 'm')
            item_open(k, o, 'm', r, o->r_sent);
        delta(k, o, text + o->sent, avail - o->sent);
        o->sent = avail;
    }
    if (j->done) {
        finish(k, o, r, text, avail, &ans);
        o->ended = true;
    } else if (k->answer.tools.mode != API_TOOLS_OFF) {
        srv_calls_partial(k, o, text, sp.c_len, call_piece);
    }
    fl_tool_answer_free(&ans);
}

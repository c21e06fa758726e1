/* responses.c: OpenAI's Responses API (responses.h): its request as an
 * OpenAI chat body, and its response object and output items. */
#include "api/responses.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai.h"
#include "api/request-fields.h"

/* A message's content: a string, or input_text / output_text (and an
 * assistant's refusal) parts as text parts. */
static int content_parts(const json_t *c, const char *path, json_t **out, struct fl_err *err)
{
    if (json_is_string(c)) {
        *out = json_incref((json_t *)c);
        return 0;
    }
    if (!json_is_array(c))
        return fl_err_set(err, -EINVAL, "%s.content: expected a string or an array of parts", path);
    json_t *parts = json_array();
    size_t i;
    const json_t *p;
    json_array_foreach(c, i, p) {
        const char *type = fl_json_str(p, "type");
        const char *text = type && !strcmp(type, "refusal") ? fl_json_str(p, "refusal")
                                                             : fl_json_str(p, "text");
        const bool textual = type && (!strcmp(type, "input_text") || !strcmp(type, "output_text") ||
                                      !strcmp(type, "refusal"));
        int rc = 0;
        if (!textual && type && (!strcmp(type, "input_image") || !strcmp(type, "input_file") ||
                                 !strcmp(type, "input_audio")))
            rc = fl_err_set(err, -EINVAL, "%s.content[%zu]: %s is not supported (text models)",
                            path, i, type);
        else if (!textual || !text)
            rc = fl_err_set(err, -EINVAL, "%s.content[%zu]: expected an input_text or output_text "
                            "part with its text", path, i);
        else
            rc = api_json_push(parts, json_pack("{s:s, s:s}", "type", "text", "text", text), err);
        if (rc) {
            json_decref(parts);
            return rc;
        }
    }
    *out = parts;
    return 0;
}

/* The last message when it is an assistant's that later items may add to
 * (its calls, its text), else NULL. */
static json_t *open_assistant(json_t *msgs)
{
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    const char *role = fl_json_str(last, "role");
    return role && !strcmp(role, "assistant") ? last : NULL;
}

static json_t *new_assistant(json_t *msgs, struct fl_err *err)
{
    json_t *m = json_pack("{s:s, s:[]}", "role", "assistant", "content");
    return api_json_push(msgs, m, err) ? NULL : m;
}

static int put_message(const json_t *item, const char *path, json_t *msgs, struct fl_err *err)
{
    const char *role = fl_json_str(item, "role");
    if (!role || (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") &&
                  strcmp(role, "assistant")))
        return api_field_bad(err, path, "a message's role is user, system, developer or assistant");
    json_t *content = NULL;
    int rc = content_parts(json_object_get(item, "content"), path, &content, err);
    if (rc)
        return rc;
    json_t *prev = !strcmp(role, "assistant") ? open_assistant(msgs) : NULL;
    if (prev && json_is_array(json_object_get(prev, "content")) && json_is_array(content)) {
        rc = json_array_extend(json_object_get(prev, "content"), content) ? api_field_nomem(err)
                                                                          : 0;
        json_decref(content);
        return rc;
    }
    return api_json_push(msgs, json_pack("{s:s, s:o}", "role",
                                         !strcmp(role, "developer") ? "system" : role, "content",
                                         content), err);
}

static int put_call(const json_t *item, const char *path, json_t *msgs, struct fl_err *err)
{
    const char *id = fl_json_str(item, "call_id"), *name = fl_json_str(item, "name"),
               *args = fl_json_str(item, "arguments");
    if (!id || !name || !args)
        return api_field_bad(err, path, "a function_call has a string call_id, name and arguments");
    json_t *m = open_assistant(msgs);
    if (!m && !(m = new_assistant(msgs, err)))
        return -ENOMEM;
    json_t *calls = json_object_get(m, "tool_calls");
    if (!calls && fl_json_set(m, "tool_calls", calls = json_array()))
        return api_field_nomem(err);
    return api_json_push(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type", "function",
                                 "function", "name", name, "arguments", args), err);
}

static int put_call_output(const json_t *item, const char *path, json_t *msgs,
                           struct fl_err *err)
{
    const char *id = fl_json_str(item, "call_id");
    const json_t *out = json_object_get(item, "output");
    if (!id || !(json_is_string(out) || json_is_array(out)))
        return api_field_bad(err, path, "a function_call_output has a string call_id and an "
                             "output");
    json_t *content = NULL;
    char opath[96];
    snprintf(opath, sizeof(opath), "%s.output", path);
    int rc = json_is_string(out) ? ((content = json_incref((json_t *)out)), 0)
                                 : content_parts(out, opath, &content, err);
    return rc ? rc : api_json_push(msgs, json_pack("{s:s, s:s, s:o}", "role", "tool",
                                                   "tool_call_id", id, "content", content), err);
}

/* A reasoning item: its content's texts are what the model reasoned (its
 * summary is not: left out), for the next assistant turn. */
static int put_reasoning(const json_t *item, const char *path, json_t *msgs, struct fl_err *err)
{
    const json_t *c = json_object_get(item, "content");
    if (c && !json_is_array(c))
        return api_field_bad(err, path, "a reasoning item's content is an array of "
                             "reasoning_text parts");
    size_t i, n = 0;
    const json_t *p;
    json_array_foreach(c, i, p) {
        if (!fl_json_str(p, "text"))
            return fl_err_set(err, -EINVAL, "%s.content[%zu]: expected a part with its text",
                              path, i);
        n += strlen(fl_json_str(p, "text"));
    }
    if (!n)
        return 0;
    char *all = malloc(n + 1);
    if (!all)
        return api_field_nomem(err);
    all[0] = 0;
    json_array_foreach(c, i, p)
        strcat(all, fl_json_str(p, "text"));
    json_t *m = open_assistant(msgs);
    if (!m)
        m = new_assistant(msgs, err);
    const int rc = !m || fl_json_set(m, "reasoning_content", json_string(all))
                       ? api_field_nomem(err) : 0;
    free(all);
    return rc;
}

static int put_item(const json_t *item, size_t i, json_t *msgs, struct fl_err *err)
{
    char path[32];
    snprintf(path, sizeof(path), "input[%zu]", i);
    const char *type = fl_json_str(item, "type");
    if (!json_is_object(item))
        return api_field_bad(err, path, "expected an object");
    if ((!type || !strcmp(type, "message")) && json_object_get(item, "role"))
        return put_message(item, path, msgs, err);
    if (type && !strcmp(type, "function_call"))
        return put_call(item, path, msgs, err);
    if (type && !strcmp(type, "function_call_output"))
        return put_call_output(item, path, msgs, err);
    if (type && !strcmp(type, "reasoning"))
        return put_reasoning(item, path, msgs, err);
    if (type && !strcmp(type, "item_reference"))
        return api_field_bad(err, path, "responses are not stored here: send the items themselves");
    return api_field_bad(err, path, "expected a message, function_call, function_call_output or "
                         "reasoning item");
}

static int put_input(const json_t *body, json_t *msgs, struct fl_err *err)
{
    const json_t *ins = json_object_get(body, "instructions");
    if (ins && !json_is_null(ins) && !json_is_string(ins))
        return api_field_bad(err, "instructions", "expected a string");
    if (json_is_string(ins) &&
        api_json_push(msgs, json_pack("{s:s, s:O}", "role", "system", "content", ins), err))
        return -ENOMEM;
    const json_t *in = json_object_get(body, "input");
    if (json_is_string(in))
        return api_json_push(msgs, json_pack("{s:s, s:O}", "role", "user", "content", in), err);
    if (!json_is_array(in) || !json_array_size(in))
        return api_field_bad(err, "input", "expected a string or a non-empty array of items");
    size_t i;
    const json_t *item;
    json_array_foreach(in, i, item) {
        const int rc = put_item(item, i, msgs, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Function tools as chat tools; the other kinds (web_search, file_search,
 * mcp, ...: run by OpenAI's servers) are left out, as llama-server does:
 * nothing here could run them. */
static int put_tools(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *tools = json_object_get(body, "tools");
    if (!tools || json_is_null(tools))
        return 0;
    if (!json_is_array(tools))
        return api_field_bad(err, "tools", "expected an array");
    json_t *list = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const char *type = fl_json_str(t, "type"), *name = fl_json_str(t, "name");
        if (!type || strcmp(type, "function"))
            continue;
        if (!name) {
            json_decref(list);
            return fl_err_set(err, -EINVAL, "tools[%zu]: a function tool has a name", i);
        }
        json_t *f = json_pack("{s:s}", "name", name);
        const json_t *d = json_object_get(t, "description"), *p = json_object_get(t, "parameters");
        if (f && json_is_string(d))
            fl_json_set(f, "description", json_incref((json_t *)d));
        if (f && p && !json_is_null(p))
            fl_json_set(f, "parameters", json_incref((json_t *)p));
        if (api_json_push(list, json_pack("{s:s, s:o}", "type", "function", "function", f), err)) {
            json_decref(list);
            return -ENOMEM;
        }
    }
    if (!json_array_size(list)) {
        json_decref(list);
        return 0;
    }
    return fl_json_set(oai, "tools", list) ? api_field_nomem(err) : 0;
}

static int put_tool_choice(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *tc = json_object_get(body, "tool_choice");
    if (!tc || json_is_null(tc))
        return 0;
    if (json_is_string(tc))
        return fl_json_set(oai, "tool_choice", json_incref((json_t *)tc)) ? api_field_nomem(err)
                                                                           : 0;
    const char *type = fl_json_str(tc, "type"), *name = fl_json_str(tc, "name");
    if (!type || strcmp(type, "function") || !name)
        return api_field_bad(err, "tool_choice", "expected auto, none, required or {\"type\": "
                             "\"function\", \"name\"}");
    return fl_json_set(oai, "tool_choice", json_pack("{s:s, s:{s:s}}", "type", "function",
                                                     "function", "name", name))
               ? api_field_nomem(err) : 0;
}

/* "text": {"format": {"type": "text" | "json_object" | "json_schema", ...}} */
static int put_format(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *f = json_object_get(json_object_get(body, "text"), "format");
    const char *type = fl_json_str(f, "type");
    if (!f || json_is_null(f) || (type && !strcmp(type, "text")))
        return 0;
    json_t *rf = NULL;
    if (type && !strcmp(type, "json_object"))
        rf = json_pack("{s:s}", "type", "json_object");
    else if (type && !strcmp(type, "json_schema") && json_is_object(json_object_get(f, "schema")))
        rf = json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema", "name",
                       fl_json_str(f, "name") ? fl_json_str(f, "name") : "schema", "schema",
                       json_object_get(f, "schema"));
    else
        return api_field_bad(err, "text.format", "expected type text, json_object, or json_schema "
                             "with a schema");
    return fl_json_set(oai, "response_format", rf) ? api_field_nomem(err) : 0;
}

static int put_common(const json_t *body, json_t *oai, struct fl_err *err)
{
    const json_t *max = json_object_get(body, "max_output_tokens"); /* an error names it */
    if (max && !json_is_null(max) && (!json_is_integer(max) || json_integer_value(max) < 0))
        return api_field_bad(err, "max_output_tokens", "expected a non-negative integer");
    static const char *const same[][2] = {
        { "model", "model" }, { "max_output_tokens", "max_tokens" },
        { "temperature", "temperature" }, { "top_p", "top_p" }, { "stream", "stream" },
        { "parallel_tool_calls", "parallel_tool_calls" }, { "seed", "seed" },
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        json_t *v = json_object_get(body, same[i][0]);
        if (v && !json_is_null(v) && fl_json_set(oai, same[i][1], json_incref(v)))
            return api_field_nomem(err);
    }
    const json_t *effort = json_object_get(json_object_get(body, "reasoning"), "effort");
    if (json_is_string(effort) &&
        fl_json_set(oai, "reasoning_effort", json_incref((json_t *)effort)))
        return api_field_nomem(err);
    return 0;
}

int api_responses_to_chat(const json_t *body, json_t **out, struct fl_err *err)
{
    *out = NULL;
    if (!json_is_object(body))
        return api_field_bad(err, "body", "expected an object");
    const json_t *prev = json_object_get(body, "previous_response_id");
    if (prev && !json_is_null(prev) && !(json_is_string(prev) && !json_string_length(prev)))
        return api_field_bad(err, "previous_response_id", "responses are not stored here: send "
                             "the whole conversation in input");
    if (json_is_true(json_object_get(body, "background")))
        return api_field_bad(err, "background", "responses run while the request waits (no "
                             "background mode)");
    json_t *oai = json_object(), *msgs = json_array();
    int rc = oai && msgs ? put_input(body, msgs, err) : api_field_nomem(err);
    if (!rc && fl_json_set(oai, "messages", json_incref(msgs)))
        rc = api_field_nomem(err);
    if (!rc)
        rc = put_tools(body, oai, err);
    if (!rc)
        rc = put_tool_choice(body, oai, err);
    if (!rc)
        rc = put_format(body, oai, err);
    if (!rc)
        rc = put_common(body, oai, err);
    json_decref(msgs);
    if (rc)
        json_decref(oai);
    else
        *out = oai;
    return rc;
}

/* --- the response ----------------------------------------------------------------- */

void api_response_item_id(const struct api_response *r, char kind, int i, char *buf, size_t n)
{
    const char *id = strncmp(r->id, "resp_", 5) ? r->id : r->id + 5;
    if (kind == 'r')
        snprintf(buf, n, "rs_%s", id);
    else if (kind == 'm')
        snprintf(buf, n, "msg_%s", id);
    else
        snprintf(buf, n, "%s_%s_%d", kind == 'c' ? "call" : "fc", id, i);
}

json_t *api_response_reasoning_item(const struct api_response *r, bool done)
{
    char id[96];
    api_response_item_id(r, 'r', 0, id, sizeof(id));
    json_t *content = json_array();
    if (done && content)
        json_array_append_new(content, json_pack("{s:s, s:o}", "type", "reasoning_text", "text",
                                                 fl_json_stringn(r->reasoning ? r->reasoning : "",
                                                                 r->reasoning_len)));
    return json_pack("{s:s, s:s, s:[], s:o, s:s}", "id", id, "type", "reasoning", "summary",
                     "content", content, "status", done ? "completed" : "in_progress");
}

json_t *api_response_message_item(const struct api_response *r, bool done)
{
    char id[96];
    api_response_item_id(r, 'm', 0, id, sizeof(id));
    json_t *content = json_array();
    if (done && content)
        json_array_append_new(content, json_pack("{s:s, s:o, s:[], s:[]}", "type", "output_text",
                                                 "text", fl_json_stringn(r->text ? r->text : "",
                                                                         r->len),
                                                 "annotations", "logprobs"));
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", id, "type", "message", "role", "assistant",
                     "status", !done ? "in_progress" : r->incomplete ? "incomplete" : "completed",
                     "content", content);
}

json_t *api_response_call_item(const struct api_response *r, int i, const char *name,
                               const char *args, bool done)
{
    char id[96], call[96];
    api_response_item_id(r, 'f', i, id, sizeof(id));
    api_response_item_id(r, 'c', i, call, sizeof(call));
    /* a model's bytes need not be UTF-8: fl_json_string makes them a string */
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "id", id, "type", "function_call", "status",
                     done ? "completed" : "in_progress", "call_id", call, "name",
                     fl_json_string(name), "arguments", fl_json_string(done ? args : ""));
}

json_t *api_response_json(const struct api_response *r)
{
    json_t *out = json_array();
    if (out && r->reasoning && r->reasoning_len)
        json_array_append_new(out, api_response_reasoning_item(r, true));
    if (out && r->text && r->len && !r->text_last)
        json_array_append_new(out, api_response_message_item(r, true));
    for (int i = 0; out && r->tools && i < r->tools->n_calls; i++)
        json_array_append_new(out, api_response_call_item(r, i, r->tools->calls[i].name,
                                                          r->tools->calls[i].arguments, true));
    if (out && r->text && r->len && r->text_last)
        json_array_append_new(out, api_response_message_item(r, true));
    if (!out)
        return NULL;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:o, s:n, s:s, s:o, s:{s:i, s:{s:i}, s:i, s:{s:i}, "
                          "s:i}}", "id", r->id, "object", "response", "created_at",
                          (json_int_t)r->created, "status",
                          r->incomplete ? "incomplete" : "completed", "incomplete_details",
                          r->incomplete ? json_pack("{s:s}", "reason", "max_output_tokens")
                                        : json_null(),
                          "error", "model", r->model, "output", out, "usage", "input_tokens",
                          r->input_tokens, "input_tokens_details", "cached_tokens",
                          r->cached_tokens, "output_tokens", r->output_tokens,
                          "output_tokens_details", "reasoning_tokens", 0, "total_tokens",
                          r->input_tokens + r->output_tokens);
    return o;
}

json_t *api_response_answer_json(const struct api_response *r, const struct api_answer *a)
{
    struct api_response with = *r;
    with.reasoning = a->reasoning, with.reasoning_len = a->reasoning_len;
    with.text = a->content, with.len = a->content_len;
    with.tools = a->has_tools && a->tools.n_calls ? &a->tools : NULL;
    return api_response_json(&with);
}

/* responses.h: OpenAI's Responses API (POST /v1/responses, as llama-server
 * serves it: Codex and the openai packages' client.responses) — a request
 * read into an OpenAI chat body (openai.h then reads it as every chat
 * request), and the response object written back.
 *
 * The request: "input" (a string, or items: messages of roles user,
 * system, developer and assistant with a string or input_text/output_text
 * parts; function_call and function_call_output items; reasoning items),
 * "instructions" (a system message first), "tools" (function tools),
 * "tool_choice", "parallel_tool_calls", "max_output_tokens", "temperature",
 * "top_p", "stream", "text.format" (json_object, or json_schema with its
 * schema), "reasoning.effort". Stateless: "previous_response_id" is refused,
 * as are images, files and tools other than functions. */
#ifndef FL_API_RESPONSES_H
#define FL_API_RESPONSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "text/tool-calls.h"

/* An OpenAI chat body (*out, new) for a Responses request body. 0, or
 * -EINVAL naming the field ("input[2].content[0]: ..."), -ENOMEM. */
int api_responses_to_chat(const json_t *body, json_t **out, struct fl_err *err);

/* The output items and ids of a finished (or growing) response. */
struct api_response {
    const char *id, *model;     /* id "resp_..."; items' ids derive from it */
    int64_t created;
    const char *reasoning;      /* a reasoning item ("" or NULL: none) */
    size_t reasoning_len;
    const char *text;           /* a message item with one output_text part */
    size_t len;
    const struct fl_tool_answer *tools; /* a function_call item per call (NULL: none) */
    bool incomplete;            /* max_output_tokens ended it */
    bool text_last;             /* the message item after the calls (a stream opened it there:
                                 * the calls began before any text) */
    int input_tokens, cached_tokens, output_tokens;
};
/* The response object (status completed or incomplete). */
json_t *api_response_json(const struct api_response *r);
/* The same with r's reasoning, text and calls those of an answer as
 * openai.h's api_answer_read split it (r gives the ids, the cut and the
 * usage). */
struct api_answer;
json_t *api_response_answer_json(const struct api_response *r, const struct api_answer *a);

/* Output items, as the response object and the stream's events hold them:
 * the reasoning, the message (done: with its text and status completed,
 * or incomplete when max_output_tokens cut it; else in_progress and
 * empty), call i (done: with its arguments args; else in_progress and
 * ""). */
json_t *api_response_reasoning_item(const struct api_response *r, bool done);
json_t *api_response_message_item(const struct api_response *r, bool done);
json_t *api_response_call_item(const struct api_response *r, int i, const char *name,
                               const char *args, bool done);
/* The items' ids: "rs_ID", "msg_ID", "fc_ID_i" (and the call's call_id
 * "call_ID_i"). */
void api_response_item_id(const struct api_response *r, char kind, int i, char *buf, size_t n);

#endif

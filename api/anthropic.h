/* anthropic.h: Anthropic's Messages API (POST /v1/messages, as llama-server
 * serves it, so agents written for Claude, Claude Code among them, run on a
 * local model): a request read into an OpenAI chat body (openai.h then reads
 * it as every chat request), and the message, stream events and errors
 * written back in Anthropic's shapes.
 *
 * The request: "system" (a string or text blocks), "messages" (roles user
 * and assistant; content a string or blocks: text, thinking and
 * redacted_thinking, tool_use in assistant turns, tool_result in user
 * turns — those become OpenAI's tool_calls and tool messages), "tools"
 * ({name, description, input_schema}), "tool_choice" (auto, any, tool,
 * none; disable_parallel_tool_use), "max_tokens", "stop_sequences",
 * "temperature", "top_p", "top_k", "stream", "thinking" (enabled with
 * budget_tokens: a reasoning budget; disabled: enable_thinking false).
 * Images, documents and server tools are refused naming the block. */
#ifndef FL_API_ANTHROPIC_H
#define FL_API_ANTHROPIC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/json.h"
#include "text/tool-calls.h"

/* An OpenAI chat body (*out, new) for an Anthropic request body. 0, or
 * -EINVAL naming the field ("messages[1].content[0]: ..."), -ENOMEM. */
int api_anthropic_to_chat(const json_t *body, json_t **out, struct fl_err *err);

/* A finished answer as Anthropic's message object. */
struct api_anthropic_message {
    const char *id, *model;
    const char *reasoning;      /* a thinking block first ("" or NULL: none) */
    size_t reasoning_len;
    const char *text;           /* a text block ("" or NULL: none) */
    size_t len;
    const struct fl_tool_answer *tools; /* then a tool_use block per call (NULL: none) */
    const char *stop_reason;    /* api_anthropic_stop_reason's */
    const char *stop_sequence;  /* the stop string that ended it, or NULL */
    int input_tokens, cached_tokens, output_tokens;
};
json_t *api_anthropic_message_json(const struct api_anthropic_message *m);

/* "end_turn", "max_tokens" (finish "length"), "stop_sequence" (a stop
 * string ended it) or "tool_use" (the answer holds calls). */
const char *api_anthropic_stop_reason(const char *finish_reason, bool stop_string, bool calls);

/* A tool_use block's id (call i of the message id). */
void api_anthropic_tool_id(const char *id, int i, char *buf, size_t n);
/* A tool_use block {"type", "id", "name", "input"}: input the arguments'
 * object, or {} while streaming (empty_input). NULL: out of memory. */
json_t *api_anthropic_tool_use_json(const char *id, int i, const struct fl_tool_call *c,
                                    bool empty_input);

/* An OpenAI error object ({"error": {"message", "type", "code"}}, taken)
 * as Anthropic's {"type": "error", "error": {"type", "message"}} for an
 * answer of this HTTP status. */
json_t *api_anthropic_error_json(json_t *openai_error, unsigned status);

#endif

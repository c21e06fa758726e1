/* request-tools.h: inside the api module, what openai.c calls in tools.c
 * (the request's tools, the calls of its assistant messages, and the calls
 * of an answer as JSON), and what tool-grammar.c reads of the tools. Not part of the module's interface (openai.h). */
#ifndef FL_API_REQUEST_TOOLS_H
#define FL_API_REQUEST_TOOLS_H

#include "api/openai.h"

/* "tools", "tool_choice", "parallel_tool_calls" of a chat body; -EINVAL
 * naming the field. */
int api_parse_tools(json_t *body, struct api_request *r, struct fl_err *err);
/* messages[i].tool_calls into m->calls (malloc'ed; arguments given as an
 * object are put back into the document as their text). */
int api_parse_message_calls(json_t *msg, const char *path, struct fl_chat_msg *m,
                            struct fl_err *err);
void api_free_tools(struct api_request *r);
/* The index of the tool named name among r's tools (r->n_tools: none). */
size_t api_tool_index(const struct api_request *r, const char *name);
/* Tool i's "function" object in the request's document. */
const json_t *api_tool_function(const struct api_request *r, size_t i);
/* The calls r's messages hold (Kimi K2's call ids count them). */
size_t api_request_n_calls(const struct api_request *r);
/* "tool_calls": [{"id", "type", "function": {"name", "arguments"}}]. */
json_t *api_tool_calls_json(const struct fl_tool_answer *a, const char *id);
/* One streamed call's growth: {"index", "id", "type", "function": {"name",
 * "arguments"}} when name is given (its first chunk), else {"index",
 * "function": {"arguments"}}. */
json_t *api_tool_call_delta_json(const char *id, int i, const char *name, const char *args,
                                 size_t args_len);

#endif

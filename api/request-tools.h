/* request-tools.h: inside the api module, what openai.c calls in tools.c
 * (the request's tools, the calls of its assistant messages, and the calls
 * of an answer as JSON). Not part of the module's interface (openai.h). */
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
/* "tool_calls": [{"index"?, "id", "type", "function": {"name", "arguments"}}]. */
json_t *api_tool_calls_json(const struct fl_tool_answer *a, const char *id, bool index);

#endif

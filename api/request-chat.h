/* request-chat.h: inside the api module, how a chat request's prompt is
 * rendered: the chat format's options a request asks for (openai.c reads
 * its fields here; tools.c renders with the options, answer.c reads the
 * answer knowing whether the prompt opened its reasoning). Not part of the
 * module's interface (openai.h). */
#ifndef FL_API_REQUEST_CHAT_H
#define FL_API_REQUEST_CHAT_H

#include "api/openai.h"

/* llama-server's "add_generation_prompt" and "continue_final_message";
 * -EINVAL naming the field. */
int api_parse_continuation(const json_t *body, struct api_request *r, struct fl_err *err);

/* The options r's prompt is rendered with (tools when tools): whether the
 * last message is continued, resolved as llama-server does. -EINVAL with
 * *why when the request cannot be: two assistant messages at the end of a
 * continued conversation, or a continued last message that is no
 * assistant's or holds tool calls. */
int api_chat_opts(const struct api_request *r, bool tools, struct fl_chat_opts *o,
                  const char **why);

#endif

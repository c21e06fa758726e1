/* chat-prompt.c: a chat request's rendering options (request-chat.h):
 * llama-server's assistant prefill. A conversation whose last message is
 * the assistant's is continued from that message (clients use it to start
 * an answer for the model: Anthropic's Messages API defines it so), not
 * closed and answered anew. */
#include "api/request-chat.h"

#include <errno.h>
#include <string.h>

#include "api/request-fields.h"

int api_parse_continuation(const json_t *body, struct api_request *r, struct fl_err *err)
{
    int rc = api_field_flag(body, "add_generation_prompt", &r->add_generation_prompt, err);
    if (rc < 0)
        return rc;
    const json_t *c = json_object_get(body, "continue_final_message");
    if (!c || json_is_null(c) || json_is_false(c))
        return 0;
    const char *s = json_string_value(c);
    r->continue_final = json_is_true(c)                           ? API_CONTINUE_AUTO
                        : s && !strcmp(s, "content")              ? FL_CHAT_CONTINUE_CONTENT
                        : s && !strcmp(s, "reasoning_content")    ? FL_CHAT_CONTINUE_REASONING
                                                                  : -1;
    if (r->continue_final < 0)
        return api_field_bad(err, "continue_final_message", "expected a boolean, \"content\" or "
                             "\"reasoning_content\"");
    if (r->add_generation_prompt) /* llama-server's words */
        return api_field_bad(err, "continue_final_message", "Cannot set both add_generation_prompt "
                             "and continue_final_message to true.");
    return 0;
}

/* The continuation asked for, or implied by a last assistant message. */
static int continuation(const struct api_request *r, const char **why)
{
    const size_t n = r->n_msgs;
    const struct fl_chat_msg *last = n ? &r->msgs[n - 1] : NULL;
    const bool prefill = last && !strcmp(last->role, "assistant");
    int mode = r->continue_final;
    if (mode < 0 && prefill) { /* llama-server's prefill (with or without a generation prompt) */
        if (n >= 2 && !strcmp(r->msgs[n - 2].role, "assistant")) {
            *why = "Cannot have 2 or more assistant messages at the end of the list.";
            return -EINVAL;
        }
        mode = API_CONTINUE_AUTO;
    }
    if (mode <= FL_CHAT_CONTINUE_NONE)
        return FL_CHAT_CONTINUE_NONE;
    if (!prefill || last->n_calls) {
        *why = !prefill ? "continue_final_message: the last message is not the assistant's"
                        : "the last message, the assistant's, holds tool calls: a prefill to "
                          "continue holds text only (send the calls' results)";
        return -EINVAL;
    }
    if (mode == API_CONTINUE_AUTO) /* as llama-server resolves it */
        mode = last->reasoning && last->reasoning[0] && !last->content[0]
                   ? FL_CHAT_CONTINUE_REASONING
                   : FL_CHAT_CONTINUE_CONTENT;
    return mode;
}

int api_chat_opts(const struct api_request *r, bool tools, struct fl_chat_opts *o,
                  const char **why)
{
    const int cont = continuation(r, why);
    *o = (struct fl_chat_opts){
        .tools = tools ? (const char *const *)r->tools_json : NULL,
        .n_tools = tools ? r->n_tools : 0,
        .add_assistant = r->add_generation_prompt && cont == FL_CHAT_CONTINUE_NONE,
        .no_thinking = r->thinking == 0,
        .reasoning_effort = r->reasoning_effort,
        .keep_reasoning = r->keep_reasoning == 1,
        .ds_thinking = r->ds_thinking,
        .think_mode = (enum fl_chat_think_mode)r->think_mode,
        .thinking_effort = r->thinking_effort,
        .cont = cont < 0 ? FL_CHAT_CONTINUE_NONE : (enum fl_chat_continue)cont,
    };
    return cont < 0 ? cont : 0;
}

/* answer.c: a chat answer's reasoning, content and calls (openai.h). */
#include <string.h>

#include "api/openai.h"
#include "api/request-chat.h"

void api_answer_reader_init(const struct api_request *req, enum fl_chat_format fmt,
                            struct api_answer_reader *out)
{
    memset(out, 0, sizeof(*out));
    api_tool_reader_init(req, fmt, &out->tools);
    out->tags = fl_chat_reasoning_tags(fmt);
    /* an answer held to JSON or to a forced call from its first token has
     * no reasoning to split: its prompt closed it, or it writes none */
    const bool held = req->json_object || req->json_schema || out->tools.mode == API_TOOLS_ARGS ||
                      out->tools.mode == API_TOOLS_CALL;
    const bool thinks = req->kind == API_CHAT && !held;
    out->split = thinks && req->reasoning_format != API_REASONING_NONE;
    out->legacy = out->split && req->reasoning_format == API_REASONING_LEGACY;
    struct fl_chat_opts o;
    const char *why;
    out->opened = thinks && api_chat_opts(req, false, &o, &why) == 0 &&
                  fl_chat_opens_reasoning(fmt, req->msgs, req->n_msgs, &o);
    out->budget = thinks ? req->reasoning_budget : -1;
    out->budget_message = req->reasoning_budget_message;
}

void api_answer_progress(const struct api_answer_reader *rd, const char *text, size_t len,
                         bool done, struct fl_reasoning_split *out)
{
    if (rd->split && !rd->legacy) {
        fl_reasoning_split_tags(rd->tags, text, len, rd->opened, done, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    out->c_len = out->settled = len;
}

int api_answer_read(const struct api_answer_reader *rd, const char *text, size_t len, bool ended,
                    struct api_answer *out)
{
    memset(out, 0, sizeof(*out));
    struct fl_reasoning_split sp = { .c_len = len };
    if (rd->split)
        fl_reasoning_split_tags(rd->tags, text, len, rd->opened, true, &sp);
    out->reasoning = text + sp.r_off;
    out->reasoning_len = sp.r_len;
    if (rd->legacy) /* content as written */
        sp.c_off = 0, sp.c_len = len;
    out->content = text + sp.c_off;
    out->content_len = sp.c_len;
    if (rd->tools.mode == API_TOOLS_OFF)
        return 0;
    out->has_tools = true;
    const int rc = api_tool_read(&rd->tools, out->content, out->content_len, ended, &out->tools);
    if (!rc) { /* the text outside the calls (a message, a text block, beside the calls) */
        out->content = out->tools.content ? out->tools.content : "";
        out->content_len = out->tools.content_len;
    }
    return rc;
}

void api_answer_free(struct api_answer *a)
{
    fl_tool_answer_free(&a->tools);
}

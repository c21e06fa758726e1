/* chat-glm.c: GLM-4.5's and GLM-4.6's own template (GLM-4.6.jinja in
 * llama.cpp's models) and GLM-4.7's (GLM-4.7-Flash.jinja), chat-impl.h:
 * [gMASK]<sop>, the tools as JSON lines in a system turn, calls as
 * <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
 * (4.5/4.6 with a newline after the name and each tag pair, 4.7 without),
 * results in an <|observation|> turn, each answer with its reasoning. */
#include <stdint.h>

#include "text/chat-impl.h"

/* The tag pairs of a call: GLM-4.5/4.6 put newlines between them, 4.7 not. */
struct glm_style {
    const char *name_end, *key, *mid, *value_end, *call, *tools_format;
};

static const struct glm_style glm45 = {
    "\n", "<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n", "\n<tool_call>",
    "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}"
    "</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n"
    "</tool_call>"
};
static const struct glm_style glm47 = {
    "", "<arg_key>", "</arg_key><arg_value>", "</arg_value>", "<tool_call>",
    "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}"
    "</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
};

static int glm_calls(struct sbuf *b, const struct fl_chat_msg *m, const struct glm_style *st)
{
    for (size_t j = 0; j < m->n_calls; j++) {
        put(b, st->call);
        put(b, m->calls[j].name);
        put(b, st->name_end);
        if (chat_xml_args(b, m->calls[j].arguments, st->key, st->mid, st->value_end))
            return -EINVAL;
        put(b, "</tool_call>");
    }
    return 0;
}

/* An answer: GLM-4.5/4.6 write "\n<think>REASONING</think>" (the reasoning
 * only after the last user turn) and "\n" before the content; GLM-4.7
 * "<think>REASONING</think>" when it has reasoning after the last user
 * turn (or anywhere, keep: its clear_thinking=false), else a bare
 * "</think>", and the content right after. */
static int glm_assistant(struct sbuf *b, const struct fl_chat_msg *m, bool after_user, bool v47,
                         bool keep)
{
    const char *r, *a;
    size_t rn, an;
    chat_reasoning_of(m, &r, &rn, &a, &an);
    const bool has_reasoning = rn > 0; /* GLM-4.7's test, before its strip() */
    chat_trim_span(&r, &rn);
    chat_trim_span(&a, &an);
    put(b, "<|assistant|>");
    const bool kept = after_user || (v47 && keep); /* GLM-4.7's clear_thinking=false: all */
    if (!v47 || (kept && has_reasoning)) {
        put(b, v47 ? "<think>" : "\n<think>");
        if (kept)
            put_n(b, r, rn);
    }
    put(b, "</think>");
    if (an) {
        put(b, v47 ? "" : "\n");
        put_n(b, a, an);
    }
    return glm_calls(b, m, v47 ? &glm47 : &glm45);
}

int fl_chat_glm45(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                  const struct fl_chat_opts *o, bool v47)
{
    const struct glm_style *st = v47 ? &glm47 : &glm45;
    put(b, "[gMASK]<sop>");
    if (o->n_tools) {
        put(b, "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "
               "query.\n\nYou are provided with function signatures within <tools></tools> XML "
               "tags:\n<tools>\n");
        for (size_t i = 0; i < o->n_tools; i++) {
            put(b, o->tools[i]);
            put(b, "\n");
        }
        put(b, "</tools>\n\nFor each function call, output the function name and arguments within "
               "the following XML format:\n");
        put(b, st->tools_format);
    }
    size_t last_user = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (is(m[i].role, "user"))
            last_user = i;
    for (size_t i = 0; i < n; i++) {
        const bool user = is(m[i].role, "user");
        if (user || is(m[i].role, "system")) {
            put(b, user ? "<|user|>" : "<|system|>");
            put(b, v47 ? "" : "\n");
            put(b, m[i].content);
            if (!v47 && o->no_thinking && user && !chat_ends_with(m[i].content, "/nothink"))
                put(b, "/nothink"); /* GLM-4.5's enable_thinking=false */
        } else if (is(m[i].role, "assistant")) {
            if (glm_assistant(b, &m[i], last_user == SIZE_MAX || i > last_user, v47,
                              o->keep_reasoning))
                return -EINVAL;
        } else if (is(m[i].role, "tool")) {
            chat_put_result(b, m, n, i, "<|observation|>", v47 ? "<tool_response>" : "\n<tool_response>\n",
                            v47 ? "</tool_response>" : "\n</tool_response>", "");
        }
    }
    if (o->add_assistant && v47) /* GLM-4.7 opens its reasoning; enable_thinking=false closes it */
        put(b, o->no_thinking ? "<|assistant|></think>" : "<|assistant|><think>");
    else if (o->add_assistant)
        put(b, o->no_thinking ? "<|assistant|>\n<think></think>" : "<|assistant|>");
    return 0;
}

/* chat-minimax.c: MiniMax's own templates, M2's (MiniMax-M2.jinja in
 * llama.cpp's models) and M3's (MiniMax-M3.jinja): ]~b]ROLE\n turns ended
 * by [e~[\n, the assistant's role "ai", tools as <tool> lines of JSON,
 * results in a "tool" turn. M2 thinks in <think> and calls tools in a
 * <minimax:tool_call> block of flat <parameter>s; M3 thinks in <mm:think>,
 * says when to (its thinking_mode), and writes every tool tag after the
 * namespace token ]<]minimax[>[, nested values as nested tags. */
#include "text/chat-impl.h"

#include <jansson.h>

#include "base/json.h"

/* The tools' functions as JSON, a <tool> line each (both templates'
 * render_tool_namespace). -EINVAL when a tool is not {"function": {...}}. */
static int put_functions(struct sbuf *b, const char *const *tools, size_t n_tools)
{
    for (size_t i = 0; i < n_tools; i++) {
        json_t *t = json_loads(tools[i], 0, NULL);
        char *f = fl_json_dumps_python(json_object_get(t, "function"));
        json_decref(t);
        if (!f)
            return -EINVAL;
        put(b, "<tool>");
        put(b, f);
        put(b, "</tool>\n");
        free(f);
    }
    return 0;
}

/* MiniMax-M2's tools block: the functions and the call format. -EINVAL
 * when a tool is not {"function": {...}}. */
static int minimax_tools(struct sbuf *b, const char *const *tools, size_t n_tools)
{
    put(b, "\n\n# Tools\nYou may call one or more tools to assist with the user query.\nHere "
           "are the tools available in JSONSchema format:\n\n<tools>\n");
    if (put_functions(b, tools, n_tools))
        return -EINVAL;
    put(b, "</tools>\n\nWhen making tool calls, use XML format to invoke tools and pass "
           "parameters:\n\n<minimax:tool_call>\n<invoke name=\"tool-name-1\">\n<parameter "
           "name=\"param-key-1\">param-value-1</parameter>\n<parameter name=\"param-key-2\">"
           "param-value-2</parameter>\n...\n</invoke>\n</minimax:tool_call>");
    return 0;
}

/* An assistant turn: reasoning (kept after the last user turn) as the
 * template splits it at </think>, the answer with newlines trimmed, and
 * each call as <invoke> with <parameter>s (strings bare, other values as
 * JSON). */
static int minimax_assistant(struct sbuf *b, const struct fl_chat_msg *m, bool after_user)
{
    const char *r, *a;
    size_t rn, an;
    chat_reasoning_of(m, &r, &rn, &a, &an);
    while (an && a[an - 1] == '\n' && !m->reasoning && strstr(m->content, "</think>")) /* the template strips then */
        an--;
    put(b, "]~b]ai\n");
    if (rn && after_user) {
        put(b, "<think>\n");
        put_n(b, r, rn);
        put(b, "\n</think>\n\n");
    }
    put_n(b, a, an);
    if (m->n_calls)
        put(b, "\n<minimax:tool_call>\n");
    for (size_t j = 0; j < m->n_calls; j++) {
        put(b, "<invoke name=\"");
        put(b, m->calls[j].name);
        put(b, "\">\n");
        if (chat_xml_args(b, m->calls[j].arguments, "<parameter name=\"", "\">", "</parameter>\n"))
            return -EINVAL;
        put(b, "</invoke>\n");
    }
    if (m->n_calls)
        put(b, "</minimax:tool_call>");
    put(b, "[e~[\n");
    return 0;
}

/* The turns m[first..n) as both templates write them: an assistant's by
 * assistant (told whether it comes after the last user turn), results in
 * a "tool" turn (-EINVAL for one with no call before it: the templates
 * raise), users' as they are; other roles (a later system message) are
 * not written. */
static int turns(struct sbuf *b, const struct fl_chat_msg *m, size_t first, size_t n,
                 int (*assistant)(struct sbuf *, const struct fl_chat_msg *, bool after_user))
{
    size_t last_user = SIZE_MAX;
    for (size_t i = first; i < n; i++)
        if (is(m[i].role, "user"))
            last_user = i;
    bool called = false; /* the last assistant turn made calls */
    for (size_t i = first; i < n; i++) {
        if (is(m[i].role, "assistant")) {
            if (assistant(b, &m[i], last_user == SIZE_MAX || i > last_user))
                return -EINVAL;
            called = m[i].n_calls > 0;
        } else if (is(m[i].role, "tool")) {
            if (!called)
                return -EINVAL;
            chat_put_result(b, m, n, i, "]~b]tool", "\n<response>", "</response>", "[e~[\n");
        } else if (is(m[i].role, "user")) {
            put(b, "]~b]user\n");
            put(b, m[i].content);
            put(b, "[e~[\n");
        }
    }
    return 0;
}

/* MiniMax-M2's Jinja template (MiniMax-M2.jinja in llama.cpp's models): the
 * assistant's role is "ai", a system turn always comes first (the
 * template's default when the conversation has none; a later system turn
 * is not written), tools in it, results in a "tool" turn, and the
 * generation prompt opens the model's thinking. -EINVAL for a result with
 * no call before it (the template raises). */
int fl_chat_minimax_m2(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                       const struct fl_chat_opts *o)
{
    const char *const *tools = o->tools;
    const size_t n_tools = o->n_tools;
    const bool sys = n && is(m[0].role, "system");
    put(b, "]~!b[]~b]system\n");
    put(b, sys && m[0].content[0] ? m[0].content : "You are a helpful assistant.");
    if (n_tools && minimax_tools(b, tools, n_tools))
        return -EINVAL;
    put(b, "[e~[\n");
    if (turns(b, m, sys, n, minimax_assistant))
        return -EINVAL;
    if (o->add_assistant)
        put(b, "]~b]ai\n<think>\n");
    return 0;
}

/* ---- MiniMax-M3 ---------------------------------------------------------- */


enum fl_chat_think_mode fl_chat_minimax_m3_mode(const struct fl_chat_opts *o)
{
    return o->think_mode != FL_THINK_MODE_DEFAULT ? o->think_mode
           : o->no_thinking                       ? FL_THINK_MODE_DISABLED
                                                  : FL_THINK_MODE_ADAPTIVE;
}

/* The template's to_xml: an object's members (null ones left out) and an
 * array's items as tags after the namespace token, booleans as JSON,
 * strings as they are, numbers as Python writes them; null as nothing. */
static void m3_value(struct sbuf *b, const json_t *v)
{
    const char *k;
    size_t i;
    json_t *x;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, x) {
            if (json_is_null(x))
                continue;
            put(b, FL_MINIMAX_M3_NS "<");
            put(b, k);
            put(b, ">");
            m3_value(b, x);
            put(b, FL_MINIMAX_M3_NS "</");
            put(b, k);
            put(b, ">");
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) {
            put(b, FL_MINIMAX_M3_NS "<item>");
            m3_value(b, x);
            put(b, FL_MINIMAX_M3_NS "</item>");
        }
    } else if (json_is_string(v)) {
        put_n(b, json_string_value(v), json_string_length(v));
    } else if (!json_is_null(v)) {
        char *j = fl_json_dumps_python(v);
        put(b, j ? j : "");
        if (!j && !b->err)
            b->err = -ENOMEM;
        free(j);
    }
}

/* An assistant's calls: one block of <invoke>s. -EINVAL for arguments
 * that are no JSON object (the template iterates them). */
static int m3_calls(struct sbuf *b, const struct fl_chat_msg *m)
{
    put(b, FL_MINIMAX_M3_NS "<tool_call>\n");
    for (size_t j = 0; j < m->n_calls; j++) {
        json_t *args = json_loads(m->calls[j].arguments, 0, NULL);
        if (!json_is_object(args)) {
            json_decref(args);
            return -EINVAL;
        }
        put(b, FL_MINIMAX_M3_NS "<invoke name=\"");
        put(b, m->calls[j].name);
        put(b, "\">");
        m3_value(b, args);
        put(b, FL_MINIMAX_M3_NS "</invoke>\n");
        json_decref(args);
    }
    put(b, FL_MINIMAX_M3_NS "</tool_call>");
    return 0;
}

/* An assistant turn: its reasoning (reasoning_content, else split from
 * the content at </mm:think> as the template splits it) in <mm:think> on
 * every turn (after_user or not), or the bare </mm:think> a turn without
 * any starts with; the content; the calls. */
static int m3_assistant(struct sbuf *b, const struct fl_chat_msg *m, bool after_user)
{
    (void)after_user;
    const char *r, *c;
    size_t rn, cn;
    chat_reasoning_tagged(m, "<mm:think>", "</mm:think>", &r, &rn, &c, &cn);
    if (c != m->content) /* split: the answer is stripped of newlines at both ends */
        while (cn && c[cn - 1] == '\n')
            cn--;
    put(b, "]~b]ai\n");
    if (rn) {
        put(b, "<mm:think>");
        put_n(b, r, rn);
    }
    put(b, "</mm:think>");
    put_n(b, c, cn);
    if (m->n_calls && m3_calls(b, m))
        return -EINVAL;
    put(b, "[e~[\n");
    return 0;
}

/* The two system turns: the root message's (or the template's default
 * and its thinking instructions), then the developer's (the first system
 * or developer message's, or "You are a helpful assistant.") with the
 * tools. Returns how many messages they took, or -EINVAL. */
static int m3_system(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                     const struct fl_chat_opts *o)
{
    static const char *const mode[] = {
        [FL_THINK_MODE_ENABLED] = "enabled. You MUST think step by step before every response, "
                                  "including after receiving function/tool results.\n",
        [FL_THINK_MODE_DISABLED] = "disabled. Do not output any thinking process.\n",
        [FL_THINK_MODE_ADAPTIVE] = "adaptive. You are encouraged to think for complex "
                                   "decision-making, multi-step reasoning, or when analyzing "
                                   "function/tool results.\n",
    };
    size_t i = 0;
    const struct fl_chat_msg *root = n && is(m[0].role, "root") ? &m[i++] : NULL;
    const struct fl_chat_msg *dev =
        i < n && (is(m[i].role, "system") || is(m[i].role, "developer")) ? &m[i++] : NULL;
    put(b, "]~!b[]~b]system\n");
    put(b, root && root->content[0]
               ? root->content
               : "Your model version is MiniMax-M3, developed by MiniMax. Knowledge cutoff: "
                 "January 2026. Founded in early 2022, MiniMax is a global AI foundation model "
                 "company committed to advancing the frontiers of AI towards AGI.");
    put(b, "\n\n<thinking_instructions>\nYou have a thinking capability that allows you to reason "
           "step by step before responding. When thinking is enabled, wrap your reasoning in "
           "<mm:think></mm:think> tags before your response. When thinking is disabled, begin your "
           "response directly after the </mm:think> prefix. When thinking is adaptive, decide on "
           "your own whether to think for the current turn.\nCurrent thinking mode: ");
    put(b, mode[fl_chat_minimax_m3_mode(o)]);
    put(b, "</thinking_instructions>[e~[\n]~b]developer\n");
    put(b, dev && dev->content[0] ? dev->content : "You are a helpful assistant.");
    if (o->n_tools) {
        put(b, "\n\n# Tools\nYou may call one or more tools to assist with the user query.\nHere "
               "are the tools available in JSONSchema format:\n\n<tools>\n");
        if (put_functions(b, o->tools, o->n_tools))
            return -EINVAL;
        put(b, "</tools>\n\nTo call tools, wrap all invocations in a single " FL_MINIMAX_M3_NS "<tool_call>"
               FL_MINIMAX_M3_NS "</tool_call> block. Parameter values containing nested objects or arrays "
               "are recursively expanded into XML elements. Example:\n\n" FL_MINIMAX_M3_NS "<tool_call>\n"
               FL_MINIMAX_M3_NS "<invoke name=\"tool-name-1\">" FL_MINIMAX_M3_NS "<param-1>value-1" FL_MINIMAX_M3_NS "</param-1>"
               FL_MINIMAX_M3_NS "<param-2>" FL_MINIMAX_M3_NS "<item>" FL_MINIMAX_M3_NS "<key-a>val-a" FL_MINIMAX_M3_NS "</key-a>" FL_MINIMAX_M3_NS
               "<key-b>val-b" FL_MINIMAX_M3_NS "</key-b>" FL_MINIMAX_M3_NS "</item>" FL_MINIMAX_M3_NS "</param-2>" FL_MINIMAX_M3_NS
               "</invoke>\n" FL_MINIMAX_M3_NS "<invoke name=\"tool-name-2\">" FL_MINIMAX_M3_NS "<param-1>value-1"
               FL_MINIMAX_M3_NS "</param-1>" FL_MINIMAX_M3_NS "</invoke>\n" FL_MINIMAX_M3_NS "</tool_call>");
    }
    put(b, "[e~[\n");
    return (int)i;
}

int fl_chat_minimax_m3(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                       const struct fl_chat_opts *o)
{
    const int first = m3_system(b, m, n, o);
    if (first < 0)
        return first;
    if (turns(b, m, (size_t)first, n, m3_assistant))
        return -EINVAL;
    if (o->add_assistant) {
        const enum fl_chat_think_mode mode = fl_chat_minimax_m3_mode(o);
        put(b, "]~b]ai\n");
        put(b, mode == FL_THINK_MODE_DISABLED ? "</mm:think>"
               : mode == FL_THINK_MODE_ENABLED ? "<mm:think>" : "");
    }
    return 0;
}

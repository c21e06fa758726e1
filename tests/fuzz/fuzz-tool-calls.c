/* fuzz-tool-calls: libFuzzer target for reading the tool calls in an answer
 * (text/tool-calls.h), whose text a model writes, in chatml's, GLM's,
 * MiniMax-M2's, gpt-oss's, Kimi K2's, DeepSeek V3.1's and V3.2's and Qwen3.5's formats: parsing never fails but
 * for memory; an answer without calls is its whole text as content; every
 * call has a name and arguments that are a JSON object; the content prefix
 * a stream may send is within the text and ends before the first call; the
 * reasoning split off an answer lies within it, and a stream's parts are
 * prefixes of the whole one's; the calls read as an answer grows are the
 * whole one's, their arguments prefixes. A broken contract aborts. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/reasoning.h"
#include "text/tool-calls.h"

/* The calls read as the answer grows (its last bytes, one at a time):
 * each has a name and arguments that start an object; where the whole
 * answer has calls, each is the whole one's i-th call with a prefix of
 * its arguments (all of them when whole). */
static void partial(enum fl_chat_format fmt, const char *text, size_t size,
                    const struct fl_tool_answer *fin)
{
    for (size_t k = size > 48 ? size - 48 : 0; k <= size; k++) {
        struct fl_tool_partial *p;
        const int n = fl_tool_calls_partial(fmt, text, k, &p);
        if (n < 0 || (n && !p))
            abort();
        for (int i = 0; i < n; i++) {
            if (!p[i].name[0] || p[i].args[0] != '{' || strlen(p[i].args) != p[i].args_len)
                abort();
            if (fin->n_calls && (i >= fin->n_calls || strcmp(p[i].name, fin->calls[i].name) ||
                                 strncmp(fin->calls[i].arguments, p[i].args, p[i].args_len) ||
                                 (p[i].whole && strcmp(fin->calls[i].arguments, p[i].args))))
                abort();
        }
        fl_tool_partials_free(p, n);
    }
}

static void one(enum fl_chat_format fmt, const char *text, size_t size)
{
    struct fl_tool_answer a;
    if (fl_tool_calls_parse(fmt, text, size, &a))
        abort();
    if (a.n_calls == 0 && (a.content_len != size || memcmp(a.content, text, size)))
        abort();
    for (int i = 0; i < a.n_calls; i++) {
        json_t *v = json_loads(a.calls[i].arguments, 0, NULL);
        if (!a.calls[i].name[0] || !json_is_object(v))
            abort();
        json_decref(v);
    }
    const char *open = fmt == FL_CHAT_MINIMAX_M2        ? "<minimax:tool_call>"
                       : fmt == FL_CHAT_MINIMAX_M3       ? FL_MINIMAX_M3_NS "<tool_call>"
                       : fmt == FL_CHAT_KIMI_K3          ? "<|open|>tools<|sep|>"
                       : fmt == FL_CHAT_DEEPSEEK_V32     ? "<｜DSML｜function_calls>"
                       : fmt == FL_CHAT_GPT_OSS         ? "to=functions."
                       : fmt == FL_CHAT_KIMI_K2_THINKING ? "<|tool_calls_section_begin|>"
                       : fmt == FL_CHAT_DEEPSEEK_V31 || fmt == FL_CHAT_DEEPSEEK_V3_0324
                           ? "<｜tool▁calls▁begin｜>"
                           : "<tool_call>";
    const size_t on = strlen(open);
    const size_t p = fl_tool_calls_content_prefix(fmt, text, size);
    if (p > size || memmem(text, p, open, on))
        abort();
    /* Kimi K3's tools part after its response part's close: content ends
     * before that close */
    const char *lead = fmt == FL_CHAT_KIMI_K3 ? "<|close|>response<|sep|>" : "";
    const size_t ln = strlen(lead);
    const char *at = a.n_calls ? memmem(text, size, open, on) : NULL;
    if (at && (size_t)(at - text) >= ln && !memcmp(at - ln, lead, ln))
        at -= ln;
    if (at && fmt != FL_CHAT_GPT_OSS && p != (size_t)(at - text))
        abort(); /* gpt-oss's header may start before its recipient: at or before */
    if (a.n_calls && fmt == FL_CHAT_GPT_OSS && p > (size_t)((const char *)memmem(text, size, open, on) - text))
        abort();
    partial(fmt, text, size, &a);
    fl_tool_answer_free(&a);
}

/* The reasoning before the answer (text/reasoning.h): its parts lie in
 * the text (the answer to its end, unless the tags end it: Kimi K3's), a
 * growing answer's are prefixes of the finished one's at the same place. */
static void reasoning(const struct fl_reasoning_tags *t, const char *text, size_t size, bool opened)
{
    struct fl_reasoning_split fin, part;
    fl_reasoning_split_tags(t, text, size, opened, true, &fin);
    if (fin.r_off + fin.r_len > size || fin.c_off + fin.c_len > size ||
        (!t->end && fin.c_off + fin.c_len != size) || fin.settled != size)
        abort();
    for (size_t k = size > 64 ? size - 64 : 0; k <= size; k++) {
        fl_reasoning_split_tags(t, text, k, opened, false, &part);
        if ((part.r_len && (part.r_off != fin.r_off || part.r_len > fin.r_len)) ||
            (part.c_len && (part.c_off != fin.c_off || part.c_len > fin.c_len)) ||
            part.settled > k)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reasoning(&fl_think_tags, (const char *)data, size, false);
    reasoning(&fl_think_tags, (const char *)data, size, true);
    reasoning(&fl_harmony_tags, (const char *)data, size, false);
    reasoning(&fl_mm_think_tags, (const char *)data, size, false);
    reasoning(&fl_kimi_k3_tags, (const char *)data, size, true);
    reasoning(&fl_kimi_k3_tags, (const char *)data, size, false);
    one(FL_CHAT_CHATML, (const char *)data, size);
    one(FL_CHAT_GLM45, (const char *)data, size);
    one(FL_CHAT_GLM47, (const char *)data, size);
    one(FL_CHAT_MINIMAX_M2, (const char *)data, size);
    one(FL_CHAT_MINIMAX_M3, (const char *)data, size);
    one(FL_CHAT_KIMI_K3, (const char *)data, size);
    one(FL_CHAT_GPT_OSS, (const char *)data, size);
    one(FL_CHAT_KIMI_K2_THINKING, (const char *)data, size);
    one(FL_CHAT_DEEPSEEK_V31, (const char *)data, size);
    one(FL_CHAT_DEEPSEEK_V3_0324, (const char *)data, size);
    one(FL_CHAT_QWEN35, (const char *)data, size);
    one(FL_CHAT_DEEPSEEK_V32, (const char *)data, size);
    return 0;
}

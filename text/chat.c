/* chat.c: see chat.h. Formats and template markers follow llama.cpp's
 * llama-chat.cpp (llm_chat_detect_template, llm_chat_apply_template). */
#include "text/chat.h"
#include "text/chat-impl.h"
#include "text/reasoning.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "gguf/gguf.h"

static const struct {
    const char *name;
    enum fl_chat_format fmt;
} names[] = {
    { "chatml", FL_CHAT_CHATML },
    { "qwen3.5", FL_CHAT_QWEN35 },
    { "qwen3-coder", FL_CHAT_QWEN3_CODER },
    { "llama2", FL_CHAT_LLAMA2 },
    { "llama2-sys", FL_CHAT_LLAMA2_SYS },
    { "llama2-sys-bos", FL_CHAT_LLAMA2_SYS_BOS },
    { "llama2-sys-strip", FL_CHAT_LLAMA2_SYS_STRIP },
    { "mistral-v1", FL_CHAT_MISTRAL_V1 },
    { "mistral-v3", FL_CHAT_MISTRAL_V3 },
    { "mistral-v3-tekken", FL_CHAT_MISTRAL_V3_TEKKEN },
    { "mistral-v7", FL_CHAT_MISTRAL_V7 },
    { "llama3", FL_CHAT_LLAMA3 },
    { "deepseek2", FL_CHAT_DEEPSEEK2 },
    { "deepseek3", FL_CHAT_DEEPSEEK3 },
    { "deepseek-v3.1", FL_CHAT_DEEPSEEK_V31 },
    { "deepseek-v3.2", FL_CHAT_DEEPSEEK_V32 },
    { "deepseek-v3-0324", FL_CHAT_DEEPSEEK_V3_0324 },
    { "deepseek-r1", FL_CHAT_DEEPSEEK_R1 },
    { "gpt-oss", FL_CHAT_HARMONY },
    { "harmony", FL_CHAT_HARMONY },
    { "openai-gpt-oss", FL_CHAT_GPT_OSS },
    { "kimi-k2", FL_CHAT_KIMI_K2 },
    { "kimi-k2-instruct", FL_CHAT_KIMI_K2_INSTRUCT },
    { "kimi-k2-thinking", FL_CHAT_KIMI_K2_THINKING },
    { "chatglm4", FL_CHAT_CHATGLM4 },
    { "glm-4.5", FL_CHAT_GLM45 },
    { "glm-4.7", FL_CHAT_GLM47 },
    { "minimax-m2", FL_CHAT_MINIMAX_M2 },
    { "minimax-m3", FL_CHAT_MINIMAX_M3 },
    { "kimi-k3", FL_CHAT_KIMI_K3 },
};

enum fl_chat_format fl_chat_format_from_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(names[i].name, name) == 0)
            return names[i].fmt;
    return FL_CHAT_UNKNOWN;
}

const char *fl_chat_format_name(enum fl_chat_format fmt)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].fmt == fmt)
            return names[i].name;
    return "unknown";
}

/* ---- detection ---------------------------------------------------------- */

static enum fl_chat_format detect_inst(const char *t)
{
    if (strstr(t, "[SYSTEM_PROMPT]"))
        return FL_CHAT_MISTRAL_V7;
    if (strstr(t, "' [INST] ' + system_message") || strstr(t, "[AVAILABLE_TOOLS]")) {
        if (strstr(t, " [INST]"))
            return FL_CHAT_MISTRAL_V1;
        if (strstr(t, "\"[INST]\""))
            return FL_CHAT_MISTRAL_V3_TEKKEN;
        return FL_CHAT_MISTRAL_V3;
    }
    if (strstr(t, "content.strip()"))
        return FL_CHAT_LLAMA2_SYS_STRIP;
    if (strstr(t, "bos_token + '[INST]"))
        return FL_CHAT_LLAMA2_SYS_BOS;
    if (strstr(t, "<<SYS>>"))
        return FL_CHAT_LLAMA2_SYS;
    return FL_CHAT_LLAMA2;
}

/* V3.1's calls have no ```json fence, V3-0324's and R1's do; R1 opens
 * <think>\n, V3-0324 opens the answer with the user's turn (is_last_user). */
static enum fl_chat_format detect_deepseek(const char *t)
{
    if (strstr(t, "DSML") && strstr(t, "function_calls")) /* V3.2's calls, as llama.cpp tells them */
        return FL_CHAT_DEEPSEEK_V32;
    if (!strstr(t, "<｜tool▁sep｜>"))
        return FL_CHAT_DEEPSEEK3;
    if (!strstr(t, "```json"))
        return strstr(t, "<think></think>") ? FL_CHAT_DEEPSEEK_V31 : FL_CHAT_DEEPSEEK3;
    if (strstr(t, "is_last_user"))
        return FL_CHAT_DEEPSEEK_V3_0324;
    return strstr(t, "<think>\\n") ? FL_CHAT_DEEPSEEK_R1 : FL_CHAT_DEEPSEEK3;
}

static enum fl_chat_format detect_template(const char *t)
{
    if (strstr(t, "<|im_assistant|>") && strstr(t, "<|im_middle|>"))
        return strstr(t, "<think>") ? FL_CHAT_KIMI_K2_THINKING : FL_CHAT_KIMI_K2_INSTRUCT;
    if (strstr(t, "<|im_start|>") && strstr(t, "<function=")) /* XML calls: Qwen3.5, Qwen3-Coder */
        return strstr(t, "<think>") ? FL_CHAT_QWEN35 : FL_CHAT_QWEN3_CODER;
    if (strstr(t, "<|im_start|>"))
        return FL_CHAT_CHATML;
    if (strncmp(t, "mistral", 7) == 0 || strstr(t, "[INST]"))
        return detect_inst(t);
    if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>"))
        return FL_CHAT_LLAMA3;
    if (strstr(t, "'Assistant: ' + message['content'] + eos_token"))
        return FL_CHAT_DEEPSEEK2;
    if (strstr(t, "<｜Assistant｜>") && strstr(t, "<｜User｜>") &&
        strstr(t, "<｜end▁of▁sentence｜>"))
        return detect_deepseek(t);
    if (strstr(t, "[gMASK]<sop>") && strstr(t, "{function-name}<arg_key>")) /* no newlines */
        return FL_CHAT_GLM47;
    if (strstr(t, "[gMASK]<sop>"))
        return strstr(t, "<arg_key>") ? FL_CHAT_GLM45 : FL_CHAT_CHATGLM4;
    if (strstr(t, "<|open|>") && strstr(t, "<|close|>") && strstr(t, "<|sep|>"))
        return FL_CHAT_KIMI_K3; /* its tags */
    if (strstr(t, "]<]minimax[>[") && strstr(t, "<tool_call>") && strstr(t, "<invoke name="))
        return FL_CHAT_MINIMAX_M3; /* as llama.cpp tells it from M2's */
    if (strstr(t, "]~b]") && strstr(t, "[e~[") && !strstr(t, "<mm:think>")) /* not M3-like */
        return FL_CHAT_MINIMAX_M2;
    if (strstr(t, "<|start|>") && strstr(t, "<|channel|>"))
        return FL_CHAT_GPT_OSS;
    return FL_CHAT_UNKNOWN;
}

enum fl_chat_format fl_chat_detect(const char *arch, const char *tmpl)
{
    enum fl_chat_format f = tmpl ? detect_template(tmpl) : FL_CHAT_UNKNOWN;
    if (f != FL_CHAT_UNKNOWN || !arch)
        return f;
    if (strcmp(arch, "qwen35moe") == 0)
        return FL_CHAT_QWEN35; /* Qwen3.5 / 3.6 MoE: their own template's format */
    if (strncmp(arch, "qwen", 4) == 0)
        return FL_CHAT_CHATML;
    if (strcmp(arch, "llama") == 0)
        return FL_CHAT_LLAMA2; /* Mixtral-Instruct's [INST] format */
    if (strcmp(arch, "deepseek2") == 0)
        return FL_CHAT_DEEPSEEK3; /* V3, R1 and Kimi K2 all load as deepseek2 */
    if (strcmp(arch, "gpt-oss") == 0)
        return FL_CHAT_GPT_OSS;
    if (strcmp(arch, "deepseek32") == 0)
        return FL_CHAT_DEEPSEEK_V32;
    if (strcmp(arch, "glm4moe") == 0)
        return FL_CHAT_GLM45; /* GLM-4.5 and later: their own template's format */
    if (strcmp(arch, "glm-dsa") == 0)
        return FL_CHAT_GLM47; /* GLM-5: the newest GLM format here (its files carry
                               * their template, which the detection above reads) */
    if (strcmp(arch, "minimax-m2") == 0)
        return FL_CHAT_MINIMAX_M2;
    if (strcmp(arch, "minimax-m3") == 0)
        return FL_CHAT_MINIMAX_M3;
    if (strcmp(arch, "kimi-linear") == 0)
        return FL_CHAT_KIMI_K2_INSTRUCT; /* Moonshot's format, as Kimi K2 Instruct writes it
                                          * (no Kimi-Linear template was at hand) */
    if (strcmp(arch, "kimi-k3") == 0)
        return FL_CHAT_KIMI_K3;
    return FL_CHAT_UNKNOWN;
}

enum fl_chat_format fl_chat_detect_file(const struct gguf_file *f)
{
    const char *arch = NULL, *tmpl = NULL;
    if (gguf_get_str(f, "general.architecture", &arch) != 0)
        arch = NULL;
    if (gguf_get_str(f, "tokenizer.chat_template", &tmpl) != 0)
        tmpl = NULL;
    return fl_chat_detect(arch, tmpl);
}

/* ---- rendering ---------------------------------------------------------- */

/* Qwen3's tools block: the system turn, with the user's system text first. */
static size_t chatml_tools(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                           const char *const *tools, size_t n_tools)
{
    const bool sys = n > 0 && is(m[0].role, "system");
    put(b, "<|im_start|>system\n");
    if (sys) {
        put(b, m[0].content);
        put(b, "\n\n");
    }
    put(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (size_t i = 0; i < n_tools; i++) {
        put(b, "\n");
        put(b, tools[i]);
    }
    put(b, "\n</tools>\n\nFor each function call, return a json object with function name and "
           "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
           "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
    return sys ? 1 : 0;
}

static void chatml_calls(struct sbuf *b, const struct fl_chat_msg *m, bool content)
{
    for (size_t j = 0; j < m->n_calls; j++) {
        if (j > 0 || content)
            put(b, "\n");
        put(b, "<tool_call>\n{\"name\": \"");
        put(b, m->calls[j].name);
        put(b, "\", \"arguments\": ");
        chat_put_tojson(b, m->calls[j].arguments); /* an error sticks in b */
        put(b, "}\n</tool_call>");
    }
}

/* Qwen3's last query: the last user message that is not a tool's result
 * wrapped as one (n - 1 when there is none). */
static size_t chatml_last_query(const struct fl_chat_msg *m, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        const char *c = m[i].content;
        const size_t len = strlen(c);
        if (is(m[i].role, "user") && !(strncmp(c, "<tool_response>", 15) == 0 && len >= 16 &&
                                       strcmp(c + len - 16, "</tool_response>") == 0))
            return i;
    }
    return n ? n - 1 : 0;
}

/* An assistant turn as Qwen3 writes it: reasoning kept (in <think>) only
 * after the last query, when there is some or the turn is the last. */
static void chatml_assistant(struct sbuf *b, const struct fl_chat_msg *m, bool after_query,
                             bool last)
{
    const char *r, *a;
    size_t rn, an;
    chat_reasoning_of(m, &r, &rn, &a, &an);
    const bool content = an > 0; /* the template asks before its lstrip below */
    put(b, "<|im_start|>assistant\n");
    if (after_query && (last || rn)) {
        while (rn && r[0] == '\n')
            r++, rn--;
        while (rn && r[rn - 1] == '\n')
            rn--;
        put(b, "<think>\n");
        put_n(b, r, rn);
        put(b, "\n</think>\n\n");
        while (an && a[0] == '\n')
            a++, an--;
    }
    put_n(b, a, an);
    chatml_calls(b, m, content);
}

static void apply_chatml(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                         const struct fl_chat_opts *o)
{
    const size_t first = o->n_tools ? chatml_tools(b, m, n, o->tools, o->n_tools) : 0;
    const size_t query = chatml_last_query(m, n);
    for (size_t i = first; i < n; i++) {
        if (is(m[i].role, "tool")) { /* consecutive results share one user turn */
            chat_put_result(b, m, n, i, "<|im_start|>user", "\n<tool_response>\n",
                       "\n</tool_response>", "<|im_end|>\n");
            continue;
        }
        if (is(m[i].role, "assistant")) {
            chatml_assistant(b, &m[i], i > query, i + 1 == n);
        } else {
            put(b, "<|im_start|>");
            put(b, m[i].role);
            put(b, "\n");
            put(b, m[i].content);
        }
        put(b, "<|im_end|>\n");
    }
    if (o->add_assistant) /* Qwen3's enable_thinking=false: an empty reasoning */
        put(b, o->no_thinking ? "<|im_start|>assistant\n<think>\n\n</think>\n\n"
                              : "<|im_start|>assistant\n");
}

static void apply_llama2(struct sbuf *b, enum fl_chat_format fmt, const struct fl_chat_msg *m,
                         size_t n)
{
    bool sys = fmt != FL_CHAT_LLAMA2, bos_inside = fmt == FL_CHAT_LLAMA2_SYS_BOS;
    bool strip = fmt == FL_CHAT_LLAMA2_SYS_STRIP, inside = true;
    put(b, "[INST] "); /* the tokenizer adds the first BOS */
    for (size_t i = 0; i < n; i++) {
        if (!inside) {
            put(b, bos_inside ? "<s>[INST] " : "[INST] ");
            inside = true;
        }
        bool is_sys = is(m[i].role, "system"), is_user = is(m[i].role, "user");
        if (is_sys && sys)
            put(b, "<<SYS>>\n");
        if (strip)
            chat_put_trimmed(b, m[i].content);
        else
            put(b, m[i].content);
        if (is_sys) {
            put(b, sys ? "\n<</SYS>>\n\n" : "\n");
        } else if (is_user) {
            put(b, " [/INST]");
        } else {
            put(b, "</s>");
            inside = false;
        }
    }
}

static void apply_mistral(struct sbuf *b, enum fl_chat_format fmt, const struct fl_chat_msg *m,
                          size_t n)
{
    const char *lead = fmt == FL_CHAT_MISTRAL_V1 ? " " : "";
    const char *trail = fmt == FL_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        if (!inside) {
            put(b, lead);
            put(b, "[INST]");
            put(b, trail);
            inside = true;
        }
        if (is(m[i].role, "system")) {
            put(b, m[i].content);
            put(b, "\n\n");
        } else if (is(m[i].role, "user")) {
            put(b, m[i].content);
            put(b, lead);
            put(b, "[/INST]");
        } else {
            put(b, trail);
            if (fmt == FL_CHAT_MISTRAL_V3)
                chat_put_trimmed(b, m[i].content);
            else
                put(b, m[i].content);
            put(b, "</s>");
            inside = false;
        }
    }
}

static void apply_mistral_v7(struct sbuf *b, const struct fl_chat_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (is(m[i].role, "system")) {
            put(b, "[SYSTEM_PROMPT] ");
            put(b, m[i].content);
            put(b, "[/SYSTEM_PROMPT]");
        } else if (is(m[i].role, "user")) {
            put(b, "[INST] ");
            put(b, m[i].content);
            put(b, "[/INST]");
        } else {
            put(b, " ");
            put(b, m[i].content);
            put(b, "</s>");
        }
    }
}

static void apply_llama3(struct sbuf *b, const struct fl_chat_msg *m, size_t n, bool add)
{
    for (size_t i = 0; i < n; i++) {
        put(b, "<|start_header_id|>");
        put(b, m[i].role);
        put(b, "<|end_header_id|>\n\n");
        chat_put_trimmed(b, m[i].content);
        put(b, "<|eot_id|>");
    }
    if (add)
        put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void apply_deepseek(struct sbuf *b, bool v3, const struct fl_chat_msg *m, size_t n,
                           bool add)
{
    for (size_t i = 0; i < n; i++) {
        if (is(m[i].role, "system")) {
            put(b, m[i].content);
            put(b, "\n\n");
        } else if (is(m[i].role, "user")) {
            put(b, v3 ? "<｜User｜>" : "User: ");
            put(b, m[i].content);
            if (!v3)
                put(b, "\n\n");
        } else if (is(m[i].role, "assistant")) {
            put(b, v3 ? "<｜Assistant｜>" : "Assistant: ");
            put(b, m[i].content);
            put(b, "<｜end▁of▁sentence｜>");
        }
    }
    if (add)
        put(b, v3 ? "<｜Assistant｜>" : "Assistant:");
}

static void apply_harmony(struct sbuf *b, const struct fl_chat_msg *m, size_t n, bool add)
{
    for (size_t i = 0; i < n; i++) {
        put(b, "<|start|>");
        put(b, m[i].role);
        put(b, "<|message|>");
        put(b, m[i].content);
        put(b, is(m[i].role, "assistant") ? "<|return|>" : "<|end|>");
    }
    if (add)
        put(b, "<|start|>assistant");
}

/* llama.cpp's built-in kimi-k2: each turn's header, its content, <|im_end|>. */
static void apply_kimi_builtin(struct sbuf *b, const struct fl_chat_msg *m, size_t n, bool add)
{
    for (size_t i = 0; i < n; i++) {
        put(b, is(m[i].role, "system")      ? "<|im_system|>system<|im_middle|>"
               : is(m[i].role, "user")      ? "<|im_user|>user<|im_middle|>"
               : is(m[i].role, "assistant") ? "<|im_assistant|>assistant<|im_middle|>"
               : is(m[i].role, "tool")      ? "<|im_system|>tool<|im_middle|>"
                                            : "");
        put(b, m[i].content);
        put(b, "<|im_end|>");
    }
    if (add)
        put(b, "<|im_assistant|>assistant<|im_middle|>");
}

/* llama.cpp's built-in chatglm4 (its add_ass opening has no <think>). */
static void apply_chatglm4(struct sbuf *b, const struct fl_chat_msg *m, size_t n, bool add)
{
    put(b, "[gMASK]<sop>");
    for (size_t i = 0; i < n; i++) {
        put(b, "<|");
        put(b, m[i].role);
        put(b, "|>\n");
        put(b, m[i].content);
    }
    if (add)
        put(b, "<|assistant|>\n");
}

bool fl_chat_has_tools(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_CHATML || fmt == FL_CHAT_QWEN35 || fmt == FL_CHAT_QWEN3_CODER ||
           fmt == FL_CHAT_GLM45 || fmt == FL_CHAT_GLM47 || fmt == FL_CHAT_MINIMAX_M2 ||
           fmt == FL_CHAT_GPT_OSS || fmt == FL_CHAT_KIMI_K2_INSTRUCT ||
           fmt == FL_CHAT_KIMI_K2_THINKING || fmt == FL_CHAT_DEEPSEEK_V31 ||
           fmt == FL_CHAT_DEEPSEEK_V3_0324 || fmt == FL_CHAT_DEEPSEEK_R1 ||
           fmt == FL_CHAT_DEEPSEEK_V32 || fmt == FL_CHAT_MINIMAX_M3 || fmt == FL_CHAT_KIMI_K3;
}

int fl_chat_think_mode_from_name(const char *name)
{
    return !name                        ? -1
           : !strcmp(name, "enabled")   ? FL_THINK_MODE_ENABLED
           : !strcmp(name, "disabled")  ? FL_THINK_MODE_DISABLED
           : !strcmp(name, "adaptive")  ? FL_THINK_MODE_ADAPTIVE
                                        : -1;
}

int fl_chat_apply(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                  bool add_assistant, char **out)
{
    const struct fl_chat_opts o = { .add_assistant = add_assistant };
    return fl_chat_render(fmt, msgs, n, &o, out);
}

/* Where a format's answers write their reasoning, as llama-server's
 * template analysis finds the tags (what it continues a message with);
 * cut: where else a generation prompt is cut (Kimi K3's without thinking
 * opens its response part, which a continued message's reasoning comes
 * before). */
struct think_marks {
    const char *open, *close, *cut;
};

static const struct think_marks *think_marks(enum fl_chat_format fmt)
{
    static const struct think_marks qwen = { "<think>\n", "\n</think>\n\n", NULL },
                                    glm = { "<think>", "</think>\n", NULL },
                                    bare = { "<think>", "</think>", NULL },
                                    mm = { "<mm:think>", "</mm:think>", NULL },
                                    k3 = { "<|open|>think<|sep|>",
                                           "<|close|>think<|sep|><|open|>response<|sep|>",
                                           "<|open|>response<|sep|>" },
                                    harmony = { "<|channel|>analysis<|message|>",
                                                "<|end|><|start|>assistant<|channel|>final<|message|>",
                                                NULL };
    switch (fmt) {
    case FL_CHAT_CHATML:
    case FL_CHAT_QWEN35:
    case FL_CHAT_MINIMAX_M2: return &qwen;
    case FL_CHAT_GLM45: return &glm;
    case FL_CHAT_KIMI_K2_INSTRUCT:
    case FL_CHAT_KIMI_K2_THINKING:
    case FL_CHAT_GLM47:
    case FL_CHAT_DEEPSEEK_V31:
    case FL_CHAT_DEEPSEEK_V32:
    case FL_CHAT_DEEPSEEK_R1: return &bare;
    case FL_CHAT_GPT_OSS: return &harmony;
    case FL_CHAT_MINIMAX_M3: return &mm;
    case FL_CHAT_KIMI_K3: return &k3;
    default: return NULL;
    }
}

const char *fl_chat_reasoning_close(enum fl_chat_format fmt)
{
    const struct think_marks *t = think_marks(fmt);
    return t ? t->close : "";
}

bool fl_chat_opens_reasoning(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                             const struct fl_chat_opts *o)
{
    if (o->cont != FL_CHAT_CONTINUE_NONE)
        return o->cont == FL_CHAT_CONTINUE_REASONING && think_marks(fmt);
    if (fmt == FL_CHAT_DEEPSEEK_V31)
        return o->add_assistant && fl_chat_thinks(o) &&
               (!msgs || fl_chat_deepseek_v31_opens(msgs, n));
    if (fmt == FL_CHAT_DEEPSEEK_V32) /* after a user turn or the results */
        return o->add_assistant && fl_chat_thinks(o) &&
               (!msgs || fl_chat_deepseek_v32_opens(msgs, n));
    if (fmt == FL_CHAT_DEEPSEEK_R1) /* <think>\n whatever enable_thinking says */
        return o->add_assistant && (!msgs || fl_chat_deepseek_r1_opens(msgs, n));
    if (fmt == FL_CHAT_QWEN35 || fmt == FL_CHAT_GLM47) /* their openings: <think> unless
                                                       * enable_thinking=false */
        return o->add_assistant && !o->no_thinking;
    if (fmt == FL_CHAT_KIMI_K3) /* its think part, when it thinks */
        return o->add_assistant && fl_chat_thinks(o);
    if (fmt == FL_CHAT_MINIMAX_M3) /* thinking_mode "enabled" opens <mm:think> */
        return o->add_assistant && fl_chat_minimax_m3_mode(o) == FL_THINK_MODE_ENABLED;
    return fmt == FL_CHAT_MINIMAX_M2 && o->add_assistant;
}

const struct fl_reasoning_tags *fl_chat_reasoning_tags(enum fl_chat_format fmt)
{
    return fmt == FL_CHAT_GPT_OSS      ? &fl_harmony_tags
           : fmt == FL_CHAT_MINIMAX_M3 ? &fl_mm_think_tags
           : fmt == FL_CHAT_KIMI_K3    ? &fl_kimi_k3_tags
                                       : &fl_think_tags;
}

static int check_messages(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                          const char *const *tools, size_t n_tools)
{
    if ((!msgs && n) || (!tools && n_tools))
        return -EINVAL;
    bool calls = false;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content || (msgs[i].n_calls && !msgs[i].calls))
            return -EINVAL;
        for (size_t j = 0; j < msgs[i].n_calls; j++)
            if (!msgs[i].calls[j].name || !msgs[i].calls[j].arguments)
                return -EINVAL;
        calls |= msgs[i].n_calls > 0;
    }
    for (size_t i = 0; i < n_tools; i++)
        if (!tools[i])
            return -EINVAL;
    return (n_tools || calls) && !fl_chat_has_tools(fmt) ? -ENOTSUP : 0;
}

/* The last message continued: the messages before it without (a) and with
 * (b) the assistant's opening, and what b adds (llama.cpp's generation
 * prompt: past their common start) cut where the reasoning's tag starts;
 * then the tag, the message's reasoning, and for its content the closing
 * tag and the content. */
static int render_continued(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                            const struct fl_chat_opts *o, char **out)
{
    if (!n || !is(msgs[n - 1].role, "assistant"))
        return -EINVAL;
    struct fl_chat_opts before = *o;
    before.cont = FL_CHAT_CONTINUE_NONE;
    char *a = NULL, *b = NULL;
    before.add_assistant = false;
    int na = fl_chat_render(fmt, msgs, n - 1, &before, &a);
    before.add_assistant = true;
    int nb = na < 0 ? na : fl_chat_render(fmt, msgs, n - 1, &before, &b);
    if (nb < 0) {
        free(a);
        free(b);
        return nb;
    }
    size_t common = 0;
    while (common < (size_t)na && common < (size_t)nb && a[common] == b[common])
        common++;
    const char *gen = b + common;
    const struct think_marks *t = think_marks(fmt);
    const char *cut = t ? strstr(gen, t->open) : NULL;
    if (!cut && t && t->cut)
        cut = strstr(gen, t->cut);
    struct sbuf s = { .p = a, .n = (size_t)na, .cap = (size_t)na + 1 };
    put_n(&s, gen, cut ? (size_t)(cut - gen) : strlen(gen));
    const struct fl_chat_msg *m = &msgs[n - 1];
    const bool content = o->cont == FL_CHAT_CONTINUE_CONTENT;
    if (t) {
        put(&s, t->open);
        put(&s, m->reasoning ? m->reasoning : "");
        put(&s, content ? t->close : "");
    }
    put(&s, content ? m->content : "");
    free(b);
    if (s.err) {
        free(s.p);
        return s.err;
    }
    *out = s.p;
    return (int)s.n;
}

int fl_chat_render(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                   const struct fl_chat_opts *o, char **out)
{
    struct sbuf b = { 0 };
    const bool add_assistant = o->add_assistant;
    *out = NULL;
    int rc = check_messages(fmt, msgs, n, o->tools, o->n_tools);
    if (rc)
        return rc;
    if (o->cont != FL_CHAT_CONTINUE_NONE)
        return render_continued(fmt, msgs, n, o, out);
    switch (fmt) {
    case FL_CHAT_CHATML: apply_chatml(&b, msgs, n, o); break;
    case FL_CHAT_QWEN35: rc = fl_chat_qwen35(&b, msgs, n, o); break;
    case FL_CHAT_QWEN3_CODER: rc = fl_chat_qwen3_coder(&b, msgs, n, o); break;
    case FL_CHAT_LLAMA2:
    case FL_CHAT_LLAMA2_SYS:
    case FL_CHAT_LLAMA2_SYS_BOS:
    case FL_CHAT_LLAMA2_SYS_STRIP: apply_llama2(&b, fmt, msgs, n); break;
    case FL_CHAT_MISTRAL_V1:
    case FL_CHAT_MISTRAL_V3:
    case FL_CHAT_MISTRAL_V3_TEKKEN: apply_mistral(&b, fmt, msgs, n); break;
    case FL_CHAT_MISTRAL_V7: apply_mistral_v7(&b, msgs, n); break;
    case FL_CHAT_LLAMA3: apply_llama3(&b, msgs, n, add_assistant); break;
    case FL_CHAT_DEEPSEEK2: apply_deepseek(&b, false, msgs, n, add_assistant); break;
    case FL_CHAT_DEEPSEEK3: apply_deepseek(&b, true, msgs, n, add_assistant); break;
    case FL_CHAT_DEEPSEEK_V31: rc = fl_chat_deepseek_v31(&b, msgs, n, o); break;
    case FL_CHAT_DEEPSEEK_V32: rc = fl_chat_deepseek_v32(&b, msgs, n, o); break;
    case FL_CHAT_DEEPSEEK_V3_0324: rc = fl_chat_deepseek_v3(&b, msgs, n, o, false); break;
    case FL_CHAT_DEEPSEEK_R1: rc = fl_chat_deepseek_v3(&b, msgs, n, o, true); break;
    case FL_CHAT_HARMONY: apply_harmony(&b, msgs, n, add_assistant); break;
    case FL_CHAT_GPT_OSS: rc = fl_chat_gpt_oss(&b, msgs, n, o); break;
    case FL_CHAT_KIMI_K2: apply_kimi_builtin(&b, msgs, n, add_assistant); break;
    case FL_CHAT_KIMI_K2_INSTRUCT: rc = fl_chat_kimi(&b, msgs, n, o, false); break;
    case FL_CHAT_KIMI_K2_THINKING: rc = fl_chat_kimi(&b, msgs, n, o, true); break;
    case FL_CHAT_CHATGLM4: apply_chatglm4(&b, msgs, n, add_assistant); break;
    case FL_CHAT_GLM45: rc = fl_chat_glm45(&b, msgs, n, o, false); break;
    case FL_CHAT_GLM47: rc = fl_chat_glm45(&b, msgs, n, o, true); break;
    case FL_CHAT_MINIMAX_M2: rc = fl_chat_minimax_m2(&b, msgs, n, o); break;
    case FL_CHAT_MINIMAX_M3: rc = fl_chat_minimax_m3(&b, msgs, n, o); break;
    case FL_CHAT_KIMI_K3: rc = fl_chat_kimi_k3(&b, msgs, n, o); break;
    default: return -EINVAL;
    }
    put(&b, ""); /* an empty conversation is still a string */
    if (rc || b.err) {
        free(b.p);
        return rc ? rc : b.err;
    }
    *out = b.p;
    return (int)b.n;
}

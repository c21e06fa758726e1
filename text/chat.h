/* chat.h: renders a conversation into the prompt text a model was trained
 * on, for the families faultline runs (llama.cpp's built-in templates in
 * llama-chat.cpp, not a Jinja engine):
 *
 *   chatml        <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
 *                 (with tools and tool calls as Qwen3's template writes them)
 *   llama2 / mistral   [INST] user [/INST]answer</s>...  (several variants)
 *   llama3        <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
 *   deepseek2     User: ...\n\nAssistant: ...<｜end▁of▁sentence｜>  ... Assistant:
 *   deepseek3     <｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜>
 *   harmony       <|start|>role<|message|>content<|end|> ... <|start|>assistant
 *                 (llama.cpp's built-in "gpt-oss")
 *   kimi-k2       <|im_user|>user<|im_middle|>...<|im_end|> ... <|im_assistant|>assistant<|im_middle|>
 *                 (llama.cpp's built-in; kimi-k2-instruct and kimi-k2-thinking:
 *                 the models' own templates, a default system turn, tools)
 *   openai-gpt-oss   gpt-oss's own template: its system turn (date, reasoning
 *                 effort, channels), the first system message as developer
 *                 instructions, answers in the final channel
 *   chatglm4      [gMASK]<sop><|role|>\ncontent ... <|assistant|>\n
 *   glm-4.5       [gMASK]<sop><|user|>\n... <|assistant|>\n<think></think>\n... <|assistant|>
 *                 (GLM-4.5/4.6/4.7's Jinja: tools, <arg_key> calls, <|observation|> results)
 *   minimax-m2    ]~!b[]~b]system\n...[e~[\n]~b]user\n...[e~[\n ... ]~b]ai\n<think>\n
 *   minimax-m3    ]~!b[]~b]system\n...[e~[\n]~b]developer\n...[e~[\n ... ]~b]ai\n
 *                 (MiniMax-M3's: <mm:think>, its thinking_mode, namespaced tool tags)
 *   kimi-k3       <|open|>message role="user"<|sep|>...<|close|>message<|sep|><|end_of_msg|>
 *                 ... <|open|>message role="assistant"<|sep|><|open|>think<|sep|>
 *
 * The result contains special-token texts: tokenize it with parse_special
 * (and add_special, so the file's BOS is added). */
#ifndef FL_CHAT_H
#define FL_CHAT_H

#include <stdbool.h>
#include <stddef.h>

struct gguf_file;

enum fl_chat_format {
    FL_CHAT_UNKNOWN = 0,
    FL_CHAT_CHATML,
    FL_CHAT_QWEN35,           /* Qwen3.5's own template (chatml, XML tool calls, <think>) */
    FL_CHAT_QWEN3_CODER,      /* Qwen3-Coder's own template (chatml, XML tool calls) */
    FL_CHAT_LLAMA2,           /* [INST] sys\nuser [/INST]answer</s> */
    FL_CHAT_LLAMA2_SYS,       /* ... with <<SYS>>\n..\n<</SYS>>\n\n */
    FL_CHAT_LLAMA2_SYS_BOS,   /* ... and <s> before each later [INST] */
    FL_CHAT_LLAMA2_SYS_STRIP, /* ... with contents trimmed */
    FL_CHAT_MISTRAL_V1,       /*  [INST] user [/INST] answer</s> */
    FL_CHAT_MISTRAL_V3,       /* [INST] user[/INST] answer</s> */
    FL_CHAT_MISTRAL_V3_TEKKEN,/* [INST]user[/INST]answer</s> */
    FL_CHAT_MISTRAL_V7,       /* [SYSTEM_PROMPT] ..[/SYSTEM_PROMPT][INST] ..[/INST] */
    FL_CHAT_LLAMA3,
    FL_CHAT_DEEPSEEK2,
    FL_CHAT_DEEPSEEK3,
    FL_CHAT_DEEPSEEK_V31,     /* DeepSeek V3.1's own template (tools, <think>) */
    FL_CHAT_DEEPSEEK_V3_0324, /* DeepSeek V3-0324's own template (```json calls) */
    FL_CHAT_DEEPSEEK_R1,      /* DeepSeek R1's own template (opens <think>\n) */
    FL_CHAT_HARMONY,          /* gpt-oss: llama.cpp's built-in template */
    FL_CHAT_GPT_OSS,          /* gpt-oss's own template */
    FL_CHAT_KIMI_K2,          /* llama.cpp's built-in kimi-k2 */
    FL_CHAT_KIMI_K2_INSTRUCT, /* Kimi K2 Instruct's own template (tools) */
    FL_CHAT_KIMI_K2_THINKING, /* Kimi K2 Thinking's own template (tools, <think>) */
    FL_CHAT_CHATGLM4,         /* llama.cpp's built-in chatglm4 */
    FL_CHAT_GLM45,            /* GLM-4.5 / 4.6's own template (tools, <think>) */
    FL_CHAT_GLM47,            /* GLM-4.7's own template (its calls without newlines) */
    FL_CHAT_MINIMAX_M2,       /* its default system turn when none is given */
    FL_CHAT_DEEPSEEK_V32,     /* DeepSeek V3.2's own template (DSML calls, <think>) */
    FL_CHAT_MINIMAX_M3,       /* MiniMax-M3's own template (<mm:think>, ]<]minimax[>[ calls) */
    FL_CHAT_KIMI_K3,          /* Kimi K3's own template (<|open|>TAG<|sep|> parts, XTML calls) */
};

/* A call an assistant message made (OpenAI's tool_calls[i].function). */
struct fl_chat_tool_call {
    const char *name;
    const char *arguments; /* JSON text, as the request gave it */
    const char *id;        /* tool_calls[i].id, or NULL */
};

struct fl_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content;
    const char *reasoning; /* an assistant's reasoning_content, or NULL: the
                            * templates then split it from content's <think> */
    const struct fl_chat_tool_call *calls; /* an assistant's tool calls, or NULL */
    size_t n_calls;
    const char *name;         /* the message's "name" (a tool result's "tool", else its
                               * "name"), or NULL */
    const char *tool_call_id; /* a tool result's "tool_call_id" (else its "id"), or NULL */
};

/* Names as llama.cpp's --chat-template spells them ("chatml", "llama2",
 * "llama2-sys", "mistral-v7", "deepseek3", "gpt-oss", ...); "harmony" is
 * accepted for llama.cpp's built-in gpt-oss; faultline's own names for the
 * models' own templates: "glm-4.5", "minimax-m2", "openai-gpt-oss",
 * "deepseek-v3.1", "deepseek-v3.2", "kimi-k2-instruct", "kimi-k2-thinking", "qwen3.5",
 * "qwen3-coder", "glm-4.7", "minimax-m3", "kimi-k3". Unknown
 * names give FL_CHAT_UNKNOWN. */
enum fl_chat_format fl_chat_format_from_name(const char *name);
const char *fl_chat_format_name(enum fl_chat_format fmt);

/* Picks the format: markers in the Jinja template text (may be NULL) as
 * llama.cpp sniffs them, else the architecture's family default (qwen* ->
 * chatml, qwen35moe -> qwen3.5, llama -> llama2 [INST], deepseek2 -> deepseek3, gpt-oss ->
 * openai-gpt-oss, glm4moe -> glm-4.5, minimax-m2 -> minimax-m2, minimax-m3 ->
 * minimax-m3, kimi-k3 -> kimi-k3). FL_CHAT_UNKNOWN
 * when neither says. */
enum fl_chat_format fl_chat_detect(const char *arch, const char *tmpl);

/* The same from a file's general.architecture and tokenizer.chat_template. */
enum fl_chat_format fl_chat_detect_file(const struct gguf_file *f);

/* Renders n messages; with add_assistant the assistant's opening is
 * appended (formats whose user turn already ends with it add nothing).
 * *out is a malloc'd NUL-terminated string. Returns its length, -EINVAL
 * for an unknown format or a message without role/content, -ENOMEM. */
int fl_chat_apply(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                  bool add_assistant, char **out);

/* Whether fmt has a tool-call format here (text/tool-calls.h reads the
 * calls back):
 *   chatml   as Qwen3's template writes it: the tools' JSON in the system
 *            turn, calls as <tool_call> blocks of {"name", "arguments"},
 *            results as <tool_response> blocks in a user turn;
 *   qwen3.5, qwen3-coder  as Qwen3.5's and Qwen3-Coder's: the tools in the
 *            system turn (Qwen3.5's as JSON lines, Qwen3-Coder's as XML),
 *            calls as <tool_call>\n<function=NAME>\n<parameter=K>\nV\n
 *            </parameter>\n</function>\n</tool_call> (strings bare, other
 *            values as JSON), results as <tool_response> blocks in a user turn;
 *   glm-4.7  as glm-4.5 without the newlines around the pairs (GLM-4.7's);
 *   glm-4.5  as GLM-4.5/4.6's: calls as <tool_call>NAME\n<arg_key>K</arg_key>
 *            \n<arg_value>V</arg_value>\n...</tool_call> (a call's arguments
 *            must be a JSON object), results in an <|observation|> turn;
 *   minimax-m2  as MiniMax-M2's: the functions' JSON as <tool> lines in the
 *            system turn, calls as <minimax:tool_call> blocks of <invoke
 *            name="NAME"> with <parameter name="K">V</parameter> lines,
 *            results as <response> lines in a tool turn (-EINVAL for one
 *            with no call before it, where the template raises);
 *   minimax-m3  as MiniMax-M3's: the same tools and results, calls as one
 *            ]<]minimax[>[<tool_call> block of ]<]minimax[>[<invoke
 *            name="NAME"> with a ]<]minimax[>[<K>V]<]minimax[>[</K> tag per
 *            argument (every tag after that namespace token; objects and
 *            arrays as nested tags, an array's as <item>s; strings bare,
 *            booleans and numbers as JSON, nulls left out);
 *   kimi-k3  as Kimi K3's: the tools as one JSON list (keys sorted) in a
 *            tool-declare system message, calls as a <|open|>tools<|sep|>
 *            part of <|open|>call tool="NAME" index="I"<|sep|> with an
 *            <|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|>
 *            per argument (T its JSON type, V a string as it is, else JSON),
 *            results as tool messages named by the call they answer (by
 *            tool_call_id, in the calls' order; else in order);
 *   openai-gpt-oss  as gpt-oss's: the functions as a TypeScript namespace in
 *            the developer turn, a call (an answer's first) as
 *            <|start|>assistant to=functions.NAME<|channel|>commentary json
 *            <|message|>ARGS<|call|>, results from functions.NAME in the
 *            commentary channel (-EINVAL for one with no call before it);
 *   kimi-k2-instruct, kimi-k2-thinking  as Kimi K2's: the tools' JSON in a
 *            tool_declare turn, calls as <|tool_calls_section_begin|> of
 *            <|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>
 *            ARGS<|tool_call_end|> entries, results as "## Return of
 *            functions.NAME:INDEX" in a tool turn;
 *   deepseek-v3.1  as DeepSeek V3.1's: the tools are not described (the
 *            template has no place for them), calls as one
 *            <｜tool▁calls▁begin｜> of <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>
 *            ARGS<｜tool▁call▁end｜> entries, results between
 *            <｜tool▁output▁begin｜> and <｜tool▁output▁end｜>. */
bool fl_chat_has_tools(enum fl_chat_format fmt);

/* Whether the last message, an assistant's, is continued (llama-server's
 * continue_final_message, a "prefill"): not at all (written and closed as
 * any other), in its content (its reasoning closed first), or in its
 * reasoning. */
enum fl_chat_continue { FL_CHAT_CONTINUE_NONE = 0, FL_CHAT_CONTINUE_CONTENT, FL_CHAT_CONTINUE_REASONING };

/* MiniMax-M3's namespace token: its template writes it before every tool
 * tag (]<]minimax[>[<tool_call>, ]<]minimax[>[<invoke name="...">, ...). */
#define FL_MINIMAX_M3_NS "]<]minimax[>["

/* MiniMax-M3's thinking_mode (its template's own kwarg): not given (the
 * template's adaptive, or disabled under no_thinking), or as named. */
enum fl_chat_think_mode {
    FL_THINK_MODE_DEFAULT = 0,
    FL_THINK_MODE_ENABLED,  /* its answer opens <mm:think> */
    FL_THINK_MODE_DISABLED, /* its answer starts after </mm:think> */
    FL_THINK_MODE_ADAPTIVE, /* the model decides */
};
/* "enabled", "disabled", "adaptive"; -1 for another word. */
int fl_chat_think_mode_from_name(const char *name);

/* How a conversation is rendered. */
struct fl_chat_opts {
    const char *const *tools; /* n_tools tool definitions (each the JSON text */
    size_t n_tools;           /* of a request's tools[i], {"type": "function", ...}) */
    bool add_assistant;       /* the assistant's opening at the end */
    bool no_thinking;         /* the templates' enable_thinking=false: Qwen3's
                               * opening holds an empty <think></think>, GLM's
                               * too and its user turns end with /nothink;
                               * other formats have no such switch */
    const char *reasoning_effort; /* gpt-oss's "Reasoning: X" (NULL: medium) */
    int ds_thinking;          /* DeepSeek V3.1's own "thinking" kwarg, which its template reads
                               * before enable_thinking: 0 not given, 1 on, -1 off */
    bool keep_reasoning;      /* GLM-4.7's clear_thinking=false: every answer in the history
                               * keeps its reasoning, not only those after the last user turn */
    enum fl_chat_think_mode think_mode; /* MiniMax-M3's thinking_mode */
    const char *thinking_effort; /* Kimi K3's thinking_effort: low, high, max (NULL: max;
                                  * "": none, its note left out) */
    /* the last message continued (as llama-server does it: the messages
     * before it with the assistant's opening, the opening cut where the
     * format's reasoning starts, then the reasoning's opening tag, the
     * message's reasoning, and for its content the closing tag and the
     * content; a format without reasoning tags takes the content alone) */
    enum fl_chat_continue cont;
};

/* The thinking mode MiniMax-M3's template is rendered with for o: its
 * think_mode, else disabled under no_thinking (llama-server's switch,
 * which that template itself does not read), else adaptive. */
enum fl_chat_think_mode fl_chat_minimax_m3_mode(const struct fl_chat_opts *o);

/* Whether the templates that read a "thinking" kwarg (DeepSeek V3.1's and
 * V3.2's, Kimi K3's) think for o: that kwarg, else not under no_thinking
 * (llama-server's enable_thinking, which Kimi K3's does not read), else
 * they do. */
bool fl_chat_thinks(const struct fl_chat_opts *o);

/* fl_chat_apply with options: -ENOTSUP when tools or calls are given and
 * fmt has no tool format; -EINVAL when o->cont is set and the last message
 * is no assistant's. */
int fl_chat_render(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                   const struct fl_chat_opts *o, char **out);

/* Whether the prompt rendered from msgs[0..n) with o leaves the model
 * inside its reasoning (MiniMax-M2's opening is "]~b]ai\n<think>\n",
 * DeepSeek V3.1's "<｜Assistant｜><think>" after a user's turn): its answer
 * starts with the reasoning, not with <think> (text/reasoning.h); so does
 * one that continues a message's reasoning (o->cont) in a format with
 * reasoning tags. msgs NULL: a conversation that ends with a user's turn. */
bool fl_chat_opens_reasoning(enum fl_chat_format fmt, const struct fl_chat_msg *msgs, size_t n,
                             const struct fl_chat_opts *o);

/* What closes fmt's reasoning after a continued message's reasoning (as
 * its template writes an answer's: "\n</think>\n\n" for chatml, gpt-oss's
 * "<|end|><|start|>assistant<|channel|>final<|message|>", ...); "" for a
 * format without reasoning tags. */
const char *fl_chat_reasoning_close(enum fl_chat_format fmt);

/* The tags fmt's answers write their reasoning between: gpt-oss's harmony
 * channels for openai-gpt-oss, <think> for every other format. */
struct fl_reasoning_tags;
const struct fl_reasoning_tags *fl_chat_reasoning_tags(enum fl_chat_format fmt);

#endif

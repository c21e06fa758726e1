/* tool-calls.h: the tool calls in a model's answer, in the format the chat
 * format taught it (text/chat.h's fl_chat_render). chatml (Qwen3,
 * Hermes): each call is a block
 *
 *   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
 *
 * glm-4.5 (GLM-4.5/4.6/4.7): each call is a block
 *
 *   <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>
 *
 * (a value that reads as JSON other than a string is taken as that JSON).
 * minimax-m2 (MiniMax-M2): a block holds one or more calls
 *
 *   <minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>
 *   \n</invoke>\n</minimax:tool_call>
 *
 * (values as GLM's). qwen3.5 and qwen3-coder (Qwen3.5/3.6, Qwen3-Coder):
 * each call is a block
 *
 *   <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>
 *   \n</tool_call>
 *
 * (values as GLM's, less the newline on each side). kimi-k2-* and deepseek-v3.1: a section holds one or
 * more calls, each NAME (Kimi's functions.NAME:INDEX) and a JSON object
 *
 *   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}
 *   <｜tool▁call▁end｜><｜tool▁calls▁end｜>
 *
 * The text outside the blocks is the answer's content. */
#ifndef FL_TEXT_TOOL_CALLS_H
#define FL_TEXT_TOOL_CALLS_H

#include <stdbool.h>
#include <stddef.h>

#include "text/chat.h"

struct fl_tool_call {
    char *name;
    char *arguments; /* compact JSON text of an object */
};

struct fl_tool_answer {
    char *content;               /* the text outside the calls, trimmed */
    size_t content_len;
    struct fl_tool_call *calls;
    int n_calls;
};

/* Reads text[0..len). Every block must hold a call: chatml's a JSON object
 * with a string "name" and an object "arguments" (or a string holding
 * one), GLM's a name and key/value pairs, no key twice; when one does not, or a block is not closed, the whole text is content and n_calls is 0
 * (an answer is never half calls). 0, or -ENOMEM; -ENOTSUP for a format
 * without tool calls. */
int fl_tool_calls_parse(enum fl_chat_format fmt, const char *text, size_t len,
                        struct fl_tool_answer *out);
void fl_tool_answer_free(struct fl_tool_answer *a);
/* An answer that is all content: text[0..len) copied. 0 or -ENOMEM. */
int fl_tool_answer_content(const char *text, size_t len, struct fl_tool_answer *out);

/* A function's name as OpenAI allows them (and '.', which some clients
 * use): 1-64 of [A-Za-z0-9_-.]. The formats write it into the prompt as is. */
bool fl_tool_name_ok(const char *s, size_t n);

/* The tag that opens fmt's block of calls (<tool_call>, <minimax:tool_call>,
 * <|tool_calls_section_begin|>, Kimi K3's <|open|>tools<|sep|>, ...), and
 * what its template writes right before it that is neither content nor a
 * call ("": nothing; Kimi K3's close of its response part, which a model
 * may also leave out). */
const char *fl_tool_calls_block_open(enum fl_chat_format fmt);
const char *fl_tool_calls_block_lead(enum fl_chat_format fmt);

/* The tag that closes fmt's block of calls (</tool_call>,
 * </minimax:tool_call>, <|tool_calls_section_end|>): a forced call's
 * answer is closed with it when the model ends without writing it. */
const char *fl_tool_calls_block_close(enum fl_chat_format fmt);

/* A call an answer still being written has begun (tool-stream.c). */
struct fl_tool_partial {
    char *name;      /* whole */
    char *args;      /* the start of the arguments fl_tool_calls_parse will give the call
                      * (compact JSON), which more text only extends */
    size_t args_len;
    bool whole;      /* args are all of them */
};
/* The calls of the growing answer text[0..len) so far, in order: the i-th
 * is the answer's i-th call if the answer ends with its calls well-formed
 * (its name, its arguments or their start). A call is counted once its
 * name is whole and its arguments' object has begun. The count (*out:
 * fl_tool_partials_free), or -ENOMEM. */
int fl_tool_calls_partial(enum fl_chat_format fmt, const char *text, size_t len,
                          struct fl_tool_partial **out);
void fl_tool_partials_free(struct fl_tool_partial *p, int n);

/* How many leading bytes of a growing answer are content for certain: up
 * to the first call's opening, or to where a partial one might start at
 * the end. A stream sends those and holds the rest until the answer ends. */
size_t fl_tool_calls_content_prefix(enum fl_chat_format fmt, const char *text, size_t len);

#endif

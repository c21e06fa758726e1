/* tool-calls-impl.h: inside the text module, what tool-calls.c shares with
 * tool-stream.c (the calls of an answer still being written). Not part of
 * the module's interface (tool-calls.h). */
#ifndef FL_TEXT_TOOL_CALLS_IMPL_H
#define FL_TEXT_TOOL_CALLS_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "text/tool-calls.h"

/* The entries of a section of calls (Kimi K2's, DeepSeek's): begin NAME
 * mid ARGS end each; fenced: DeepSeek V3-0324's and R1's, whose mid is
 * followed by TYPE<sep>NAME\n```json\n. */
struct fl_tool_entry_tags {
    const char *begin, *mid, *end;
    bool fenced;
};
/* fmt's, or NULL: its calls do not come as such entries. */
const struct fl_tool_entry_tags *fl_tool_entry_tags(enum fl_chat_format fmt);

/* The XML-style calls (MiniMax-M2's <invoke name="NAME">, Qwen3.5's and
 * Qwen3-Coder's <function=NAME>, DeepSeek V3.2's <｜DSML｜invoke
 * name="NAME">): the tags around a call's name and its pairs, the pairs'
 * around key and value, whether a value loses the newline the template
 * writes on each side of it, and whether the key is followed by its type
 * (DeepSeek V3.2: key_end is `" string="`, then `true">` before a string
 * taken as it is or `false">` before JSON). */
struct fl_tool_xml_tags {
    const char *call, *name_end, *call_end, *key, *key_end, *value_end;
    bool newlines, typed;
};
/* fmt's, or NULL: its calls are not such XML. */
const struct fl_tool_xml_tags *fl_tool_xml_tags(enum fl_chat_format fmt);

/* One block's inside s[0..n): its calls appended to a->calls (a's
 * content untouched); -EINVAL when it is not only calls, -ENOMEM. */
int fl_tool_read_block(enum fl_chat_format fmt, const char *s, size_t n, struct fl_tool_answer *a);

/* gpt-oss's call in text[0..len) (its content put into a->content, which
 * holds len + 1 bytes): 0, -EINVAL when there is none, -ENOMEM. */
int fl_tool_read_gpt_oss(const char *text, size_t len, struct fl_tool_answer *a);

/* The header of gpt-oss's call in text[0..len) (to=functions.NAME ...
 * <|message|>): where its <|message|> starts, or NULL while there is no
 * whole one; *name and *name_n: the function's name as written. */
const char *fl_tool_gpt_oss_header(const char *text, size_t len, const char **name,
                                   size_t *name_n);

#endif

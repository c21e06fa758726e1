/* reasoning.h: the reasoning ("thinking") at the start of an answer, as
 * thinking models write it (Qwen3, QwQ, DeepSeek-R1, GLM-4.5, MiniMax-M2):
 *
 *     <think> REASONING </think> ANSWER
 *
 * read as llama-server's "deepseek" reasoning format reads it: blanks
 * before <think> are skipped; the reasoning runs to the first </think>
 * (or to the end of an answer that never closes it) with the blanks
 * around it trimmed, and one of only blanks is none; the answer starts
 * after the blanks that follow </think>. An answer that does not start
 * with <think> is all answer, blanks kept. When the prompt itself opened
 * the reasoning (MiniMax-M2's ends with "<think>\n"), the answer starts
 * inside it.
 *
 * A growing answer (a stream) is split too: the parts it gives never
 * change as bytes are appended (blanks and a partial tag at the end are
 * held back), so sending each part's growth sends, in the end, exactly the
 * finished answer's parts. */
#ifndef FL_TEXT_REASONING_H
#define FL_TEXT_REASONING_H

#include <stdbool.h>
#include <stddef.h>

enum fl_reasoning_state {
    FL_REASONING_UNDECIDED = 0, /* blanks, or the start of "<think>", so far */
    FL_REASONING_NONE,          /* no reasoning: all answer */
    FL_REASONING_OPEN,          /* inside the reasoning (no </think> yet) */
    FL_REASONING_CLOSED,        /* </think> written: the answer follows */
};

struct fl_reasoning_split {
    enum fl_reasoning_state state;
    size_t r_off, r_len;  /* the reasoning: s[r_off, r_off + r_len) */
    size_t c_off, c_len;  /* the answer: s[c_off, c_off + c_len) */
    size_t settled;       /* s[0, settled) is decided: nothing before it is held back */
};

/* The tags a format writes its reasoning between, what opens the answer
 * after it, and what opens an answer written without reasoning ("":
 * nothing): <think> ... </think>, or gpt-oss's harmony channels,
 * <|channel|>analysis<|message|> ... <|end|> then
 * <|start|>assistant<|channel|>final<|message|> ANSWER, or at once
 * <|channel|>final<|message|> ANSWER, or MiniMax-M3's <mm:think> ...
 * </mm:think> ANSWER, or at once </mm:think> ANSWER. Text that does not open the answer
 * where one is expected (another channel) is all answer, as written.
 * Where the answer is a tagged part of its own (Kimi K3's: <|open|>think
 * <|sep|> ... <|close|>think<|sep|><|open|>response<|sep|> ANSWER
 * <|close|>response<|sep|> ...), end (when not NULL) ends it, unless a
 * block of tool calls opens first (block ... block_end: the answer goes on
 * through it, for the calls to be read from it), or the end is lead and
 * the block opens right after it (K3's response part closed before its
 * tools part; a model may also skip the response part or leave it open). */
struct fl_reasoning_tags {
    const char *open, *close, *answer, *direct;
    const char *end, *block, *block_end, *lead;
};
extern const struct fl_reasoning_tags fl_think_tags, fl_harmony_tags, fl_mm_think_tags,
    fl_kimi_k3_tags;

/* Splits s[0, n) at tags t (s may be NULL when n is 0). */
void fl_reasoning_split_tags(const struct fl_reasoning_tags *t, const char *s, size_t n,
                             bool opened, bool done, struct fl_reasoning_split *out);

/* The same with <think> tags. Splits s[0, n) (s may be NULL when n is 0). opened: the prompt left the
 * model inside its reasoning.
 * done: the answer is finished (nothing held back). */
void fl_reasoning_split(const char *s, size_t n, bool opened, bool done,
                        struct fl_reasoning_split *out);

#endif

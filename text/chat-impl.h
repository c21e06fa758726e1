/* chat-impl.h: inside the text module, what chat.c shares with the formats
 * rendered in files of their own (chat-gpt-oss.c). Not part of the
 * module's interface (chat.h). */
#ifndef FL_TEXT_CHAT_IMPL_H
#define FL_TEXT_CHAT_IMPL_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"

/* A growing string; the first allocation failure sticks in err. */
struct sbuf {
    char *p;
    size_t n, cap;
    int err;
};

static inline void put_n(struct sbuf *b, const char *s, size_t len)
{
    if (b->err)
        return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->err = -ENOMEM;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static inline void put(struct sbuf *b, const char *s)
{
    put_n(b, s, strlen(s));
}

static inline bool is(const char *role, const char *name)
{
    return strcmp(role, name) == 0;
}

/* ---- pieces (chat-parts.c) ---- */

/* s[0..*n) without leading and trailing ASCII whitespace (llama.cpp's
 * trim; the templates' Python str.strip()). */
void chat_trim_span(const char **s, size_t *n);
void chat_put_trimmed_n(struct sbuf *b, const char *s, size_t n);
void chat_put_trimmed(struct sbuf *b, const char *s);
bool chat_ends_with(const char *s, const char *end);
/* Tool result i: consecutive results share one turn (opened by turn before
 * the first, ended by end after the last), each between open and close. */
void chat_put_result(struct sbuf *b, const struct fl_chat_msg *m, size_t n, size_t i,
                     const char *turn, const char *open, const char *close, const char *end);
/* An assistant message's reasoning and answer: its reasoning_content as
 * given (the content then whole, as the templates take it), else split
 * from its content as Qwen3's and GLM's templates split it: the reasoning
 * between <think> and the first </think>, the answer after the last
 * (leading newlines off both). Without </think> all of it is answer. */
void chat_reasoning_of(const struct fl_chat_msg *m, const char **r, size_t *rn, const char **a,
                       size_t *an);
/* The same with other tags than <think> and </think> (MiniMax-M3's). */
void chat_reasoning_tagged(const struct fl_chat_msg *m, const char *open, const char *close,
                           const char **r, size_t *rn, const char **a, size_t *an);
/* A call's arguments as a template's `| tojson` writes the object
 * llama-server passes it (Python's json.dumps): -EINVAL when they are no
 * JSON, -ENOMEM; either also sticks in b->err. */
int chat_put_tojson(struct sbuf *b, const char *arguments);
/* A call's arguments as the XML-style formats write them: open, the key,
 * mid, the value, close; strings as they are, other values as JSON.
 * -EINVAL when they are not an object. */
int chat_xml_args(struct sbuf *b, const char *arguments, const char *open, const char *mid,
                  const char *close);

/* ---- formats in files of their own ---- */

/* GLM-4.5/4.6's own template (glm47 false) or GLM-4.7's (chat-glm.c): 0,
 * or -EINVAL for a call whose arguments are no JSON object. */
int fl_chat_glm45(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                  const struct fl_chat_opts *o, bool glm47);

/* MiniMax-M2's own template (chat-minimax.c): 0, or -EINVAL for a result
 * with no call before it or a call whose arguments are no JSON object. */
int fl_chat_minimax_m2(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                       const struct fl_chat_opts *o);
/* MiniMax-M3's (chat-minimax.c): the same errors. */
int fl_chat_minimax_m3(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                       const struct fl_chat_opts *o);

/* Kimi K3's own template (chat-kimi-k3.c): 0, or -EINVAL where the
 * template raises (a thinking effort other than low, high and max; a
 * result with no name to be found) or a call's arguments are no JSON
 * object. */
int fl_chat_kimi_k3(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                    const struct fl_chat_opts *o);

/* Kimi K2's own templates (chat-kimi.c), Instruct's or Thinking's: 0 or
 * -ENOMEM. */
int fl_chat_kimi(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                 const struct fl_chat_opts *o, bool thinking);

/* DeepSeek V3.1's own template (chat-deepseek.c): 0, or -EINVAL for a
 * call whose arguments are no JSON. */
int fl_chat_deepseek_v31(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                         const struct fl_chat_opts *o);
/* Whether that template opens an answer after m[0..n) (its last turn in
 * place is a user's). */
bool fl_chat_deepseek_v31_opens(const struct fl_chat_msg *m, size_t n);
/* (whether its generation prompt opens the reasoning: chat.h's fl_chat_thinks) */

/* DeepSeek V3.2's own template (chat-deepseek.c): 0, or -EINVAL for a
 * call whose arguments are no JSON object or a tool that is no function. */
int fl_chat_deepseek_v32(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                         const struct fl_chat_opts *o);
/* Whether it opens an answer after m[0..n): after a user turn, or after
 * the results of the last calls. */
bool fl_chat_deepseek_v32_opens(const struct fl_chat_msg *m, size_t n);

/* DeepSeek V3-0324's (r1 false) or R1's own template (chat-deepseek.c):
 * 0, or -EINVAL for a call whose arguments are no JSON. */
int fl_chat_deepseek_v3(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                        const struct fl_chat_opts *o, bool r1);
/* Whether R1's template opens an answer (and its reasoning) after
 * m[0..n): not after a result. */
bool fl_chat_deepseek_r1_opens(const struct fl_chat_msg *m, size_t n);

/* Qwen3.5's and Qwen3-Coder's own templates (chat-qwen.c): 0, -EINVAL
 * where the templates raise (Qwen3.5: no user query, a system message not
 * first, an unknown role) or a call's arguments are no JSON object,
 * -ENOMEM. */
int fl_chat_qwen35(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                   const struct fl_chat_opts *o);
int fl_chat_qwen3_coder(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                        const struct fl_chat_opts *o);

/* gpt-oss's own template (chat-gpt-oss.c): 0, or -EINVAL where the
 * template raises. */
int fl_chat_gpt_oss(struct sbuf *b, const struct fl_chat_msg *m, size_t n,
                    const struct fl_chat_opts *o);

#endif

/* grammar.h: answers held to a GBNF grammar, as llama.cpp's `--grammar`,
 * `--grammar-file` and a request's `grammar` field read it (llama.cpp's
 * grammars/README.md is the reference for the syntax):
 *
 *   rule ::= alternatives      names of letters, digits and '-'; `root` starts
 *   "literal"  [a-z0-9_] [^\n]  .  (group)  x* x+ x? x{m} x{m,} x{m,n} x{,n}
 *   <[id]>  <token-text>  !<[id]>  !<token-text>   one token of the vocabulary
 *   # comments; newlines end a rule except inside ( ) and after a '|'.
 *   Escapes \x.. \u.... \U........ \t \r \n \\ \" \[ \] in literals and sets.
 *
 * Terminals are Unicode code points; the answer is read one byte at a time
 * (UTF-8), and a character begun in one token may end in the next one. A
 * state is the set of readings (stacks of what is still to match, innermost
 * last) the text so far leaves open; the text is a sentence of the grammar
 * when a reading has nothing left. Repetitions are rewritten into rules as
 * llama.cpp rewrites them. Refused at compile time, with one line naming
 * the place: syntax errors, undefined rules, a grammar without `root`, left
 * recursion (a rule that can reach itself before reading anything, which
 * would never end), a repetition count over 2,000 or a grammar over
 * FL_GRAMMAR_MAX_ELEMENTS, and a token that is not one token of the model.
 *
 * Limits, each a refusal of a reading (so the answer stays a prefix of a
 * sentence, but the grammar narrows): FL_GRAMMAR_MAX_STACKS readings at once
 * and FL_GRAMMAR_MAX_CELLS entries in all of them, nesting 1,024 deep while
 * a reading is expanded, and 1,024 references expanded for each reading
 * read on by a character (each partial reading is expanded once, so a
 * grammar such as `x x x ...` with `x ::= |`, which has exponentially many
 * ways to one reading, costs what its readings do). A grammar whose start
 * cannot be expanded within these limits is refused. Rule names are found
 * through a hash index and nullable rules by counting down, so compiling
 * is linear in the grammar's size. An answer whose readings are all dropped ends with
 * the "no token continues" error of a constrained answer. */
#ifndef FL_TEXT_GRAMMAR_H
#define FL_TEXT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define FL_GRAMMAR_MAX_STACKS 64
#define FL_GRAMMAR_MAX_CELLS 2048
#define FL_GRAMMAR_MAX_ELEMENTS 65000
#define FL_GRAMMAR_MAX_REPEAT 2000

struct fl_grammar;
struct fl_tokenizer;

/* Compiles n bytes of GBNF. tok resolves `<text>` tokens and bounds
 * `<[id]>` ones (NULL: tokens are refused). 0, -EINVAL with one line in err
 * ("grammar: line L, column C: ..."), or -ENOMEM. */
int fl_grammar_compile(const char *text, size_t n, const struct fl_tokenizer *tok,
                       struct fl_grammar **out, struct fl_err *err);
void fl_grammar_free(struct fl_grammar *g);
/* Whether text compiles (tok as for fl_grammar_compile): 0, or its error. */
int fl_grammar_check(const char *text, size_t n, const struct fl_tokenizer *tok,
                     struct fl_err *err);

/* The readings of the answer so far. Only the first n stacks' cells (up to
 * end[n - 1]) are live: copies of states copy those (fl_grammar_copy). */
struct fl_grammar_state {
    uint32_t partial;     /* the bits of a UTF-8 character begun, ... */
    uint8_t remain;       /* ... its continuation bytes still to come, ... */
    uint8_t length;       /* ... and in all (1 to 3; 0: none begun) */
    uint16_t n;           /* readings */
    uint16_t end[FL_GRAMMAR_MAX_STACKS]; /* reading i: cell[end[i-1] .. end[i]) */
    uint16_t cell[FL_GRAMMAR_MAX_CELLS]; /* element indices, innermost last */
};

/* The empty answer. */
void fl_grammar_init(const struct fl_grammar *g, struct fl_grammar_state *m);
void fl_grammar_copy(struct fl_grammar_state *dst, const struct fl_grammar_state *src);

/* out = in read on by one byte; false (out undefined) when no reading can. */
bool fl_grammar_step(const struct fl_grammar *g, const struct fl_grammar_state *in, uint8_t c,
                     struct fl_grammar_state *out);
/* The same, adding to *work what the step cost (readings looked at and
 * references expanded): a caller that walks many steps bounds its work by
 * it, deterministically. */
bool fl_grammar_step_work(const struct fl_grammar *g, const struct fl_grammar_state *in, uint8_t c,
                          struct fl_grammar_state *out, uint64_t *work);
/* Feeds n bytes; false as soon as one cannot be read (m is then as it was).
 * scratch is one more state's room. */
bool fl_grammar_feed(const struct fl_grammar *g, struct fl_grammar_state *m, const char *bytes,
                     size_t n, struct fl_grammar_state *scratch);

/* out = in read on by the whole token id (a token element `<...>` or
 * `!<...>` that matches it); false when none does. */
bool fl_grammar_take_token(const struct fl_grammar *g, const struct fl_grammar_state *in,
                           int32_t id, struct fl_grammar_state *out);
/* Each token a reading's next element `<...>` / `!<...>` allows goes to
 * allow(ctx, id, except): the id itself, or (except) every token but it. */
void fl_grammar_tokens_next(const struct fl_grammar *g, const struct fl_grammar_state *m,
                            void (*allow)(void *ctx, int32_t id, bool except), void *ctx);

/* Adds src's readings to dst's (both between characters); false when src
 * is inside a character or dst inside one. */
bool fl_grammar_merge(struct fl_grammar_state *dst, const struct fl_grammar_state *src);

/* Whether a and b are the same readings (what they allow next is the same),
 * and a hash of a state's readings for finding one. */
bool fl_grammar_same(const struct fl_grammar_state *a, const struct fl_grammar_state *b);
uint64_t fl_grammar_hash(const struct fl_grammar_state *m);

/* The text so far is a sentence (the answer may end here). */
bool fl_grammar_may_end(const struct fl_grammar_state *m);
/* ... and nothing may follow it. */
bool fl_grammar_done(const struct fl_grammar_state *m);

#endif

/* grammar-impl.h: inside the text module, the compiled grammar that the
 * GBNF reader (grammar-parse.c) writes and the matcher (grammar.c) reads.
 * Not part of the module's interface (grammar.h). */
#ifndef FL_TEXT_GRAMMAR_IMPL_H
#define FL_TEXT_GRAMMAR_IMPL_H

#include <stdint.h>

#include "text/grammar.h"

/* The elements of llama.cpp's grammar programs: a rule is its alternatives'
 * sequences, each ended by G_ALT (another follows) or G_END (the last). A
 * character set is G_CHAR or G_CHAR_NOT with its first code point, then
 * G_RNG_UPPER (the one before starts a range up to this one) and G_CHAR_ALT
 * (another member) elements. */
enum g_type {
    G_END,
    G_ALT,
    G_REF,       /* value: a rule */
    G_CHAR,      /* value: a code point */
    G_CHAR_NOT,
    G_RNG_UPPER,
    G_CHAR_ALT,
    G_ANY,       /* any one code point */
    G_TOKEN,     /* value: a token id */
    G_TOKEN_NOT, /* any token but value */
};

struct g_el {
    uint32_t type : 8, value : 24;
};

struct fl_grammar {
    struct g_el *el;     /* every rule's elements, rule after rule */
    uint32_t n_el;
    uint32_t *rule;      /* [n_rules]: where rule r's elements start in el */
    uint32_t n_rules, root;
};

#endif

/* json-prefix.c: a byte-at-a-time recogniser of JSON object prefixes
 * (json-prefix.h): a pushdown automaton over RFC 8259's grammar. */
#include "text/json-prefix.h"

#include <string.h>

/* What the next byte may be. */
enum lex {
    L_TOP,        /* before the object: '{' */
    L_OBJ_FIRST,  /* after '{': a key or '}' */
    L_OBJ_KEY,    /* after ',' in an object: a key */
    L_COLON,      /* after a key */
    L_VALUE,      /* after ':' or ',' in an array */
    L_ARR_FIRST,  /* after '[': a value or ']' */
    L_AFTER,      /* after a value: ',' or the container's close */
    L_STR_KEY,    /* inside a key string */
    L_STR_VAL,    /* inside a string value */
    L_NUMBER,     /* inside a number (sub: enum num) */
    L_LITERAL,    /* inside true / false / null (sub: which * 8 + bytes matched) */
    L_DONE,       /* the object is closed */
};

/* Inside a string, sub: 0 plain, 1 after '\', 2..5 hex digits of \u still due + 1. */
enum { S_PLAIN = 0, S_ESCAPE = 1, S_HEX = 2 };

enum num { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const literals[3] = { "true", "false", "null" };

void fl_json_prefix_init(struct fl_json_prefix *m)
{
    memset(m, 0, sizeof(*m));
    m->lex = L_TOP;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool push(struct fl_json_prefix *m, unsigned char open)
{
    if (m->depth == FL_JSON_MAX_DEPTH)
        return false;
    m->stack[m->depth++] = open;
    m->lex = open == '{' ? L_OBJ_FIRST : L_ARR_FIRST;
    return true;
}

/* A value ended (or a container closed): what follows it. */
static void value_done(struct fl_json_prefix *m)
{
    m->lex = m->depth ? L_AFTER : L_DONE;
    m->done = m->depth == 0;
}

static bool close_container(struct fl_json_prefix *m, unsigned char c)
{
    if (!m->depth || m->stack[m->depth - 1] != (c == '}' ? '{' : '['))
        return false;
    m->depth--;
    value_done(m);
    return true;
}

/* The first byte of a value. */
static bool value_start(struct fl_json_prefix *m, unsigned char c)
{
    if (c == '{' || c == '[')
        return push(m, c);
    if (c == '"') {
        m->lex = L_STR_VAL;
        m->sub = S_PLAIN;
        return true;
    }
    if (c == '-' || is_digit(c)) {
        m->lex = L_NUMBER;
        m->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
        return true;
    }
    for (int k = 0; k < 3; k++)
        if (c == (unsigned char)literals[k][0]) {
            m->lex = L_LITERAL;
            m->sub = (uint8_t)(k * 8 + 1);
            return true;
        }
    return false;
}

static bool string_byte(struct fl_json_prefix *m, unsigned char c)
{
    if (m->sub >= S_HEX) { /* \uXXXX */
        if (!is_hex(c))
            return false;
        m->sub = m->sub == S_HEX + 3 ? S_PLAIN : m->sub + 1;
        return true;
    }
    if (m->sub == S_ESCAPE) {
        if (c == 'u') {
            m->sub = S_HEX;
            return true;
        }
        m->sub = S_PLAIN;
        return strchr("\"\\/bfnrt", c) != NULL && c != 0;
    }
    if (c < 0x20)
        return false;
    if (c == '\\')
        m->sub = S_ESCAPE;
    else if (c == '"' && m->lex == L_STR_KEY)
        m->lex = L_COLON;
    else if (c == '"')
        value_done(m);
    return true;
}

/* A byte inside a number; false when it cannot continue it (the caller
 * then ends the number, if it may end there, and reads the byte again). */
static bool number_byte(struct fl_json_prefix *m, unsigned char c)
{
    static const uint8_t digit_to[] = { [N_MINUS] = N_INT, [N_ZERO] = 0xff, [N_INT] = N_INT,
                                        [N_DOT] = N_FRAC, [N_FRAC] = N_FRAC, [N_E] = N_EXP,
                                        [N_ESIGN] = N_EXP, [N_EXP] = N_EXP };
    if (is_digit(c)) {
        if (m->sub == N_MINUS && c == '0') {
            m->sub = N_ZERO;
            return true;
        }
        if (digit_to[m->sub] == 0xff)
            return false;
        m->sub = digit_to[m->sub];
        return true;
    }
    if (c == '.' && (m->sub == N_ZERO || m->sub == N_INT)) {
        m->sub = N_DOT;
        return true;
    }
    if ((c == 'e' || c == 'E') && (m->sub == N_ZERO || m->sub == N_INT || m->sub == N_FRAC)) {
        m->sub = N_E;
        return true;
    }
    if ((c == '+' || c == '-') && m->sub == N_E) {
        m->sub = N_ESIGN;
        return true;
    }
    return false;
}

static bool number_may_end(const struct fl_json_prefix *m)
{
    return m->sub == N_ZERO || m->sub == N_INT || m->sub == N_FRAC || m->sub == N_EXP;
}

static bool step(struct fl_json_prefix *m, unsigned char c)
{
    switch (m->lex) {
    case L_STR_KEY:
    case L_STR_VAL:
        return string_byte(m, c);
    case L_LITERAL: {
        const char *lit = literals[m->sub / 8];
        const int at = m->sub % 8;
        if (c != (unsigned char)lit[at])
            return false;
        m->sub++;
        if (!lit[at + 1])
            value_done(m);
        return true;
    }
    case L_NUMBER:
        if (number_byte(m, c))
            return true;
        if (!number_may_end(m))
            return false;
        value_done(m); /* the byte after the number is read as what follows it */
        return step(m, c);
    default:
        break;
    }
    if (is_ws(c)) /* between tokens, limited; none before the object */
        return m->lex != L_TOP && ++m->ws <= FL_JSON_MAX_WS;
    m->ws = 0;
    switch (m->lex) {
    case L_TOP:
        return c == '{' && push(m, c);
    case L_OBJ_FIRST:
    case L_OBJ_KEY:
        if (c == '}' && m->lex == L_OBJ_FIRST)
            return close_container(m, c);
        m->lex = L_STR_KEY;
        m->sub = S_PLAIN;
        return c == '"';
    case L_COLON:
        m->lex = L_VALUE;
        return c == ':';
    case L_ARR_FIRST:
        if (c == ']')
            return close_container(m, c);
        return value_start(m, c);
    case L_VALUE:
        return value_start(m, c);
    case L_AFTER:
        if (c == '}' || c == ']')
            return close_container(m, c);
        if (c != ',')
            return false;
        m->lex = m->stack[m->depth - 1] == '{' ? L_OBJ_KEY : L_VALUE;
        return true;
    default: /* L_DONE: nothing but whitespace */
        return false;
    }
}

bool fl_json_prefix_in_string(const struct fl_json_prefix *m)
{
    return (m->lex == L_STR_KEY || m->lex == L_STR_VAL) && m->sub == S_PLAIN;
}

bool fl_json_prefix_feed(struct fl_json_prefix *m, const char *bytes, size_t n)
{
    const struct fl_json_prefix start = *m;
    for (size_t i = 0; i < n; i++)
        if (!step(m, (unsigned char)bytes[i])) {
            *m = start;
            return false;
        }
    return true;
}

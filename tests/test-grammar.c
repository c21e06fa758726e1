/* test-grammar: text/grammar.h and constrain.h.
 * Cases written here from GBNF's rules: each text is read up to the byte
 * the case names, and is a sentence (or a whole one) as it says; UTF-8
 * characters split anywhere read the same. Regular grammars against their
 * regular expressions in PCRE2 (written here by hand): on random texts the
 * grammar reads a text exactly when PCRE2's hard partial match says it can
 * still become a match, and calls it a sentence exactly when PCRE2 matches
 * it whole; a text fed in two parts reads as fed at once. What is refused
 * at compile time says what and where. The mask over a real vocabulary
 * equals feeding each piece alone, and answers drawn at random from the
 * masks match the grammar's expression (tokens named in a grammar too). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "gguf/gguf.h"
#include "tests/check.h"
#include "text/constrain.h"
#include "text/grammar.h"
#include "text/json-mode.h"
#include "text/tokenizer.h"

static struct fl_grammar_state st, scratch[2];

static struct fl_grammar *compile(const char *text, const struct fl_tokenizer *tok)
{
    struct fl_grammar *g = NULL;
    struct fl_err err = { "" };
    const int rc = fl_grammar_compile(text, strlen(text), tok, &g, &err);
    CHECK(rc == 0, "%s: %s", text, err.msg);
    return rc ? NULL : g;
}

/* How many bytes of s a fresh state reads (st holds the state after them). */
static size_t read_bytes(const struct fl_grammar *g, const char *s, size_t n)
{
    fl_grammar_init(g, &st);
    for (size_t i = 0; i < n; i++)
        if (!fl_grammar_feed(g, &st, s + i, 1, scratch))
            return i;
    return n;
}

/* A text, the bytes of it read, and whether they are a sentence (1) and a
 * whole one (2: nothing may follow). */
static const struct {
    const char *grammar, *text;
    size_t ok;
    int end;
} cases[] = {
    { "root ::= \"abc\"", "abc", 3, 2 },
    { "root ::= \"abc\"", "ab", 2, 0 },
    { "root ::= \"abc\"", "abd", 2, 0 },
    { "root ::= \"abc\"", "abcd", 3, 2 },
    { "root ::= [a-c]+", "abcabc", 6, 1 },
    { "root ::= [a-c]+", "", 0, 0 },
    { "root ::= [a-c]*", "", 0, 1 },
    { "root ::= [^a-c\\n]", "d", 1, 2 },
    { "root ::= [^a-c\\n]", "\n", 0, 0 },
    { "root ::= [^a-c\\n]", "b", 0, 0 },
    { "root ::= \"x\"{2,3}", "x", 1, 0 },
    { "root ::= \"x\"{2,3}", "xx", 2, 1 },
    { "root ::= \"x\"{2,3}", "xxxx", 3, 2 },
    { "root ::= \"x\"{2}", "xx", 2, 2 },
    { "root ::= \"x\"{2,}", "xxxxxxx", 7, 1 },
    { "root ::= \"x\"{,2} \"y\"", "xxy", 3, 2 },
    { "root ::= \"x\"{,2} \"y\"", "xxx", 2, 0 },
    { "root ::= \"a\" (\"b\" | \"c\")? \"d\"", "ad", 2, 2 },
    { "root ::= \"a\" (\"b\" | \"c\")? \"d\"", "acd", 3, 2 },
    { "root ::= \"a\" (\"b\" | \"c\")? \"d\"", "abc", 2, 0 },
    /* rules, in any order; right recursion; comments and newlines */
    { "root ::= item (\",\" item)*  # a list\nitem ::= [0-9]+ | \"(\" root \")\"", "1,(2,(3)),45", 12, 1 },
    { "root ::= item (\",\" item)*\nitem ::= [0-9]+ | \"(\" root \")\"", "1,(2,3", 6, 0 },
    { "root ::= item (\",\" item)*\nitem ::= [0-9]+ | \"(\" root \")\"", "1,(2))", 5, 1 },
    { "root ::= (\n  \"a\" |\n  \"b\"\n)\n\n# end\n", "b", 1, 2 },
    { "root ::= \"a\" |\n \"b\"", "b", 1, 2 },
    /* escapes */
    { "root ::= \"\\x41\\u00e9\\U0001F600\\t\\\"\\\\\"", "A\xc3\xa9\xf0\x9f\x98\x80\t\"\\", 10, 2 },
    { "root ::= [\\[\\]]+", "[]]", 3, 1 },
    /* Unicode: ranges of code points, a character read byte by byte */
    { "root ::= [ぁ-ゟ]+ \"。\"", "ひらがな。", 15, 2 },
    { "root ::= [ぁ-ゟ]+ \"。\"", "ひらカ", 8, 0 },       /* カ (E3 82 AB) is katakana */
    { "root ::= [ぁ-ゟ]+ \"。\"", "ひ\xe3\x83", 4, 0 },   /* no hiragana starts E3 83 */
    { "root ::= [^\\u3000-\\u30FF]", "\xe3\x81", 1, 0 }, /* every E3 81 .. is in the set */
    { "root ::= [^ぁ-ゟ]", "\xe3\x81\x80", 3, 2 },     /* U+3040 is not */
    { "root ::= .", "\xf0\x9f\x98\x80", 4, 2 },
    { "root ::= .", "\xc3", 1, 0 },
    { "root ::= .", "\x80", 0, 0 },                      /* a continuation byte first */
    { "root ::= .", "\xc3\x41", 1, 0 },                  /* a lead byte, then no continuation */
    { "root ::= \"é\" | \"e\"", "\xc3\xa9", 2, 2 },
    /* UTF-8 only: no overlong forms, surrogates, or code points past U+10FFFF */
    { "root ::= .", "\xc1\x81", 0, 0 },
    { "root ::= .", "\xe0\x81\x81", 1, 0 },
    { "root ::= .", "\xf0\x83\x81\x99", 1, 0 },
    { "root ::= .", "\xed\xa0\x80", 1, 0 },     /* ED A0 .. are all surrogates */
    { "root ::= .", "\xed\x9f\xbf", 3, 2 },
    { "root ::= .", "\xf4\x90\x80\x80", 1, 0 },
    { "root ::= .", "\xf5\x80", 0, 0 },
    /* exponentially many ways to one reading: each is expanded once */
    { "root ::= ([a-z] x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x)+\nx ::= | ",
      "abc", 3, 1 },
    /* nullable rules before a character */
    { "root ::= a b \"!\"\na ::= \"x\"?\nb ::= (\"y\" | )", "!", 1, 2 },
    { "root ::= a b \"!\"\na ::= \"x\"?\nb ::= (\"y\" | )", "xy!", 3, 2 },
};

static void test_cases(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fl_grammar *g = compile(cases[i].grammar, NULL);
        if (!g)
            continue;
        const size_t n = strlen(cases[i].text), got = read_bytes(g, cases[i].text, n);
        CHECK(got == cases[i].ok, "%s on '%s': read %zu bytes, want %zu", cases[i].grammar,
              cases[i].text, got, cases[i].ok);
        read_bytes(g, cases[i].text, cases[i].ok);
        const int end = fl_grammar_done(&st) ? 2 : fl_grammar_may_end(&st);
        CHECK(end == cases[i].end, "%s on '%.*s': end %d, want %d", cases[i].grammar,
              (int)cases[i].ok, cases[i].text, end, cases[i].end);
        fl_grammar_free(g);
    }
}

/* Grammars and the same languages as PCRE2 expressions, and the code
 * points random texts are made of. */
static const struct {
    const char *grammar, *regex, *alphabet;
} twins[] = {
    { "root ::= \"ab\" | \"a\" [c-e]+ \"x\"?", "ab|a[c-e]+x?", "abcdefx" },
    { "root ::= ([a-c] \"-\")* \"z\"", "(?:[a-c]-)*z", "abcd-z" },
    { "root ::= [^a-c]{2,4} \".\"", "[^a-c]{2,4}\\.", "abd.\xc3\xa9" },
    { "root ::= x{3} | x{0,2} \"y\"\nx ::= \"a\" | \"bc\"", "(?:a|bc){3}|(?:a|bc){0,2}y", "abcy" },
    { "root ::= [ぁ-ゟ]+ \"。\"?", "[ぁ-ゟ]+。?", "ぁゟあア。a" },
    { "root ::= \"<\" .* \">\"", "<(?s:.)*>", "<>a\n\xc3\xa9" },
    { "root ::= \"a\"{,3} \"b\"", "a{0,3}b", "ab" },
    { "root ::= \"a\"? \"b\"? \"c\"?", "a?b?c?", "abc" },
    { "root ::= w (\" \" w)* [.!?]\nw ::= [a-z]+ | [A-Z] [a-z]*", "(?:[a-z]+|[A-Z][a-z]*)(?: (?:[a-z]+|[A-Z][a-z]*))*[.!?]", "aZb .!" },
};

/* The alphabet's code points as UTF-8 strings. */
static int letters(const char *alphabet, const char *out[16], int len[16])
{
    int n = 0;
    for (const char *p = alphabet; *p && n < 16; n++) {
        const unsigned char c = (unsigned char)*p;
        len[n] = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        out[n] = p;
        p += len[n];
    }
    return n;
}

/* Twin t's expression, anchored at both ends, for PCRE2 (NULL: a failed
 * check). */
static pcre2_code *twin_regex(size_t t)
{
    char pat[512];
    snprintf(pat, sizeof(pat), "(?:%s)\\z", twins[t].regex);
    int e;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_ANCHORED, &e, &off, NULL);
    CHECK(re != NULL, "regex %s", pat);
    return re;
}

static void test_twins(void)
{
    uint64_t seed = 42;
    for (size_t t = 0; t < sizeof(twins) / sizeof(twins[0]); t++) {
        struct fl_grammar *g = compile(twins[t].grammar, NULL);
        pcre2_code *re = twin_regex(t);
        if (!g || !re)
            continue;
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        const char *letter[16];
        int len[16];
        const int n_letters = letters(twins[t].alphabet, letter, len);
        int sentences = 0, prefixes = 0;
        for (int k = 0; k < 4000; k++) {
            char text[64];
            size_t n = 0;
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            for (int c = 0, count = (int)(seed >> 60) % 9; c < count; c++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                const int l = (int)((seed >> 33) % (uint64_t)n_letters);
                memcpy(text + n, letter[l], (size_t)len[l]);
                n += (size_t)len[l];
            }
            const bool prefix = read_bytes(g, text, n) == n;
            const bool sentence = prefix && fl_grammar_may_end(&st);
            const int partial = pcre2_match(re, (PCRE2_SPTR)text, n, 0, PCRE2_PARTIAL_HARD, md, NULL);
            const int whole = pcre2_match(re, (PCRE2_SPTR)text, n, 0, 0, md, NULL);
            /* PCRE2 finds no partial match in an empty text */
            const bool want_prefix = !n || partial > 0 || partial == PCRE2_ERROR_PARTIAL;
            CHECK(prefix == want_prefix, "%s on '%.*s': prefix %d, PCRE2 %d", twins[t].grammar,
                  (int)n, text, prefix, partial);
            CHECK(sentence == (whole > 0), "%s on '%.*s': sentence %d, PCRE2 %d",
                  twins[t].grammar, (int)n, text, sentence, whole);
            prefixes += prefix;
            sentences += sentence;
            if (prefix) { /* in two parts, cut anywhere (inside a character too) */
                const size_t cut = n ? (seed >> 20) % (n + 1) : 0;
                static struct fl_grammar_state two;
                fl_grammar_init(g, &two);
                CHECK(fl_grammar_feed(g, &two, text, cut, scratch) &&
                          fl_grammar_feed(g, &two, text + cut, n - cut, scratch) &&
                          fl_grammar_may_end(&two) == sentence && two.n == st.n,
                      "%s on '%.*s' cut at %zu", twins[t].grammar, (int)n, text, cut);
            }
        }
        printf("%s: %d prefixes, %d sentences of 4000 texts agree with PCRE2\n", twins[t].regex,
               prefixes, sentences);
        CHECK(sentences > 20, "%s: too few sentences drawn to compare", twins[t].regex);
        pcre2_match_data_free(md);
        pcre2_code_free(re);
        fl_grammar_free(g);
    }
}

static const struct {
    const char *grammar, *error;
} refusals[] = {
    { "", "line 1, column 1: an empty grammar" },
    { "item ::= \"a\"", "no rule named 'root'" },
    { "root ::= item", "rule 'item' is used but not defined" },
    { "root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive" },
    { "root ::= x\nx ::= e x \"a\" | \"b\"\ne ::= \"c\"?", "rule 'x' is left-recursive" },
    { "root ::= (\"a\"?)*", "left-recursive" },
    { "root = \"a\"", "line 1, column 6: expecting '::='" },
    { "root ::= \"a\" ::=", "line 1, column 14: expecting the end of the line" },
    { "root ::= \"a", "unexpected end of the grammar in a literal" },
    { "root ::= [a-", "unexpected end of the grammar" },
    { "root ::= \"\\q\"", "line 1, column 11: unknown escape" },
    { "root ::= \"\\xZZ\"", "expecting a hex digit" },
    { "root ::= \"\\U00110000\"", "past U+10FFFF" },
    { "root ::= \"a\"{2001}", "a repetition count over 2000" },
    { "root ::= \"a\"{3,2}", "maximum below its minimum" },
    { "root ::= *", "a repetition with nothing before it" },
    { "root ::= \"a\" )", "expecting the end of the line" },
    { "root ::= (\"a\"", "expecting ')'" },
    { "root ::= []", "an empty set matches nothing" },
    { "root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: a rule defined twice" },
    { "root ::= <[12]>", "a token needs a model's vocabulary" },
    { "root ::= \"\xff\"", "invalid UTF-8" },
    { "root ::= \"abcdefghijklmnopqrstuvwxyz0123456789\"{2000}",
      "elements once repetitions are written out" },
};

static void test_refusals(void)
{
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        struct fl_grammar *g = NULL;
        struct fl_err err = { "" };
        const int rc = fl_grammar_compile(refusals[i].grammar, strlen(refusals[i].grammar), NULL,
                                          &g, &err);
        CHECK(rc == -22 && !g && !strncmp(err.msg, "grammar: ", 9) &&
                  strstr(err.msg, refusals[i].error),
              "%s: rc %d, '%s' (want '%s')", refusals[i].grammar, rc, err.msg, refusals[i].error);
    }
    char deep[256] = "root ::= ";
    for (int i = 0; i < 65; i++)
        strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 65; i++)
        strcat(deep, ")");
    struct fl_grammar *g = NULL;
    struct fl_err err = { "" };
    CHECK(fl_grammar_compile(deep, strlen(deep), NULL, &g, &err) == -22 &&
              strstr(err.msg, "groups nested more than 64 deep"), "nesting: %s", err.msg);
    static char chain[65536]; /* references nested past the matcher's limit */
    size_t n = (size_t)sprintf(chain, "root ::= a0\n");
    for (int i = 0; i < 1500; i++)
        n += (size_t)sprintf(chain + n, "a%d ::= a%d\n", i, i + 1);
    n += (size_t)sprintf(chain + n, "a1500 ::= \"x\"\n");
    CHECK(fl_grammar_compile(chain, n, NULL, &g, &err) == -22 && strstr(err.msg, "cannot start"),
          "a chain of 1,500 rules: %s", err.msg);
    CHECK(fl_grammar_compile("root ::= \"a\"\0", 13, NULL, &g, &err) == -22 &&
              strstr(err.msg, "NUL"), "a NUL byte: %s", err.msg);
}

/* --- over a vocabulary ------------------------------------------------------------ */

static uint64_t rng = 7;

static uint32_t draw(uint32_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((rng >> 33) % n);
}

/* Answers drawn at random from the masks: each mask is checked against
 * every token's piece fed alone to a state kept beside the constraint
 * (end-of-generation tokens where the answer may end), and the answer is
 * what PCRE2 says the grammar's twin accepts. */
static void test_drawn(const struct fl_tokenizer *tok, struct fl_mask_vocab *v, size_t twin,
                       int answers)
{
    const int32_t V = fl_n_vocab(tok);
    float *row = malloc(sizeof(float) * (size_t)V), *out = malloc(sizeof(float) * (size_t)V);
    int32_t *allowed = malloc(sizeof(int32_t) * (size_t)V);
    struct fl_grammar *g = compile(twins[twin].grammar, tok);
    struct fl_constraint *c = NULL;
    pcre2_code *re = twin_regex(twin);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    if (!g || !md || fl_constraint_new(NULL, g, &c)) {
        CHECK(0, "setup for %s", twins[twin].grammar);
        return;
    }
    for (int32_t id = 0; id < V; id++)
        row[id] = (float)(id % 5);
    static struct fl_grammar_state beside, probe;
    int ended = 0, masks = 0;
    double mask_s = 0;
    for (int a = 0; a < answers; a++) {
        fl_constraint_reset(c);
        fl_grammar_init(g, &beside);
        char text[1024];
        size_t n = 0;
        bool end = false;
        for (int step = 0; step < 24 && !end && n < sizeof(text) - 256; step++) {
            const double t0 = fl_clock_s();
            const int32_t left = fl_constraint_mask(c, v, row, out);
            mask_s += fl_clock_s() - t0;
            masks++;
            int32_t k = 0;
            for (int32_t id = 0; id < V; id++) {
                uint32_t len;
                const char *piece = fl_mask_piece(v, id, &len);
                fl_grammar_copy(&probe, &beside);
                const bool ok = fl_mask_is_eog(v, id)
                                    ? fl_grammar_may_end(&beside)
                                    : len && fl_grammar_feed(g, &probe, piece, len, scratch);
                if ((out[id] == row[id]) != ok) {
                    CHECK(0, "%s after '%.*s': token %d masked %g, its piece reads %d",
                          twins[twin].grammar, (int)n, text, id, out[id], ok);
                    goto done;
                }
                if (ok)
                    allowed[k++] = id;
            }
            CHECK(left == k, "%s: %d left, %d read", twins[twin].grammar, left, k);
            if (!k)
                break;
            const int32_t id = allowed[draw((uint32_t)k)];
            CHECK(fl_constraint_accept(c, v, id), "%s: token %d allowed, not accepted",
                  twins[twin].grammar, id);
            if (fl_mask_is_eog(v, id)) {
                end = true;
                break;
            }
            uint32_t len;
            const char *piece = fl_mask_piece(v, id, &len);
            fl_grammar_feed(g, &beside, piece, len, scratch);
            memcpy(text + n, piece, len);
            n += len;
            end = fl_constraint_done(c);
        }
        const int whole = pcre2_match(re, (PCRE2_SPTR)text, n, 0, 0, md, NULL);
        const int part = pcre2_match(re, (PCRE2_SPTR)text, n, 0, PCRE2_PARTIAL_HARD, md, NULL);
        if (!(end ? whole > 0 : (!n || part > 0 || part == PCRE2_ERROR_PARTIAL)))
            for (size_t i = 0; i < n; i++)
                printf("%02x%c", (unsigned char)text[i], i + 1 == n ? '\n' : ' ');
        CHECK(end ? whole > 0 : (!n || part > 0 || part == PCRE2_ERROR_PARTIAL),
              "%s: answer '%.*s' (ended %d): PCRE2 %d / %d", twins[twin].grammar, (int)n, text,
              end, whole, part);
        ended += end;
    }
    printf("%s: %d answers drawn from the masks, %d ended, each as PCRE2 reads it "
           "(a mask of %d tokens took %.1f ms on average: not a test)\n",
           twins[twin].regex, answers, ended, V, 1e3 * mask_s / (masks ? masks : 1));
done:
    fl_constraint_free(c);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    fl_grammar_free(g);
    free(row), free(out), free(allowed);
}

static int32_t one_token(const struct fl_tokenizer *tok, const char *text)
{
    int32_t ids[2];
    return fl_tokenize(tok, text, strlen(text), false, true, ids, 2) == 1 ? ids[0] : -1;
}

/* <token>, <[id]> and !<[id]>: the token itself, whatever text spells it
 * (a control token has none); every other token with text. */
static void test_tokens(const struct fl_tokenizer *tok, struct fl_mask_vocab *v)
{
    const int32_t V = fl_n_vocab(tok), open = one_token(tok, "<｜begin▁of▁sentence｜>"),
                  close = 100002;
    CHECK(open == 100000, "<｜begin▁of▁sentence｜> is token 100000 of this vocabulary");
    float *row = calloc((size_t)V, sizeof(float)), *out = malloc(sizeof(float) * (size_t)V);
    struct fl_grammar *g = compile("root ::= <｜begin▁of▁sentence｜> [a-z]* <[100002]> \"ok\"", tok);
    struct fl_constraint *c = NULL;
    if (!g || fl_constraint_new(NULL, g, &c))
        return;
    CHECK(fl_constraint_mask(c, v, row, out) == 1 && out[open] == 0, "<think> alone first");
    CHECK(!fl_constraint_accept(c, v, one_token(tok, "<")), "'<' is not the token <think>");
    CHECK(fl_constraint_accept(c, v, open), "<think> accepted");
    CHECK(fl_constraint_mask(c, v, row, out) > 1 && out[close] == 0 && isinf(out[open]),
          "letters or </think> next");
    CHECK(fl_constraint_accept(c, v, one_token(tok, "abc")) && fl_constraint_accept(c, v, close),
          "abc, then </think>");
    CHECK(fl_constraint_accept(c, v, one_token(tok, "ok")) && fl_constraint_done(c),
          "then ok, and the answer is whole");
    fl_constraint_free(c);
    fl_grammar_free(g);

    char text[64];
    snprintf(text, sizeof(text), "root ::= !<[%d]> \"z\"", open);
    g = compile(text, tok);
    if (!g || fl_constraint_new(NULL, g, &c))
        return;
    int32_t with_text = 0;
    for (int32_t id = 0; id < V; id++) {
        uint32_t len;
        fl_mask_piece(v, id, &len);
        with_text += len > 0 && id != open && !fl_mask_is_eog(v, id);
    }
    const int32_t left = fl_constraint_mask(c, v, row, out);
    CHECK(left == with_text && isinf(out[open]), "!<[%d]>: %d left, want %d", open, left,
          with_text);
    CHECK(fl_constraint_accept(c, v, one_token(tok, "hello")) &&
              !fl_constraint_accept(c, v, one_token(tok, "y")) &&
              fl_constraint_accept(c, v, one_token(tok, "z")) && fl_constraint_done(c),
          "any token, then z");
    fl_constraint_free(c);
    fl_grammar_free(g);
    snprintf(text, sizeof(text), "root ::= <[%d]>", V);
    struct fl_err err = { "" };
    CHECK(fl_grammar_compile(text, strlen(text), tok, &g, &err) == -22 &&
              strstr(err.msg, "outside the vocabulary"), "<[n_vocab]>: %s", err.msg);
    CHECK(fl_grammar_compile("root ::= <not one token>", 24, tok, &g, &err) == -22 &&
              strstr(err.msg, "not one token"), "<not one token>: %s", err.msg);
    free(row), free(out);
}

static void test_vocab(const char *path)
{
    struct gguf_file *f = NULL;
    struct fl_tokenizer *tok = NULL;
    struct fl_mask_vocab *v = NULL;
    struct fl_err err = { "" };
    if (gguf_open(path, &f, &err) || fl_tokenizer_load(f, &tok, &err) ||
        fl_mask_vocab_new(tok, fl_n_vocab(tok), &v)) {
        CHECK(0, "%s: %s", path, err.msg);
        return;
    }
    test_drawn(tok, v, 8, 8);  /* words */
    test_drawn(tok, v, 4, 12); /* hiragana: characters split across tokens */
    test_drawn(tok, v, 5, 4);  /* any text between < and > */
    test_tokens(tok, v);
    fl_mask_vocab_free(v);
    fl_tokenizer_free(tok);
    gguf_close(f);
}

int main(void)
{
    test_cases();
    test_twins();
    test_refusals();
    test_vocab("tests/data/vocab/ggml-vocab-deepseek-llm.gguf");
    return check_summary("test-grammar");
}

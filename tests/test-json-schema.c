/* test-json-schema: text/json-schema.h and json-mode.h.
 * JSON mode (the schema of any object) on documents written here: every
 * prefix of a valid object is accepted and only the whole one is done; each
 * invalid text is refused at the byte the comment names; feeding in pieces
 * equals feeding at once; the whitespace and depth limits hold; random texts
 * are finished objects exactly when jansson reads an object.
 * Schemas: each case's valid texts pass (and tests/json-instance.h's validator,
 * written from JSON Schema's rules over jansson values, agrees), its invalid
 * ones are refused at the byte named; what is refused at compile time says
 * which keyword and where; random edits of the valid texts that the matcher
 * finishes parse and validate (it never lets an invalid answer through).
 * The mask over a real vocabulary equals feeding each piece alone, for JSON
 * mode and for schemas. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "base/clock.h"
#include "base/json.h"
#include "gguf/gguf.h"
#include "tests/check.h"
#include "tests/json-instance.h"
#include "text/json-mode.h"
#include "text/tokenizer.h"

static const char *const valid[] = {
    "{}",
    "{\"a\":1}",
    "{\n \"key\" : \"value\" , \"n\" : -0.5e+10 }",
    "{\"x\":[1,2,3,[],{},\"s\",true,false,null],\"y\":{\"z\":{\"w\":[]}}}",
    "{\"esc\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\uD83D\\ude00\"}",
    "{\"num\":[0,-0,1.25,12e3,1E-2,0.0e0,-9]}",
    "{\"utf8\":\"h\xc3\xa9llo \xe2\x82\xac\"}",
};

/* text, and the length of its longest accepted prefix */
static const struct { const char *text; size_t ok; } invalid[] = {
    { "[1]", 0 },              /* the answer must be an object */
    { "\"s\"", 0 },
    { "{a:1}", 1 },            /* keys are strings */
    { "{\"a\" 1}", 5 },        /* a colon after a key */
    { "{\"a\":01}", 6 },       /* no leading zeros */
    { "{\"a\":1.}", 7 },       /* a digit after the dot */
    { "{\"a\":-}", 6 },
    { "{\"a\":tru}", 8 },
    { "{\"a\":nulll}", 9 },
    { "{\"a\":1,}", 7 },       /* no trailing comma */
    { "{\"a\":[1,]}", 8 },
    { "{\"a\":1]", 6 },        /* the wrong close */
    { "{\"a\":\"\\x\"}", 7 },  /* no such escape */
    { "{\"a\":\"\\u12g4\"}", 10 },
    { "{\"a\":\"\n\"}", 6 },   /* control bytes are escaped in strings */
    { "{}{}", 2 },             /* nothing but whitespace after the object */
    { "{}x", 2 },
    { "{\"a\":\"\\uD83D\"}", 12 },      /* a high surrogate alone */
    { "{\"a\":\"\\uD83Dx\"}", 12 },
    { "{\"a\":\"\\uD83D\\u0041\"}", 14 }, /* ... followed by no low half */
    { "{\"a\":\"\\uDE00\"}", 9 },        /* a low half alone */
    { "{\"a\":\"\\u0000\"}", 11 },       /* jansson's strings cannot hold it */
    { "{\"a\":\"\xc3\x28\"}", 7 },         /* no UTF-8 */
    { "{\"a\":\"\xed\xa0\x80\"}", 7 },     /* a surrogate in UTF-8 */
    { " {}", 0 },              /* the object starts the answer */
};

static struct fl_schema *object; /* JSON mode's */

static bool feed_with(const struct fl_schema *sc, struct fl_schema_state *m, const char *s,
                      size_t n)
{
    fl_schema_init(sc, m);
    return fl_schema_feed(sc, m, s, n);
}

static bool feed_all(struct fl_schema_state *m, const char *s, size_t n)
{
    return feed_with(object, m, s, n);
}

static void test_valid(void)
{
    for (size_t v = 0; v < sizeof(valid) / sizeof(valid[0]); v++) {
        const size_t n = strlen(valid[v]);
        for (size_t i = 0; i <= n; i++) {
            struct fl_schema_state m;
            CHECK(feed_all(&m, valid[v], i), "valid %zu: prefix of %zu bytes refused", v, i);
            CHECK(fl_schema_done(&m) == (i == n), "valid %zu: done after %zu of %zu bytes: %d",
                  v, i, n, fl_schema_done(&m));
        }
        static struct fl_schema_state a, b; /* in two-byte pieces = at once */
        fl_schema_init(object, &a);
        for (size_t i = 0; i < n; i += 2)
            fl_schema_feed(object, &a, valid[v] + i, n - i < 2 ? n - i : 2);
        feed_all(&b, valid[v], n);
        CHECK(fl_schema_same(&a, &b), "valid %zu: pieces differ from a whole feed", v);
    }
}

static void test_invalid(void)
{
    for (size_t v = 0; v < sizeof(invalid) / sizeof(invalid[0]); v++) {
        const size_t n = strlen(invalid[v].text), ok = invalid[v].ok;
        struct fl_schema_state m;
        CHECK(feed_all(&m, invalid[v].text, ok), "invalid %zu: its first %zu bytes refused", v,
              ok);
        CHECK(!feed_all(&m, invalid[v].text, ok + 1) || ok + 1 > n,
              "invalid %zu (%s): byte %zu accepted", v, invalid[v].text, ok);
        CHECK(!feed_all(&m, invalid[v].text, n), "invalid %zu accepted whole", v);
    }
}

static void test_limits(void)
{
    struct fl_schema_state m;
    CHECK(feed_all(&m, "{}\n\n \t", 5) && fl_schema_done(&m), "whitespace after the object: done");
    char ws[64] = "\n\n";
    memset(ws + 2, ' ', sizeof(ws) - 2);
    fl_schema_init(object, &m); /* llama.cpp's: "", " ", or "\n" / "\n\n" and 0-20 of [ \t] */
    CHECK(fl_schema_feed(object, &m, "{", 1) &&
          fl_schema_feed(object, &m, ws, 2 + FL_SCHEMA_MAX_INDENT),
          "two newlines and %d blanks pass", FL_SCHEMA_MAX_INDENT);
    CHECK(!fl_schema_feed(object, &m, ws + 2, 1), "one more does not");
    CHECK(fl_schema_feed(object, &m, "\"k\" :", 5) && fl_schema_feed(object, &m, ws + 1, 21),
          "a token resets the count");
    static const char *const bad_ws[] = { "{  }", "{\t}", "{\r\n}", "{\n\n\n}", "{ \n}",
                                          "{\n \n}" };
    for (size_t i = 0; i < sizeof(bad_ws) / sizeof(bad_ws[0]); i++)
        CHECK(!feed_all(&m, bad_ws[i], strlen(bad_ws[i])), "whitespace %zu accepted", i);
    char deep[2 * FL_SCHEMA_MAX_DEPTH + 8] = "{\"a\":";
    size_t n = strlen(deep);
    for (int d = 1; d < FL_SCHEMA_MAX_DEPTH; d++)
        deep[n++] = '[';
    CHECK(feed_all(&m, deep, n), "%d levels pass", FL_SCHEMA_MAX_DEPTH);
    CHECK(!fl_schema_feed(object, &m, "[", 1), "one more level does not");
    const char *digits = "{\"n\":1234567890123456.1234567890123456e1234567890123456";
    CHECK(feed_all(&m, digits, strlen(digits)), "16 digits per part of a number pass");
    CHECK(!fl_schema_feed(object, &m, "7", 1), "a 17th does not");
}

static uint64_t rng = 12345;
static unsigned next(unsigned n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng >> 33) % n;
}

/* A random JSON value into s (at most cap bytes; depth-limited). */
static size_t gen_value(char *s, size_t cap, int depth)
{
    static const char *const atoms[] = { "1", "-0.5", "2e3", "true", "false", "null", "\"\"",
                                         "\"x\\ny\"", "0", "\"\\u00e9\"" };
    const unsigned kind = depth > 3 ? 2 : next(3);
    size_t n = 0;
    if (kind == 2 || cap < 24) {
        const char *a = atoms[next(sizeof(atoms) / sizeof(atoms[0]))];
        n = strlen(a) < cap ? strlen(a) : 0;
        memcpy(s, a, n);
        return n;
    }
    s[n++] = kind == 0 ? '{' : '[';
    const unsigned items = next(4);
    for (unsigned i = 0; i < items && n + 24 < cap; i++) {
        if (i)
            s[n++] = ',';
        if (next(4) == 0)
            s[n++] = ' ';
        if (kind == 0) {
            memcpy(s + n, "\"k\":", 4);
            n += 4;
        }
        n += gen_value(s + n, cap - n - 2, depth + 1);
    }
    s[n++] = kind == 0 ? '}' : ']';
    return n;
}

/* Random texts — objects made at random, half of them with one byte
 * changed — are finished objects exactly when jansson reads an object
 * (jansson: the whole input, nothing after it). */
static void test_against_jansson(void)
{
    int agreed = 0, objects = 0;
    for (int t = 0; t < 100000; t++) {
        char s[256];
        size_t n = 1;
        s[0] = '{';
        for (unsigned i = 0, items = next(4); i < items && n + 40 < sizeof(s); i++) {
            if (i)
                s[n++] = ',';
            memcpy(s + n, "\"a\":", 4);
            n += 4;
            n += gen_value(s + n, sizeof(s) - n - 2, 1);
        }
        s[n++] = '}';
        if (next(2))
            s[next((unsigned)n)] = "{}[]\":,0-.e \\tn1\n"[next(17)];
        struct fl_schema_state m;
        if (!ws_runs_ok(s, n))
            continue; /* whitespace llama.cpp's grammars would not write either */
        const bool ours = feed_all(&m, s, n) && fl_schema_done(&m);
        json_error_t e;
        json_t *j = json_loadb(s, n, JSON_DECODE_ANY, &e);
        const bool theirs = j && json_is_object(j) && s[0] == '{';
        json_decref(j);
        objects += theirs;
        if (ours == theirs) {
            agreed++;
        } else {
            CHECK(0, "\"%.*s\": ours %d, jansson %d (%s)", (int)n, s, ours, theirs, e.text);
            break;
        }
    }
    CHECK(objects > 10000, "the random texts hold objects too (%d)", objects);
    printf("random objects, half with a byte changed: %d agree with jansson, %d objects\n",
           agreed, objects);
}

/* Random strings over JSON's alphabet, the same. */
static void test_random_bytes(void)
{
    static const char alphabet[] = "{}[]\":,0123456789-.eE+tfrulnase \\\"";
    static const char *const parts[] = { "{", "}", "[", "]", "\"k\"", ":", ",", "1", "-0.5",
                                         "true", "null", "\"v\"", " ", "1e5" };
    uint64_t x = 12345;
    int agreed = 0, objects = 0;
    for (int t = 0; t < 200000; t++) {
        char s[48];
        size_t n = 0;
        if (t % 2) /* half of them framed as an object, so that objects are common */
            s[n++] = '{';
        const int len = 2 + (int)((x >> 33) % 12);
        for (int i = 0; i < len && n < sizeof(s) - 8; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            if ((x >> 62) == 0) {
                s[n++] = alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
            } else {
                const char *p = parts[(x >> 40) % (sizeof(parts) / sizeof(parts[0]))];
                memcpy(s + n, p, strlen(p));
                n += strlen(p);
            }
        }
        if (t % 2)
            s[n++] = '}';
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        struct fl_schema_state m;
        if (!ws_runs_ok(s, n))
            continue; /* whitespace llama.cpp's grammars would not write either */
        const bool ours = feed_all(&m, s, n) && fl_schema_done(&m);
        json_error_t e;
        json_t *j = json_loadb(s, n, JSON_DECODE_ANY, &e); /* "\u0000": refused by both */
        const bool theirs = j && json_is_object(j) && s[0] == '{';
        json_decref(j);
        if (!j && (strstr(e.text, "overflow") || strstr(e.text, "too big")))
            continue; /* numbers past jansson's range are still JSON */
        objects += theirs;
        if (ours == theirs) {
            agreed++;
        } else {
            CHECK(0, "\"%.*s\": ours %d, jansson %d", (int)n, s, ours, theirs);
            break;
        }
    }
    printf("random bytes: %d texts agree with jansson, %d objects among them\n", agreed, objects);
}

/* json-mode.h's mask over a real vocabulary, at every prefix of doc:
 * a token stays exactly when its piece, fed by itself, continues the text;
 * an end-of-generation token exactly where the text may end. */
static int check_mask(const struct fl_tokenizer *tok, struct fl_mask_vocab *jv,
                      const struct fl_schema *sc, const char *doc, size_t stride, float *row,
                      float *out)
{
    const int32_t V = fl_n_vocab(tok);
    int masks = 0;
    static struct fl_schema_state m, c;
    for (size_t i = 0; i <= strlen(doc); i += stride) {
        CHECK(feed_with(sc, &m, doc, i), "%s: its prefix of %zu bytes refused", doc, i);
        const int32_t left = fl_json_mask(jv, sc, &m, row, out);
        int32_t want = 0;
        for (int32_t id = 0; id < V; id++) {
            char piece[256];
            const bool eog = fl_token_is_eog(tok, id);
            int n = eog ? 0 : fl_token_to_piece(tok, id, piece, sizeof(piece), false, false);
            memcpy(&c, &m, sizeof(c));
            const bool ok = eog ? fl_schema_may_end(&m)
                                : !fl_schema_done(&m) && n > 0 &&
                                      fl_schema_feed(sc, &c, piece, (size_t)n);
            want += ok;
            if ((out[id] == row[id]) != ok || (!ok && out[id] != -INFINITY)) {
                CHECK(0, "%s: prefix %zu, token %d: mask %g, continues %d", doc, i, id, out[id],
                      ok);
                return masks;
            }
        }
        CHECK(left == want, "%s: prefix %zu: %d left, %d continue", doc, i, left, want);
        masks++;
    }
    return masks;
}

static const char *const mask_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",7]}},"
    "\"n\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}},"
    "\"required\":[\"name\"],\"additionalProperties\":{\"type\":\"boolean\"}}";

static const char *const mask_docs[] = {
    "{\"name\": \"Bob\", \"tags\": [\"red\", 7], \"n\": null, \"ok\": true}",
    "{\"name\":\"\\u00e9t\\\"\",\"n\":-12}",
};

/* Over vocab's tokens, every stride-th prefix of each document. */
static void test_mask(const char *vocab, size_t stride)
{
    struct gguf_file *g = NULL;
    struct fl_tokenizer *tok = NULL;
    struct fl_err err = { "" };
    if (gguf_open(vocab, &g, &err) || fl_tokenizer_load(g, &tok, &err)) {
        CHECK(0, "tokenizer: %s", err.msg);
        return;
    }
    const int32_t V = fl_n_vocab(tok);
    struct fl_mask_vocab *jv = NULL;
    CHECK(fl_mask_vocab_new(tok, V, &jv) == 0, "vocabulary");
    float *row = malloc(sizeof(float) * (size_t)V), *out = malloc(sizeof(float) * (size_t)V);
    for (int32_t id = 0; id < V; id++)
        row[id] = (float)(id % 7);
    json_t *j = json_loads(mask_schema, 0, NULL);
    struct fl_schema *sc = NULL;
    CHECK(j && !fl_schema_compile(j, &sc, &err), "mask schema: %s", err.msg);
    int masks = 0;
    double ms = 0;
    int timed = 0;
    if (jv && sc) {
        masks += check_mask(tok, jv, object, valid[3], stride, row, out);
        for (size_t d = 0; d < sizeof(mask_docs) / sizeof(mask_docs[0]); d++) {
            masks += check_mask(tok, jv, sc, mask_docs[d], stride, row, out);
            static struct fl_schema_state m; /* what a step's mask costs (not a test) */
            for (size_t i = 0; i <= strlen(mask_docs[d]); i++, timed++) {
                feed_with(sc, &m, mask_docs[d], i);
                const double t0 = fl_clock_s();
                fl_json_mask(jv, sc, &m, row, out);
                ms += 1e3 * (fl_clock_s() - t0);
            }
        }
    }
    printf("%s: mask = each piece fed alone, at %d prefixes over %d tokens; %.3f ms per mask\n",
           vocab, masks, V, timed ? ms / timed : 0);
    fl_schema_free(sc);
    json_decref(j);
    free(row);
    free(out);
    fl_mask_vocab_free(jv);
    fl_tokenizer_free(tok);
    gguf_close(g);
}

/* ---- schemas ---- */

/* A schema, texts it accepts whole, and texts with the length of their
 * longest accepted prefix. */
struct schema_case {
    const char *schema;
    const char *valid[4];
    struct { const char *text; size_t ok; } invalid[8];
};

static const struct schema_case cases[] = {
    { "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,"
      "\"maxLength\":8},\"age\":{\"type\":\"integer\"},\"email\":{\"type\":[\"string\",\"null\"]}},"
      "\"required\":[\"name\",\"age\"]}",
      { "{\"name\":\"Ann\",\"age\":30}", "{\"name\":\"Ann\",\"age\":-3,\"email\":null}",
        "{ \"name\" : \"B\xc3\xa9\" , \"age\" : 0 , \"email\" : \"a@b\" }" },
      { { "{\"age\":30,\"name\":\"Ann\"}", 2 },       /* required ones first, as declared */
        { "{\"name\":\"\",\"age\":1}", 9 },            /* minLength */
        { "{\"name\":\"Ann\",\"age\":1.5}", 21 },      /* an integer */
        { "{\"name\":\"Ann\"}", 13 },                  /* age is required */
        { "{\"name\":\"Ann\",\"age\":1,\"x\":2}", 23 },  /* no additional properties */
        { "{\"name\":\"ABCDEFGHI\",\"age\":1}", 17 },   /* maxLength */
        { "{\"name\":\"Ann\",\"email\":null,\"age\":1}", 15 } } },
    { "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",null,1,12]},"
      "\"k\":{\"const\":\"x\"}},\"required\":[\"color\",\"k\"],\"additionalProperties\":false}",
      { "{\"color\":\"red\",\"k\":\"x\"}", "{\"color\":null,\"k\":\"x\"}",
        "{\"color\":12,\"k\":\"x\"}", "{\"color\":1,\"k\":\"x\"}" },
      { { "{\"color\":\"blue\",\"k\":\"x\"}", 10 }, { "{\"color\":\"red\",\"k\":\"y\"}", 20 },
        { "{\"color\":123,\"k\":\"x\"}", 11 } } },
    { "{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":3}",
      { "[1]", "[1,2.5,-3e2]", "[ 0 , 1 ]" },
      { { "[]", 1 }, { "[1,2,3,4]", 6 }, { "[\"a\"]", 1 } } },
    { "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
      "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},"
      "\"$ref\":\"#/$defs/node\"}",
      { "{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}" },
      { { "{\"v\":1,\"kids\":[{\"w\":1}]}", 17 } } },
    { "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
      "\"required\":[\"a\"]},{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"string\"}},"
      "\"required\":[\"b\"]}],\"title\":\"AorB\"}",
      { "{\"a\":1}", "{\"b\":\"x\"}" },
      { { "{\"a\":\"x\"}", 5 }, { "{\"c\":1}", 2 } } },
    { "{\"type\":\"string\",\"maxLength\":2}",
      { "\"ab\"", "\"\\n\\u00e9\"", "\"\\ud83d\\ude00x\"" }, /* a surrogate pair is one */
      { { "\"abc\"", 3 }, { "\"\\x\"", 2 }, { "\"\\ud83d\\ude00xy\"", 14 } } },
    { "{\"type\":\"string\",\"minLength\":2,\"enum\":[\"a\",\"bb\",1]}", /* values the rest refuse */
      { "\"bb\"" },
      { { "\"a\"", 1 }, { "1", 0 } } },
    { "{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"a\",\"a\"],"
      "\"additionalProperties\":true}",
      { "{\"a\":1,\"b\":2}", "{\"a\":1}" },
      { { "{}", 1 } } },
    { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"x\":"
      "{\"type\":\"integer\"}},\"required\":[\"x\"]},\"b\":{\"type\":\"integer\"}},"
      "\"required\":[\"a\",\"b\"],\"additionalProperties\":false}", /* an object in an object */
      { "{\"a\":{\"x\":1},\"b\":2}" },
      { { "{\"a\":{\"x\":1},\"x\":1}", 14 }, { "{\"a\":{\"x\":1,\"b\":2},\"b\":2}", 11 } } },
    { "{\"const\":0.30000000000000004}",
      { "0.30000000000000004" },
      { { "0.3 ", 3 } } },
    { "{\"type\":\"integer\",\"minimum\":9007199254740993}",
      { "9007199254740993 ", "9999999999999999 " }, /* a top-level number ends at a blank */
      { { "9007199254740992 ", 15 } } },
    { "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"],"
      "\"additionalProperties\":{\"type\":\"boolean\"}}",
      { "{\"id\":1,\"x\":true,\"y\":false}", "{\"id\":7}" },
      { { "{\"id\":1,\"x\":1}", 12 }, { "{\"id\":1,\"id\":true}", 11 },
        { "{\"id\":1,\"\\u0069d\":true}", 9 } } },
    { "{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\",\"minimum\":0,"
      "\"maximum\":120},\"t\":{\"type\":\"integer\",\"exclusiveMinimum\":-20,\"exclusiveMaximum\":-9.5},"
      "\"big\":{\"type\":\"integer\",\"minimum\":5e15}},\"required\":[\"age\"]}",
      { "{\"age\":0}", "{\"age\":120,\"t\":-19}", "{\"age\":35,\"t\":-10}",
        "{\"age\":7,\"big\":5000000000000000}" },
      { { "{\"age\":-1}", 7 },      /* no negative age: '-' refused */
        { "{\"age\":121}", 9 },     /* 12 may become 120 */
        { "{\"age\":1200}", 10 },
        { "{\"age\":05}", 8 },      /* 0 takes no more digits */
        { "{\"age\":1,\"t\":-20}", 14 }, /* no -2x is above -20 */
        { "{\"age\":1,\"t\":-9}", 14 },  /* nor -9x below -9.5 */
        { "{\"age\":1,\"big\":4999999999999999}", 15 } } }, /* no 4... of 16 digits reaches 5e15 */
    { "{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date\","
      "\"description\":\"a day\"},\"any\":{},\"t\":true}}",
      { "{}", "{\"when\":\"x\"}", "{\"any\":[1,{\"z\":null}],\"t\":\"s\"}", "{\"t\":1}" },
      { { "{\"any\":1,\"when\":\"x\"}", 10 } } },
};

static void test_schema_cases(void)
{
    int texts = 0;
    static struct fl_schema_state m;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct fl_err err = { "" };
        json_t *j = json_loads(cases[c].schema, 0, NULL);
        struct fl_schema *sc = NULL;
        if (!j || fl_schema_compile(j, &sc, &err)) {
            CHECK(0, "case %zu: %s", c, err.msg);
            json_decref(j);
            continue;
        }
        for (int v = 0; v < 4 && cases[c].valid[v]; v++, texts++) {
            const char *t = cases[c].valid[v];
            const size_t n = strlen(t);
            for (size_t i = 0; i < n; i++)
                CHECK(feed_with(sc, &m, t, i) && !fl_schema_done(&m),
                      "case %zu: %s: its prefix of %zu bytes refused or done", c, t, i);
            CHECK(feed_with(sc, &m, t, n) && fl_schema_done(&m), "case %zu: %s refused", c, t);
            json_t *inst = json_loads(t, JSON_DECODE_ANY, NULL);
            CHECK(inst && instance_of(inst, j, j), "case %zu: %s: not an instance for the test's "
                  "validator", c, t);
            json_decref(inst);
        }
        for (int v = 0; v < 8 && cases[c].invalid[v].text; v++, texts++) {
            const char *t = cases[c].invalid[v].text;
            const size_t ok = cases[c].invalid[v].ok;
            CHECK(feed_with(sc, &m, t, ok), "case %zu: %s: its first %zu bytes refused", c, t, ok);
            CHECK(!feed_with(sc, &m, t, ok + 1), "case %zu: %s: byte %zu accepted", c, t, ok);
        }
        fl_schema_free(sc);
        json_decref(j);
    }
    static struct fl_schema_state a;
    json_t *j = json_loads("{\"type\":\"integer\"}", 0, NULL);
    struct fl_schema *sc = NULL;
    CHECK(!fl_schema_compile(j, &sc, NULL), "integer schema");
    CHECK(feed_with(sc, &a, "42", 2) && !fl_schema_done(&a) && fl_schema_may_end(&a),
          "a top-level number may end but is not done");
    CHECK(feed_with(sc, &a, "42 ", 3) && fl_schema_done(&a), "whitespace ends it");
    CHECK(feed_with(sc, &a, "-", 1) && !fl_schema_may_end(&a), "'-' may not end");
    fl_schema_free(sc);
    json_decref(j);
    printf("schemas: %zu cases, %d texts accepted or refused at the byte named\n",
           sizeof(cases) / sizeof(cases[0]), texts);
}

static void test_schema_refusals(void)
{
    static const struct { const char *schema, *says; } refused[] = {
        { "{\"type\":\"string\",\"pattern\":\"^a\"}", "\"pattern\" is not supported (at the root)" },
        { "{\"type\":\"object\",\"properties\":{\"n/m\":{\"type\":\"number\",\"minimum\":0}}}",
          "\"minimum\" is supported on integers only (a number as its value, \"type\": \"integer\") "
          "(at /properties/n~1m)" },
        { "{\"type\":\"integer\",\"minimum\":5,\"exclusiveMaximum\":5}", "a minimum above" },
        { "{\"type\":\"integer\",\"maximum\":\"9\"}", "\"maximum\" is supported on integers only" },
        { "{\"type\":\"integer\",\"minimum\":1e16}", "16 digits reaches accept nothing" },
        { "{\"properties\":{\"a\\nb\":{\"pattern\":\"x\"}}}", "(at /properties/a?b)" }, /* one line */
        { "{\"type\":\"integer\",\"exclusiveMaximum\":-9999999999999999}", "16 digits reaches" },
        { "{\"type\":\"string\",\"multipleOf\":2}", "\"multipleOf\" is not supported" },
        { "{\"$ref\":\"#/nowhere\"}", "points nowhere" },
        { "{\"$ref\":\"#\"}", "a cycle of references" },
        { "{\"type\":\"bogus\"}", "type: expected" },
        { "{\"required\":[\"x\"]}", "names a property that properties does not define" },
        { "false", "accepts nothing" },
        { "{\"anyOf\":[{\"type\":\"string\"}],\"type\":\"string\"}", "beside other assertions" },
        { "{\"minItems\":3,\"maxItems\":1}", "a minimum above its maximum" },
        { "{\"items\":[{\"type\":\"string\"}]}", "a tuple" },
        { "{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", "allOf of more than one" },
        { "{\"$ref\":\"http://example.com/s.json\"}", "points nowhere" },
        { "[1]", "expected a schema" },
        { "{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#\"}]}", "one of its own branches" },
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        json_t *j = json_loads(refused[i].schema, JSON_DECODE_ANY, NULL);
        struct fl_schema *sc = NULL;
        struct fl_err err = { "" };
        const int rc = fl_schema_compile(j, &sc, &err);
        CHECK(rc == -EINVAL && strstr(err.msg, refused[i].says) &&
                  !strncmp(err.msg, "json_schema: ", 13),
              "%s: rc %d, \"%s\" (wanted \"%s\")", refused[i].schema, rc, err.msg,
              refused[i].says);
        fl_schema_free(sc);
        json_decref(j);
    }
}

/* Random edits of the valid texts: whatever the matcher finishes is JSON
 * the test's validator accepts. */
static void test_schema_random(void)
{
    static const char bytes[] = "{}[]\":,0123456789-.eE+ \\tnulrasfx\xc3\xa9";
    int finished = 0, tries = 0;
    static struct fl_schema_state m;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        json_t *j = json_loads(cases[c].schema, 0, NULL);
        struct fl_schema *sc = NULL;
        if (!j || fl_schema_compile(j, &sc, NULL))
            continue;
        for (int t = 0; t < 20000; t++, tries++) {
            char s[256];
            const unsigned pick = next(2);
            const char *from = cases[c].valid[pick] ? cases[c].valid[pick] : cases[c].valid[0];
            size_t n = strlen(from);
            memcpy(s, from, n);
            for (unsigned e = 0, edits = 1 + next(3); e < edits && n + 2 < sizeof(s); e++) {
                const size_t at = next((unsigned)n + 1);
                const unsigned op = next(3);
                if (op == 0 && at < n) { /* replace */
                    s[at] = bytes[next(sizeof(bytes) - 1)];
                } else if (op == 1 && at < n) { /* delete */
                    memmove(s + at, s + at + 1, n - at - 1);
                    n--;
                } else { /* insert */
                    memmove(s + at + 1, s + at, n - at);
                    s[at] = bytes[next(sizeof(bytes) - 1)];
                    n++;
                }
            }
            if (!feed_with(sc, &m, s, n) || !fl_schema_done(&m))
                continue;
            finished++;
            json_error_t e;
            json_t *inst = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
            /* past jansson's range, or bytes the matcher leaves to the writer
             * (invalid UTF-8 is made valid when the answer is written) */
            if (!inst && (strstr(e.text, "overflow") || strstr(e.text, "decode byte")))
                continue;
            CHECK(inst && instance_of(inst, j, j), "case %zu: \"%.*s\" finished but is %s", c,
                  (int)n, s, inst ? "not an instance" : e.text);
            json_decref(inst);
        }
        fl_schema_free(sc);
        json_decref(j);
    }
    CHECK(finished > 1000, "the edits finish often enough to mean something (%d)", finished);
    printf("schemas, random edits: %d of %d finished, each an instance\n", finished, tries);
}

int main(void)
{
    CHECK(!fl_schema_any_object(&object), "out of memory");
    test_valid();
    test_invalid();
    test_limits();
    test_against_jansson();
    test_random_bytes();
    test_mask("tests/data/qwen3moe-tiny-F16.gguf", 1);
    test_mask("tests/data/vocab/ggml-vocab-deepseek-llm.gguf", 7);
    test_schema_cases();
    test_schema_refusals();
    test_schema_random();
    fl_schema_free(object);
    return check_summary("test-json-schema");
}

/* test-json-prefix: text/json-prefix.h on documents written here. Every
 * prefix of a valid object is accepted and only the whole one is done;
 * each invalid text is refused at the byte the comment names (or earlier
 * bytes pass and that one fails); feeding in pieces equals feeding at once;
 * the whitespace and depth limits hold. Also checked against jansson: random
 * byte strings over JSON's alphabet, which the automaton accepts as a
 * finished object exactly when jansson parses them as an object that
 * starts the text (numbers
 * too large for jansson aside). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "base/json.h"
#include "gguf/gguf.h"
#include "tests/check.h"
#include "text/json-mode.h"
#include "text/json-prefix.h"
#include "text/tokenizer.h"

static const char *const valid[] = {
    "{}",
    "{\"a\":1}",
    "{\n \"key\" : \"value\" , \"n\" : -0.5e+10 }",
    "{\"x\":[1,2,3,[],{},\"s\",true,false,null],\"y\":{\"z\":{\"w\":[]}}}",
    "{\"esc\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\uD83D\"}",
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
    { " {}", 0 },              /* the object starts the answer */
};

static bool feed_all(struct fl_json_prefix *m, const char *s, size_t n)
{
    fl_json_prefix_init(m);
    return fl_json_prefix_feed(m, s, n);
}

static void test_valid(void)
{
    for (size_t v = 0; v < sizeof(valid) / sizeof(valid[0]); v++) {
        const size_t n = strlen(valid[v]);
        for (size_t i = 0; i <= n; i++) {
            struct fl_json_prefix m;
            CHECK(feed_all(&m, valid[v], i), "valid %zu: prefix of %zu bytes refused", v, i);
            CHECK(m.done == (i == n), "valid %zu: done after %zu of %zu bytes: %d", v, i, n,
                  m.done);
        }
        struct fl_json_prefix a, b; /* in two-byte pieces = at once */
        fl_json_prefix_init(&a);
        for (size_t i = 0; i < n; i += 2)
            fl_json_prefix_feed(&a, valid[v] + i, n - i < 2 ? n - i : 2);
        feed_all(&b, valid[v], n);
        CHECK(!memcmp(&a, &b, sizeof(a)), "valid %zu: pieces differ from a whole feed", v);
    }
}

static void test_invalid(void)
{
    for (size_t v = 0; v < sizeof(invalid) / sizeof(invalid[0]); v++) {
        const size_t n = strlen(invalid[v].text), ok = invalid[v].ok;
        struct fl_json_prefix m;
        CHECK(feed_all(&m, invalid[v].text, ok), "invalid %zu: its first %zu bytes refused", v,
              ok);
        CHECK(!feed_all(&m, invalid[v].text, ok + 1) || ok + 1 > n,
              "invalid %zu (%s): byte %zu accepted", v, invalid[v].text, ok);
        CHECK(!feed_all(&m, invalid[v].text, n), "invalid %zu accepted whole", v);
    }
}

static void test_limits(void)
{
    struct fl_json_prefix m;
    CHECK(feed_all(&m, "{} \n", 4) && m.done, "whitespace after the object: done still");
    char ws[64];
    memset(ws, ' ', sizeof(ws));
    fl_json_prefix_init(&m);
    CHECK(fl_json_prefix_feed(&m, "{", 1) && fl_json_prefix_feed(&m, ws, FL_JSON_MAX_WS),
          "%d blanks in a row pass", FL_JSON_MAX_WS);
    CHECK(!fl_json_prefix_feed(&m, ws, 1), "one more does not");
    CHECK(fl_json_prefix_feed(&m, "\"k\"", 3) && fl_json_prefix_feed(&m, ws, FL_JSON_MAX_WS),
          "a token resets the count");
    char deep[2 * FL_JSON_MAX_DEPTH + 8] = "{\"a\":";
    size_t n = strlen(deep);
    for (int d = 1; d < FL_JSON_MAX_DEPTH; d++)
        deep[n++] = '[';
    CHECK(feed_all(&m, deep, n), "%d levels pass", FL_JSON_MAX_DEPTH);
    CHECK(!fl_json_prefix_feed(&m, "[", 1), "one more level does not");
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
        struct fl_json_prefix m;
        const bool ours = feed_all(&m, s, n) && m.done;
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
        struct fl_json_prefix m;
        const bool ours = feed_all(&m, s, n) && m.done;
        json_error_t e;
        json_t *j = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
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

/* json-mode.h's mask over a real vocabulary, at every prefix of an object:
 * a token stays exactly when its piece, fed by itself, continues the text
 * (no control or end-of-generation token ever). */
static void test_mask(void)
{
    struct gguf_file *g = NULL;
    struct fl_tokenizer *tok = NULL;
    struct fl_err err = { "" };
    if (gguf_open("tests/data/qwen3moe-tiny-F16.gguf", &g, &err) || fl_tokenizer_load(g, &tok, &err)) {
        CHECK(0, "tokenizer: %s", err.msg);
        return;
    }
    const int32_t V = fl_n_vocab(tok);
    struct fl_json_vocab *jv = NULL;
    CHECK(fl_json_vocab_new(tok, V, &jv) == 0, "vocabulary");
    float *row = malloc(sizeof(float) * (size_t)V), *out = malloc(sizeof(float) * (size_t)V);
    for (int32_t id = 0; id < V; id++)
        row[id] = (float)(id % 7);
    const char *doc = valid[3];
    int masks = 0;
    for (size_t i = 0; i <= strlen(doc) && jv; i++) {
        struct fl_json_prefix m;
        feed_all(&m, doc, i);
        const int32_t left = fl_json_mask(jv, &m, row, out);
        int32_t want = 0;
        for (int32_t id = 0; id < V; id++) {
            char piece[256];
            int n = fl_token_is_eog(tok, id) ? 0
                                             : fl_token_to_piece(tok, id, piece, sizeof(piece), false, false);
            struct fl_json_prefix c = m;
            const bool ok = !m.done && n > 0 && fl_json_prefix_feed(&c, piece, (size_t)n);
            want += ok;
            if ((out[id] == row[id]) != ok || (!ok && out[id] != -INFINITY)) {
                CHECK(0, "prefix %zu, token %d: mask %g, continues %d", i, id, out[id], ok);
                i = strlen(doc);
                break;
            }
        }
        CHECK(left == want, "prefix %zu: %d left, %d continue", i, left, want);
        masks++;
    }
    printf("mask = each piece fed alone, at %d prefixes over %d tokens\n", masks, V);
    free(row);
    free(out);
    fl_json_vocab_free(jv);
    fl_tokenizer_free(tok);
    gguf_close(g);
}

int main(void)
{
    test_valid();
    test_invalid();
    test_limits();
    test_against_jansson();
    test_random_bytes();
    test_mask();
    return check_summary("test-json-prefix");
}

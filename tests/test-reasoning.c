/* test-reasoning: an answer's <think> part (text/reasoning.h).
 *
 * A finished answer's split is checked against a second reading written
 * here from the rule as llama-server's "deepseek" format states it
 * (strip, find, split on NUL-terminated copies), on fixed answers and on
 * 200,000 random ones built from the pieces that matter (tags, partial
 * tags, blanks, text), 100,000 in gpt-oss's harmony channels and 100,000 in MiniMax-M3's
 * <mm:think> (whose answers without reasoning open with a bare </mm:think>) and 100,000 in
 * Kimi K3's tagged parts (the response ending at a close tag outside its tools part). A growing answer's split is checked, at every
 * length, to be a prefix of the finished one at the same place, settled no
 * further than its bytes, and never going back: what a stream sends is
 * exactly what the whole answer says. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tests/check.h"
#include "text/reasoning.h"
#include "text/think-budget.h"
#include "text/tokenizer.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* s stripped of blanks at both ends, in place */
static char *strip(char *s)
{
    while (is_blank(*s))
        s++;
    size_t n = strlen(s);
    while (n && is_blank(s[n - 1]))
        s[--n] = '\0';
    return s;
}

static bool starts(const char *s, const char *prefix)
{
    return prefix[0] && !strncmp(s, prefix, strlen(prefix));
}

/* The rule read directly: reasoning and answer as new strings in r and c
 * (each at least strlen(text) + 1 bytes). */
static void spec(const struct fl_reasoning_tags *tags, const char *text, bool opened, char *r,
                 char *c)
{
    char *t = malloc(strlen(text) + strlen(tags->open) + 1), *u;
    sprintf(t, "%s%s", opened ? tags->open : "", text);
    for (u = t; is_blank(*u); u++)
        ;
    r[0] = '\0';
    strcpy(c, text);
    if (starts(u, tags->open)) {
        char *body = u + strlen(tags->open), *close = strstr(body, tags->close);
        c[0] = '\0';
        if (close) {
            char *after = close + strlen(tags->close);
            while (is_blank(*after))
                after++;
            strcpy(c, starts(after, tags->answer) ? after + strlen(tags->answer) : after);
            *close = '\0';
        }
        strcpy(r, strip(body));
    } else if (starts(u, tags->direct)) {
        strcpy(c, u + strlen(tags->direct));
    }
    /* an answer that is a part of its own ends at the first end tag outside
     * the blocks of calls (a block opens bare or right after its lead) */
    for (char *p = c; tags->end && *p; p++) {
        const size_t ln = tags->lead ? strlen(tags->lead) : 0;
        const bool led = ln && starts(p, tags->lead) && starts(p + ln, tags->block);
        if (!starts(p, tags->block) && !led) {
            if (starts(p, tags->end)) {
                *p = '\0';
                break;
            }
            continue;
        }
        char *be = strstr(p + (led ? ln : 0) + strlen(tags->block), tags->block_end);
        if (!be)
            break;
        p = be + strlen(tags->block_end) - 1;
    }
    free(t);
}

static void check_split_tags(const struct fl_reasoning_tags *tags, const char *text, bool opened,
                             const char *want_r, const char *want_c)
{
    struct fl_reasoning_split sp;
    const size_t n = strlen(text);
    fl_reasoning_split_tags(tags, text, n, opened, true, &sp);
    CHECK(sp.r_len == strlen(want_r) && !memcmp(text + sp.r_off, want_r, sp.r_len) &&
              sp.c_len == strlen(want_c) && !memcmp(text + sp.c_off, want_c, sp.c_len) &&
              sp.settled == n,
          "'%s' (opened %d): reasoning '%.*s' answer '%.*s', want '%s' '%s'", text, opened,
          (int)sp.r_len, text + sp.r_off, (int)sp.c_len, text + sp.c_off, want_r, want_c);
}

static void check_split(const char *text, bool opened, const char *want_r, const char *want_c)
{
    check_split_tags(&fl_think_tags, text, opened, want_r, want_c);
}

static void test_fixed(void)
{
    check_split("<think>\nplan A\n</think>\n\nAnswer A.", false, "plan A", "Answer A.");
    check_split("  \n<think>x</think>y", false, "x", "y");
    check_split("Hello", false, "", "Hello");
    check_split("  Hello <think>x</think>", false, "", "  Hello <think>x</think>");
    check_split("<thinking>x</thinking>", false, "", "<thinking>x</thinking>");
    check_split("<think>\n\n</think>\n\nHi", false, "", "Hi");
    check_split("<think>cut short", false, "cut short", "");
    check_split("<think>a</think>b</think>c", false, "a", "b</think>c");
    check_split("plan\n</think>\n\nok", true, "plan", "ok");
    check_split("no close", true, "no close", "");
    check_split("<think>x</think>y", true, "<think>x", "y");
    check_split("", true, "", "");
    check_split("", false, "", "");
    /* gpt-oss's channels */
    const struct fl_reasoning_tags *h = &fl_harmony_tags;
    check_split_tags(h, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>"
                     "final<|message|>Hello!", false, "Think.", "Hello!");
    check_split_tags(h, "<|channel|>final<|message|>Hi", false, "", "Hi");
    check_split_tags(h, "<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>"
                     "commentary<|message|>B", false, "A", "<|start|>assistant<|channel|>commentary"
                     "<|message|>B");
    check_split_tags(h, "plain", false, "", "plain");
    /* MiniMax-M3's: a bare </mm:think> opens an answer without reasoning */
    const struct fl_reasoning_tags *mm = &fl_mm_think_tags;
    check_split_tags(mm, "<mm:think>plan</mm:think>Hi", false, "plan", "Hi");
    check_split_tags(mm, "</mm:think>Hi", false, "", "Hi");
    check_split_tags(mm, "\n</mm:think> Hi", false, "", " Hi");
    check_split_tags(mm, "Hi</mm:think>", false, "", "Hi</mm:think>");
    check_split_tags(mm, "<think>x</think>y", false, "", "<think>x</think>y");
    check_split_tags(mm, "plan</mm:think>\nok", true, "plan", "ok");
    /* Kimi K3's: the response part ends at a close tag, unless the tools part follows */
    const struct fl_reasoning_tags *k3 = &fl_kimi_k3_tags;
    check_split_tags(k3, "plan<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|>"
                     "<|close|>message<|sep|>", true, "plan", "Hi");
    check_split_tags(k3, "Hi<|close|>response<|sep|><|close|>message<|sep|>", false, "", "Hi");
    check_split_tags(k3, "Hi<|close|>response<|sep|><|open|>tools<|sep|>C<|close|>call<|sep|>"
                     "<|close|>tools<|sep|><|close|>message<|sep|>", false, "",
                     "Hi<|close|>response<|sep|><|open|>tools<|sep|>C<|close|>call<|sep|>"
                     "<|close|>tools<|sep|>");
    check_split_tags(k3, "Hi<|close|>response<|sep|><|open|>tools<|sep|>C<|close|>call", false, "",
                     "Hi<|close|>response<|sep|><|open|>tools<|sep|>C<|close|>call");
    /* the tools part with no response part before it, or the response left open */
    check_split_tags(k3, "plan<|close|>think<|sep|><|open|>tools<|sep|>C<|close|>call<|sep|>"
                     "<|close|>tools<|sep|><|close|>message<|sep|>", true, "plan",
                     "<|open|>tools<|sep|>C<|close|>call<|sep|><|close|>tools<|sep|>");
    check_split_tags(k3, "Hi<|open|>tools<|sep|>C<|close|>call<|sep|><|close|>tools<|sep|>"
                     "<|close|>message<|sep|>", false, "",
                     "Hi<|open|>tools<|sep|>C<|close|>call<|sep|><|close|>tools<|sep|>");
    check_split_tags(k3, "Hi<|close|>response<|sep|><|open|>tool<|close|>message<|sep|>", false, "",
                     "Hi");
    struct fl_reasoning_split sp;
    for (int k = 0; k < 4; k++) { /* nothing written yet: a NULL text */
        fl_reasoning_split(NULL, 0, k & 1, k & 2, &sp);
        CHECK(sp.r_len == 0 && sp.c_len == 0 && sp.settled == 0, "NULL text (%d)", k);
    }
}

static void check_growth(const struct fl_reasoning_tags *tags, const char *text, bool opened)
{
    const size_t n = strlen(text);
    struct fl_reasoning_split fin, sp, prev = { 0 };
    fl_reasoning_split_tags(tags, text, n, opened, true, &fin);
    char *r = malloc(n + 1), *c = malloc(n + 1);
    spec(tags, text, opened, r, c);
    CHECK(fin.r_len == strlen(r) && !memcmp(text + fin.r_off, r, fin.r_len) &&
              fin.c_len == strlen(c) && !memcmp(text + fin.c_off, c, fin.c_len),
          "'%s' (opened %d): '%.*s' / '%.*s', the rule says '%s' / '%s'", text, opened,
          (int)fin.r_len, text + fin.r_off, (int)fin.c_len, text + fin.c_off, r, c);
    for (size_t k = 0; k <= n; k++) {
        fl_reasoning_split_tags(tags, text, k, opened, false, &sp);
        const bool r_ok = !sp.r_len || (sp.r_off == fin.r_off && sp.r_len <= fin.r_len);
        const bool c_ok = !sp.c_len || (sp.c_off == fin.c_off && sp.c_len <= fin.c_len);
        CHECK(r_ok && c_ok && sp.settled <= k && sp.settled >= prev.settled &&
                  sp.r_len >= prev.r_len && sp.c_len >= prev.c_len && sp.state >= prev.state &&
                  sp.r_off + sp.r_len <= k && sp.c_off + sp.c_len <= k,
              "'%s' (opened %d) at %zu: reasoning %zu+%zu answer %zu+%zu settled %zu; finished "
              "%zu+%zu %zu+%zu", text, opened, k, sp.r_off, sp.r_len, sp.c_off, sp.c_len,
              sp.settled, fin.r_off, fin.r_len, fin.c_off, fin.c_len);
        prev = sp;
    }
    free(r);
    free(c);
}

/* Random answers of n_piece pieces at tags. */
static void random_answers(const struct fl_reasoning_tags *tags, const char *const *piece,
                           int n_piece, int count)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char text[1024];
    for (int t = 0; t < count; t++) {
        text[0] = '\0';
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const int len = (int)(x % 12);
        for (int i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            strcat(text, piece[x % (uint64_t)n_piece]);
        }
        check_growth(tags, text, t & 1);
    }
}

static void test_random(void)
{
    static const char *const think[] = { "<think>", "</think>", "<", "</", "</thi", "<thi",
                                         " ", "\n", "\t", "a", "b c", "\xc3\xa9", ">" };
    random_answers(&fl_think_tags, think, (int)(sizeof(think) / sizeof(think[0])), 200000);
    static const char *const harmony[] = {
        "<|channel|>analysis<|message|>", "<|end|>", "<|start|>assistant<|channel|>final<|message|>",
        "<|channel|>final<|message|>", "<|start|>assistant", "<|channel|>", "<|", "<|end", " ",
        "\n", "a", "b c", "<|channel|>commentary<|message|>"
    };
    random_answers(&fl_harmony_tags, harmony, (int)(sizeof(harmony) / sizeof(harmony[0])), 100000);
    static const char *const mm[] = { "<mm:think>", "</mm:think>", "<", "</", "</mm:", "<mm:",
                                      " ", "\n", "a", "b c", "<think>", ">" };
    random_answers(&fl_mm_think_tags, mm, (int)(sizeof(mm) / sizeof(mm[0])), 100000);
    static const char *const k3[] = { "<|open|>think<|sep|>", "<|close|>think<|sep|>",
                                      "<|open|>response<|sep|>", "<|close|>response<|sep|>",
                                      "<|open|>tools<|sep|>", "<|close|>tools<|sep|>", "<|close|>",
                                      "<|close|>message<|sep|>", "<|", "<|clo", "<|open|>to", " ",
                                      "a", "\n" };
    random_answers(&fl_kimi_k3_tags, k3, (int)(sizeof(k3) / sizeof(k3[0])), 100000);
}

/* The reasoning budget: nothing forced before the reasoning opens, while
 * it holds fewer tokens than the budget or ends inside a character, or
 * once it closed (or never opened); then the message and the close tag,
 * one token a call, and nothing after them. */
static void test_budget(void)
{
    struct gguf_file *f = NULL;
    struct fl_tokenizer *tok = NULL;
    struct fl_err err = { "" };
    if (gguf_open("tests/data/qwen3moe-tiny-F16.gguf", &f, &err) ||
        fl_tokenizer_load(f, &tok, &err)) {
        CHECK(0, "tokenizer: %s", err.msg);
        return;
    }
    int32_t want[64];
    const int n_want = fl_tokenize(tok, "ok</think>", 10, false, true, want, 64);
    struct fl_think_budget b;
    CHECK(fl_think_budget_init(&b, tok, NULL, false, -1, NULL) == -EINVAL, "a budget of -1");
    CHECK(fl_think_budget_init(&b, tok, NULL, false, 2, "ok") == 0 && b.n_force == n_want &&
              !memcmp(b.force, want, sizeof(*want) * (size_t)n_want), "message and close tag");
    CHECK(fl_think_budget_next(&b, "", 0, 0) == -1 && fl_think_budget_next(&b, " <thi", 5, 2) == -1,
          "undecided: nothing");
    CHECK(fl_think_budget_next(&b, " <think>", 8, 3) == -1 &&
              fl_think_budget_next(&b, " <think>a", 9, 4) == -1, "open, 1 token of 2: nothing");
    CHECK(fl_think_budget_next(&b, " <think>a\xc3", 10, 5) == -1, "inside a character: nothing");
    int k = 0;
    for (int32_t id; (id = fl_think_budget_next(&b, " <think>a\xc3\xa9", 11, 6 + k)) >= 0; k++)
        CHECK(k < n_want && id == want[k], "forced token %d: %d", k, id);
    CHECK(k == n_want, "%d forced, want %d", k, n_want);
    fl_think_budget_reset(&b); /* a byte that starts no character is a whole bad one */
    CHECK(fl_think_budget_next(&b, " <think>", 8, 3) == -1 &&
              fl_think_budget_next(&b, " <think>a\xfe", 10, 5) >= 0, "after 0xFE: forced");
    fl_think_budget_reset(&b);
    CHECK(fl_think_budget_next(&b, " <think>", 8, 3) == -1 &&
              fl_think_budget_next(&b, " <think>a\xf0\x9f", 11, 5) == -1, "inside a 4-byte one: nothing");
    fl_think_budget_reset(&b);
    CHECK(fl_think_budget_next(&b, "<think>a</think>", 16, 9) == -1 &&
              fl_think_budget_next(&b, "<think>a</think>bcd", 19, 12) == -1, "closed: nothing");
    fl_think_budget_reset(&b);
    CHECK(fl_think_budget_next(&b, "hello", 5, 5) == -1 && b.over, "no reasoning: nothing");
    fl_think_budget_free(&b);
    CHECK(fl_think_budget_init(&b, tok, NULL, true, 0, NULL) == 0 &&
              fl_think_budget_next(&b, "", 0, 0) >= 0, "opened by the prompt, 0: forced at once");
    fl_think_budget_free(&b);
    fl_tokenizer_free(tok);
    gguf_close(f);
}

int main(void)
{
    test_fixed();
    test_random();
    test_budget();
    return check_summary("test-reasoning");
}

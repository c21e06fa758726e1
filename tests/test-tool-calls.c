/* test-tool-calls: the calls in an answer (text/tool-calls.h): chatml's
 * and GLM-4.5's <tool_call> blocks and MiniMax-M2's <minimax:tool_call>
 * blocks of <invoke>s (M3's namespaced and nested) read into names and arguments with the
 * text around them as content; anything not well-formed stays content, whole; and the
 * bytes a stream may send before it knows whether a call starts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "text/chat.h"
#include "text/tool-calls.h"

static void parse_as(enum fl_chat_format fmt, const char *text, struct fl_tool_answer *a)
{
    CHECK(fl_tool_calls_parse(fmt, text, strlen(text), a) == 0, "parse '%s'", text);
}

/* Each of texts[0..n) in fmt holds no call: all of it is content. */
static void all_content(enum fl_chat_format fmt, const char *const *texts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct fl_tool_answer a;
        parse_as(fmt, texts[i], &a);
        CHECK(a.n_calls == 0 && !strcmp(a.content, texts[i]), "%s '%s': all content",
              fl_chat_format_name(fmt), texts[i]);
        fl_tool_answer_free(&a);
    }
}

static void parse(const char *text, struct fl_tool_answer *a)
{
    parse_as(FL_CHAT_CHATML, text, a);
}

static void test_calls(void)
{
    struct fl_tool_answer a;
    parse("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
          "</tool_call>", &a);
    CHECK(a.n_calls == 1 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"Paris\",\"days\":2}") && a.content_len == 0 &&
              !a.content[0],
          "one call: %d '%s' content '%s'", a.n_calls, a.n_calls ? a.calls[0].arguments : "", a.content);
    fl_tool_answer_free(&a);

    parse("Let me check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
          "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}\n</tool_call>\n", &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "a") && !strcmp(a.calls[0].arguments, "{}") &&
              !strcmp(a.calls[1].name, "b") && !strcmp(a.calls[1].arguments, "{\"x\":[1,2]}"),
          "two calls, the second's arguments a string holding the object");
    CHECK(!strcmp(a.content, "Let me check both.") && a.content_len == 18, "content '%s'", a.content);
    fl_tool_answer_free(&a);
}

static void test_glm(void)
{
    const char *t = "<think>Two calls.</think>\nChecking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                    "<arg_value>New York</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
                    "<arg_key>opts</arg_key>\n<arg_value>{\"units\": \"C\"}</arg_value>\n</tool_call>\n"
                    "<tool_call>get_time\n</tool_call>";
    struct fl_tool_answer a;
    CHECK(fl_tool_calls_parse(FL_CHAT_GLM45, t, strlen(t), &a) == 0 && a.n_calls == 2, "glm: two calls");
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"New York\",\"days\":3,\"opts\":{\"units\":\"C\"}}") &&
              !strcmp(a.calls[1].name, "get_time") && !strcmp(a.calls[1].arguments, "{}"),
          "glm: names and arguments (strings bare, other values JSON): %s",
          a.n_calls ? a.calls[0].arguments : "");
    CHECK(!strcmp(a.content, "<think>Two calls.</think>\nChecking."), "glm content '%s'", a.content);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<tool_call>\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", /* no name */
        "<tool_call>f\n<arg_key>a</arg_key>\n</tool_call>",                          /* no value */
        "<tool_call>f\n<arg_value>1</arg_value>\n</tool_call>",                      /* no key */
        "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1\n</tool_call>",           /* not closed */
        "<tool_call>f\nstray text</tool_call>",
    };
    all_content(FL_CHAT_GLM45, bad, sizeof(bad) / sizeof(bad[0]));
    /* what no JSON text holds (found by fuzz-tool-calls): a key that is no
     * UTF-8, a NUL in a value, a name outside OpenAI's characters */
    static const char bytes[][80] = {
        "<tool_call>f\n<arg_key>\x9c\x96</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
        "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x\0y</arg_value>\n</tool_call>",
        "<tool_call>get weather\n</tool_call>",
    };
    static const size_t lens[] = { 72, 73, 35 };
    for (size_t i = 0; i < 3; i++) {
        CHECK(fl_tool_calls_parse(FL_CHAT_GLM45, bytes[i], lens[i], &a) == 0 && a.n_calls == 0 &&
                  a.content_len == lens[i], "glm bytes %zu: no call, all content", i);
        fl_tool_answer_free(&a);
    }
}

static void test_minimax(void)
{
    const char *t = "<think>\nTwo at once.\n</think>\n\nChecking.\n<minimax:tool_call>\n"
                    "<invoke name=\"get_weather\">\n<parameter name=\"city\">New York</parameter>\n"
                    "<parameter name=\"days\">3</parameter>\n<parameter name=\"opts\">{\"units\": \"C\"}"
                    "</parameter>\n</invoke>\n<invoke name=\"get_time\">\n</invoke>\n"
                    "</minimax:tool_call>";
    struct fl_tool_answer a;
    CHECK(fl_tool_calls_parse(FL_CHAT_MINIMAX_M2, t, strlen(t), &a) == 0 && a.n_calls == 2,
          "minimax: two invokes in one block");
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"New York\",\"days\":3,\"opts\":{\"units\":\"C\"}}") &&
              !strcmp(a.calls[1].name, "get_time") && !strcmp(a.calls[1].arguments, "{}"),
          "minimax: names and arguments (strings bare, other values JSON): %s",
          a.n_calls ? a.calls[0].arguments : "");
    CHECK(!strcmp(a.content, "<think>\nTwo at once.\n</think>\n\nChecking."), "minimax content '%s'",
          a.content);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<minimax:tool_call>\n</minimax:tool_call>",                                 /* no invoke */
        "<minimax:tool_call>\n<invoke name=\"f\">\n</minimax:tool_call>",             /* not closed */
        "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">1\n</invoke>\n"
        "</minimax:tool_call>",                                                      /* a parameter open */
        "<minimax:tool_call>\n<invoke name=\"f g\">\n</invoke>\n</minimax:tool_call>", /* a bad name */
        "<minimax:tool_call>\n<invoke name=\"f\">\nstray</invoke>\n</minimax:tool_call>",
        "<minimax:tool_call>\n<invoke name=\"f\">\n</invoke>\nstray</minimax:tool_call>",
        "<minimax:tool_call>\n<invoke name=\"f\">\n</invoke>\n",                      /* cut */
    };
    all_content(FL_CHAT_MINIMAX_M2, bad, sizeof(bad) / sizeof(bad[0]));
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_MINIMAX_M2, "Hi <minimax:to", 14) == 3 &&
              fl_tool_calls_content_prefix(FL_CHAT_MINIMAX_M2, "Hi <tool_call>", 14) == 14,
          "minimax: content up to where its block may start");
}

#define NS FL_MINIMAX_M3_NS

/* MiniMax-M3: every tag after its namespace token, objects and arrays
 * nested (an array's entries as <item>s), strings bare, the rest JSON */
static void test_minimax_m3(void)
{
    const char *t = "<mm:think>plan</mm:think>Checking.\n" NS "<tool_call>\n" NS
                    "<invoke name=\"get_weather\">" NS "<city>New York" NS "</city>" NS "<days>3" NS
                    "</days>" NS "<opts>" NS "<units>C" NS "</units>" NS "<hours>" NS "<item>6" NS
                    "</item>" NS "<item>12.5" NS "</item>" NS "</hours>" NS "</opts>" NS "<raw>true" NS
                    "</raw>" NS "<note>" NS "</note>" NS "</invoke>\n" NS "<invoke name=\"get_time\">"
                    NS "</invoke>\n" NS "</tool_call>";
    struct fl_tool_answer a;
    parse_as(FL_CHAT_MINIMAX_M3, t, &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"New York\",\"days\":3,\"opts\":{\"units\":"
                      "\"C\",\"hours\":[6,12.5]},\"raw\":true,\"note\":\"\"}") &&
              !strcmp(a.calls[1].name, "get_time") && !strcmp(a.calls[1].arguments, "{}"),
          "minimax-m3: nested arguments: %d %s", a.n_calls, a.n_calls ? a.calls[0].arguments : "");
    CHECK(!strcmp(a.content, "<mm:think>plan</mm:think>Checking."), "minimax-m3 content '%s'",
          a.content);
    fl_tool_answer_free(&a);
    /* blanks between tags (a model may write newlines) are no values */
    parse_as(FL_CHAT_MINIMAX_M3, NS "<tool_call>\n" NS "<invoke name=\"f\">\n  " NS "<a>\n" NS
             "<item> x " NS "</item>\n" NS "</a>\n" NS "</invoke>\n" NS "</tool_call>", &a);
    CHECK(a.n_calls == 1 && !strcmp(a.calls[0].arguments, "{\"a\":[\" x \"]}"),
          "minimax-m3: blanks between tags: %s", a.n_calls ? a.calls[0].arguments : "");
    fl_tool_answer_free(&a);
    char deep[2048] = NS "<tool_call>" NS "<invoke name=\"f\">";
    for (int i = 0; i < 40; i++)
        strcat(deep, NS "<a>");
    for (int i = 0; i < 40; i++)
        strcat(deep, NS "</a>");
    strcat(deep, NS "</invoke>" NS "</tool_call>");
    const char *const bad[] = {
        NS "<tool_call>\n" NS "</tool_call>",                                         /* no invoke */
        NS "<tool_call>\n" NS "<invoke name=\"f\">" NS "</tool_call>",                 /* not closed */
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "<a>1" NS "</b>" NS "</invoke>" NS "</tool_call>",
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "<a>1" NS "</a>" NS "<a>2" NS "</a>" NS
        "</invoke>" NS "</tool_call>",                                                /* a key twice */
        NS "<tool_call>" NS "<invoke name=\"f g\">" NS "</invoke>" NS "</tool_call>",    /* a bad name */
        NS "<tool_call>" NS "<invoke name=\"f\">stray" NS "</invoke>" NS "</tool_call>",
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "<a>" NS "<b>1" NS "</b>x" NS "</a>" NS
        "</invoke>" NS "</tool_call>",                                     /* text after a nested tag */
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "</invoke>",                      /* cut */
        deep,                                                                /* nested too deep */
    };
    all_content(FL_CHAT_MINIMAX_M3, bad, sizeof(bad) / sizeof(bad[0]));
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_MINIMAX_M3, "Hi ]<]mini", 10) == 3 &&
              fl_tool_calls_content_prefix(FL_CHAT_MINIMAX_M3, "Hi <tool_call>", 14) == 14,
          "minimax-m3: content up to where its block may start");
}

/* Kimi K3: a tools part after the response part; each call's arguments say
 * their JSON type (a string taken as it is), or come as one JSON object */
static void test_kimi_k3(void)
{
    const char *t = "Checking.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call "
                    "tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" "
                    "type=\"string\"<|sep|>42<|close|>argument<|sep|><|open|>argument key=\"a&quot;b\" "
                    "type=\"array\"<|sep|>[1, 2.5]<|close|>argument<|sep|><|open|>argument key=\"o\" "
                    "type=\"object\"<|sep|>{\"k\": null}<|close|>argument<|sep|><|close|>call<|sep|>"
                    "<|open|>call tool=\"now\" index=\"2\"<|sep|><|open|>json type=\"object\"<|sep|>"
                    "{\"tz\": \"UTC\"}<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
                    "<|close|>message<|sep|>";
    struct fl_tool_answer a;
    parse_as(FL_CHAT_KIMI_K3, t, &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"42\",\"a\\\"b\":[1,2.5],\"o\":{\"k\":null}}") &&
              !strcmp(a.calls[1].name, "now") && !strcmp(a.calls[1].arguments, "{\"tz\":\"UTC\"}"),
          "kimi-k3: typed arguments, a JSON object: %d %s", a.n_calls,
          a.n_calls ? a.calls[0].arguments : "");
    CHECK(!strcmp(a.content, "Checking."), "kimi-k3 content '%s'", a.content);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<|close|>response<|sep|><|open|>tools<|sep|><|close|>tools<|sep|>",             /* no call */
        "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>"
        "<|close|>tools<|sep|>",                                                          /* not closed */
        "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|open|>argument "
        "key=\"a\" type=\"number\"<|sep|>x<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
        "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|><|open|>argument "
        "key=\"a\" type=\"string\"<|sep|>1<|close|>argument<|sep|><|open|>argument key=\"a\" "
        "type=\"string\"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
        "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call index=\"1\"<|sep|><|close|>call<|sep|>"
        "<|close|>tools<|sep|>",                                                          /* no name */
        "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>stray"
        "<|close|>call<|sep|><|close|>tools<|sep|>",
    };
    all_content(FL_CHAT_KIMI_K3, bad, sizeof(bad) / sizeof(bad[0]));
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_KIMI_K3, "Hi<|close|>resp", 15) == 2,
          "kimi-k3: content up to where its tools part may start");
    /* a tools part without the response part's close before it (a model that
     * skips the response part, or leaves it open), as llama.cpp reads K3's */
    static const char *const bare[] = { "", "Checking." };
    for (int k = 0; k < 2; k++) {
        char u[512];
        snprintf(u, sizeof(u), "%s<|open|>tools<|sep|><|open|>call tool=\"now\" index=\"1\"<|sep|>"
                 "<|open|>argument key=\"tz\" type=\"string\"<|sep|>UTC<|close|>argument<|sep|>"
                 "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>", bare[k]);
        parse_as(FL_CHAT_KIMI_K3, u, &a);
        CHECK(a.n_calls == 1 && !strcmp(a.calls[0].name, "now") &&
                  !strcmp(a.calls[0].arguments, "{\"tz\":\"UTC\"}") && !strcmp(a.content, bare[k]),
              "kimi-k3: a tools part with no response close before it (%d): %d calls, '%s'", k,
              a.n_calls, a.content);
        fl_tool_answer_free(&a);
    }
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_KIMI_K3, "Hi<|open|>to", 12) == 2 &&
              fl_tool_calls_content_prefix(FL_CHAT_KIMI_K3, "Hi<|open|>tools<|sep|>", 22) == 2 &&
              fl_tool_calls_content_prefix(FL_CHAT_KIMI_K3,
                                           "Hi<|close|>response<|sep|><|open|>tools<|sep|>", 46) == 2 &&
              fl_tool_calls_content_prefix(FL_CHAT_KIMI_K3, "Hi<|open|>told", 14) == 14,
          "kimi-k3: content up to a tools part with or without the response close before it");
}

/* Calls rendered as MiniMax-M3's template writes them read back as the
 * same arguments (nulls left out, as the template leaves them) */
static void test_minimax_m3_round_trip(void)
{
    static const struct fl_chat_tool_call calls[] = {
        { "f", "{\"s\": \"a <b> c\", \"n\": -2.5e-3, \"o\": {\"k\": [1, {\"x\": false}, [\"y\"]], "
               "\"z\": null}, \"i\": 7}", NULL },
        { "g", "{}", NULL },
    };
    const struct fl_chat_msg m[] = { { .role = "user", .content = "q" },
                                     { .role = "assistant", .content = "", .calls = calls, .n_calls = 2 } };
    const struct fl_chat_opts o = { 0 };
    char *out = NULL;
    CHECK(fl_chat_render(FL_CHAT_MINIMAX_M3, m, 2, &o, &out) > 0, "minimax-m3: render the calls");
    const char *block = out ? strstr(out, "]~b]ai\n</mm:think>") : NULL;
    const char *end = block ? strstr(block, "[e~[") : NULL;
    struct fl_tool_answer a = { 0 };
    if (end)
        CHECK(fl_tool_calls_parse(FL_CHAT_MINIMAX_M3, block + 18, (size_t)(end - block - 18), &a) == 0,
              "minimax-m3: parse the rendered calls");
    CHECK(a.n_calls == 2 &&
              !strcmp(a.calls[0].arguments, "{\"s\":\"a <b> c\",\"n\":-0.0025,\"o\":{\"k\":[1,{\"x\":"
                      "false},[\"y\"]]},\"i\":7}") && !strcmp(a.calls[1].arguments, "{}"),
          "minimax-m3: the calls read back: %d %s", a.n_calls, a.n_calls ? a.calls[0].arguments : "");
    fl_tool_answer_free(&a);
    free(out);
}

/* DeepSeek V3.2: DSML invokes whose parameters say whether they are
 * strings (taken as written) or JSON */
static void test_dsml(void)
{
    const char *t = "<think>Two at once.</think>Checking.\n\n<｜DSML｜function_calls>\n"
                    "<｜DSML｜invoke name=\"get_weather\">\n"
                    "<｜DSML｜parameter name=\"city\" string=\"true\">New York</｜DSML｜parameter>\n"
                    "<｜DSML｜parameter name=\"code\" string=\"true\">42</｜DSML｜parameter>\n"
                    "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
                    "<｜DSML｜parameter name=\"opts\" string=\"false\">{\"units\": \"C\"}"
                    "</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n"
                    "</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    struct fl_tool_answer a;
    CHECK(fl_tool_calls_parse(FL_CHAT_DEEPSEEK_V32, t, strlen(t), &a) == 0 && a.n_calls == 2,
          "dsml: two invokes in one block");
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments,
                      "{\"city\":\"New York\",\"code\":\"42\",\"days\":3,\"opts\":{\"units\":\"C\"}}") &&
              !strcmp(a.calls[1].name, "get_time") && !strcmp(a.calls[1].arguments, "{}"),
          "dsml: names and arguments (string=\"true\" as written, else JSON): %s",
          a.n_calls ? a.calls[0].arguments : "");
    CHECK(!strcmp(a.content, "<think>Two at once.</think>Checking."), "dsml content '%s'", a.content);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<｜DSML｜function_calls>\n</｜DSML｜function_calls>",                    /* no invoke */
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n"
        "<｜DSML｜parameter name=\"a\" string=\"false\">not json</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",                           /* a JSON value that is none */
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n"
        "<｜DSML｜parameter name=\"a\" string=\"maybe\">1</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",                           /* no type */
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n"
        "<｜DSML｜parameter name=\"a\">1</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",                           /* untyped */
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n"
        "<｜DSML｜parameter name=\"a\">1</｜DSML｜parameter>\n"
        "<｜DSML｜parameter name=\"b\" string=\"true\">2</｜DSML｜parameter>\n"
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",                           /* untyped, then typed */
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n", /* cut */
    };
    all_content(FL_CHAT_DEEPSEEK_V32, bad, sizeof(bad) / sizeof(bad[0]));
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_DEEPSEEK_V32, "Hi\n\n<｜DSML", 10) == 4,
          "dsml: content up to where its block may start");
}

/* gpt-oss: a message to functions.NAME, the recipient in the role or in
 * the channel header, after a commentary preamble or not */
static void test_gpt_oss(void)
{
    static const struct { const char *text, *content; } v[] = {
        { " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}", "" },
        { "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
          "{\"city\":\"Paris\"}<|call|>", "" },
        { "<|start|>assistant<|channel|>commentary<|message|>Let me check.<|end|>"
          "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
          "{\"city\": \"Paris\"}", "Let me check." },
        { "<|start|>assistant<|channel|>analysis to=functions.get_weather <|constrain|>json"
          "<|message|>{\"city\":\"Paris\"}", "" },
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct fl_tool_answer a;
        parse_as(FL_CHAT_GPT_OSS, v[i].text, &a);
        CHECK(a.n_calls == 1 && !strcmp(a.calls[0].name, "get_weather") &&
                  !strcmp(a.calls[0].arguments, "{\"city\":\"Paris\"}") &&
                  !strcmp(a.content, v[i].content),
              "gpt-oss '%s': %d calls, content '%s'", v[i].text, a.n_calls, a.content);
        fl_tool_answer_free(&a);
    }
    static const char *const bad[] = {
        "Just an answer, to=nobody.",
        " to=functions.f<|channel|>commentary json<|message|>{\"a\": ", /* cut */
        " to=functions.f<|channel|>commentary json<|message|>[1]",        /* not an object */
        " to=functions.f<|channel|>commentary json, please<|message|>{}", /* not a header */
        " to=functions.f<|channel|>final<|message|>{}",                   /* not a call's channel */
        " to=functions.<|channel|>commentary<|message|>{}",               /* no name */
    };
    all_content(FL_CHAT_GPT_OSS, bad, sizeof(bad) / sizeof(bad[0]));
    static const struct { const char *text; size_t want; } p[] = {
        { "Sunny today.", 12 }, { "Sunny <|start|>assistant", 6 }, { "x to=func", 2 },
        { "x <|chan", 2 }, { "to=functions.f", 0 },
    };
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
        const size_t got = fl_tool_calls_content_prefix(FL_CHAT_GPT_OSS, p[i].text, strlen(p[i].text));
        CHECK(got == p[i].want, "gpt-oss content prefix of '%s': %zu, want %zu", p[i].text, got,
              p[i].want);
    }
}

/* Kimi K2: a section of entries, the name between functions. and :INDEX */
static void test_kimi(void)
{
    struct fl_tool_answer a;
    parse_as(FL_CHAT_KIMI_K2_THINKING,
             "Checking both.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
             "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>\n"
             "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
             "<|tool_calls_section_end|>", &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"Paris\"}") &&
              !strcmp(a.calls[1].name, "get_time") && !strcmp(a.content, "Checking both."),
          "kimi: %d calls, content '%s'", a.n_calls, a.content);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>[1]"
        "<|tool_call_end|><|tool_calls_section_end|>",                        /* not an object */
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
        "<|tool_calls_section_end|>",                                         /* an entry open */
        "<|tool_calls_section_begin|>x<|tool_calls_section_end|>",            /* no entry */
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
        "<|tool_call_end|>",                                                  /* cut */
    };
    all_content(FL_CHAT_KIMI_K2_INSTRUCT, bad, sizeof(bad) / sizeof(bad[0]));
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_KIMI_K2_INSTRUCT, "Hi <|tool_calls_sec", 19) == 3,
          "kimi: content up to where its section may start");
}

/* DeepSeek V3.1: a section of NAME<｜tool▁sep｜>ARGS entries (the answers of
 * llama.cpp's test-chat.cpp for its template) */
static void test_deepseek(void)
{
    struct fl_tool_answer a;
    parse_as(FL_CHAT_DEEPSEEK_V31,
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": "
             "\"XYZCITY\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", &a);
    CHECK(a.n_calls == 1 && !strcmp(a.calls[0].name, "get_time") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"XYZCITY\"}") && !a.content_len,
          "deepseek: %d calls, content '%s'", a.n_calls, a.content);
    fl_tool_answer_free(&a);
    parse_as(FL_CHAT_DEEPSEEK_V31,
             "CONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": "
             "\"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
             "\"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_time") &&
              !strcmp(a.calls[1].name, "get_weather") &&
              !strcmp(a.calls[1].arguments, "{\"city\":\"Paris\"}") && !strcmp(a.content, "CONTENT"),
          "deepseek: %d calls, content '%s'", a.n_calls, a.content);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>\"x\"<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>",                                           /* not an object */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁calls▁end｜>", /* open */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>", /* cut */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a b<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>",                                           /* no name */
        "<｜tool▁calls▁begin｜>x<｜tool▁calls▁end｜>",                     /* no entry */
    };
    all_content(FL_CHAT_DEEPSEEK_V31, bad, sizeof(bad) / sizeof(bad[0]));
    static const char part[] = "Hi <｜tool▁calls";
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_DEEPSEEK_V31, part, sizeof(part) - 1) == 3,
          "deepseek: content up to where its section may start");
}

/* DeepSeek V3-0324 / R1: TYPE<｜tool▁sep｜>NAME and the arguments in a ```json
 * fence (as their templates write a call; the fence's "json" may be left
 * out) */
static void test_deepseek_fenced(void)
{
    struct fl_tool_answer a;
    parse_as(FL_CHAT_DEEPSEEK_V3_0324,
             "Let me see.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
             "```json\n{\"city\": \"Paris\", \"note\": \"a ``` inside\"}\n```<｜tool▁call▁end｜>\n"
             "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```\n{}\n```<｜tool▁call▁end｜>"
             "<｜tool▁calls▁end｜>", &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"Paris\",\"note\":\"a ``` inside\"}") &&
              !strcmp(a.calls[1].name, "get_time") && !strcmp(a.calls[1].arguments, "{}") &&
              !strcmp(a.content, "Let me see."),
          "deepseek fenced: %d calls, content '%s'", a.n_calls, a.content);
    fl_tool_answer_free(&a);
    parse_as(FL_CHAT_DEEPSEEK_R1,
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f \n```json\n{\"a\": [1]}"
             "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", &a);
    CHECK(a.n_calls == 1 && !strcmp(a.calls[0].name, "f") && !strcmp(a.calls[0].arguments, "{\"a\":[1]}"),
          "deepseek r1: %d calls", a.n_calls);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",                            /* not an object */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",                            /* fence not closed */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f{}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>",                                              /* no fence: V3.1's */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>\n```json\n{}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",                            /* no name */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```"
        "<｜tool▁call▁end｜>",                                               /* cut */
    };
    all_content(FL_CHAT_DEEPSEEK_V3_0324, bad, sizeof(bad) / sizeof(bad[0]));
}

/* Qwen3.5 / Qwen3-Coder: XML calls (the answers of llama.cpp's test-chat.cpp
 * for Qwen3.5's template), values JSON when they read as such */
static void test_qwen_xml(void)
{
    struct fl_tool_answer a;
    parse_as(FL_CHAT_QWEN35,
             "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
             "</function>\n</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n"
             "<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n"
             "</tool_call>", &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "special_function") &&
              !strcmp(a.calls[0].arguments, "{\"arg1\":1}") &&
              !strcmp(a.calls[1].arguments, "{\"arg1\":1,\"arg2\":2}") && !a.content_len,
          "qwen xml: %d calls, '%s'", a.n_calls, a.n_calls ? a.calls[0].arguments : a.content);
    fl_tool_answer_free(&a);
    parse_as(FL_CHAT_QWEN3_CODER,
             "Let me write it.\n<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n"
             "    print(\"Hello, world!\")\n\nhello()\n</parameter>\n</function>\n</tool_call>", &a);
    CHECK(a.n_calls == 1 && !strcmp(a.calls[0].name, "python") &&
              !strcmp(a.calls[0].arguments,
                      "{\"code\":\"def hello():\\n    print(\\\"Hello, world!\\\")\\n\\nhello()\"}") &&
              !strcmp(a.content, "Let me write it."),
          "qwen-coder xml: %d calls, '%s', content '%s'", a.n_calls,
          a.n_calls ? a.calls[0].arguments : "", a.content);
    fl_tool_answer_free(&a);
    static const char *const bad[] = {
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>", /* open value */
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",       /* Qwen3's JSON */
        "<tool_call>\n<function=f>\n</tool_call>",                                  /* no </function> */
    };
    all_content(FL_CHAT_QWEN35, bad, sizeof(bad) / sizeof(bad[0]));
}

/* GLM-4.7: GLM's pairs without the newlines */
static void test_glm47(void)
{
    struct fl_tool_answer a;
    parse_as(FL_CHAT_GLM47, "Looking.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris"
             "</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call><tool_call>now"
             "</tool_call>", &a);
    CHECK(a.n_calls == 2 && !strcmp(a.calls[0].name, "get_weather") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"Paris\",\"days\":3}") &&
              !strcmp(a.calls[1].name, "now") && !strcmp(a.content, "Looking."),
          "glm-4.7: %d calls, content '%s'", a.n_calls, a.content);
    fl_tool_answer_free(&a);
}

static void test_not_calls(void)
{
    static const char *const texts[] = {
        "Just an answer.",
        "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n", /* not closed (cut by max_tokens) */
        "<tool_call>\n{\"name\": \"a\", \"arguments\": {}\n</tool_call>", /* not JSON */
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                    /* no name */
        "<tool_call>\n{\"name\": \"a\", \"arguments\": [1]}\n</tool_call>",  /* not an object */
        "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call><tool_call>x</tool_call>",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        struct fl_tool_answer a;
        parse(texts[i], &a);
        CHECK(a.n_calls == 0 && !strcmp(a.content, texts[i]) && a.content_len == strlen(texts[i]),
              "'%s': %d calls, content '%s' (want all of it)", texts[i], a.n_calls, a.content);
        fl_tool_answer_free(&a);
    }
    struct fl_tool_answer a;
    CHECK(fl_tool_calls_parse(FL_CHAT_LLAMA3, "x", 1, &a) == -ENOTSUP, "llama3: no tool format");
}

static void test_prefix(void)
{
    static const struct { const char *text; size_t want; } v[] = {
        { "Hello", 5 },
        { "Hello <", 6 },
        { "Hello <tool_c", 6 },
        { "Hello <tool_call>\n{\"na", 6 },
        { "a < b", 5 },
        { "<tool_call", 0 },
        { "x<tool_callx", 12 },
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        const size_t got = fl_tool_calls_content_prefix(FL_CHAT_CHATML, v[i].text, strlen(v[i].text));
        CHECK(got == v[i].want, "content prefix of '%s': %zu, want %zu", v[i].text, got, v[i].want);
    }
    CHECK(fl_tool_calls_content_prefix(FL_CHAT_LLAMA3, "a <tool_c", 9) == 9,
          "a format without calls: all of it");
}

/* An answer read as it grows, byte by byte (fl_tool_calls_partial): every
 * call seen has the name the whole answer's call has, and arguments that
 * only grow, each a prefix of its final ones (whole: all of them); the
 * first call's arguments come in several steps, not once at the end. */
static void grow(enum fl_chat_format fmt, const char *text)
{
    const size_t len = strlen(text);
    struct fl_tool_answer fin;
    parse_as(fmt, text, &fin);
    CHECK(fin.n_calls > 0, "%s: the whole answer has calls", fl_chat_format_name(fmt));
    char *prev[8] = { 0 };
    int n_prev = 0, steps = 0;
    bool ok = true;
    for (size_t k = 0; k <= len && ok; k++) {
        struct fl_tool_partial *p = NULL;
        const int n = fl_tool_calls_partial(fmt, text, k, &p);
        ok = n >= n_prev && n <= fin.n_calls && n <= 8;
        for (int i = 0; ok && i < n; i++) {
            ok = !strcmp(p[i].name, fin.calls[i].name) && p[i].args_len == strlen(p[i].args) &&
                 !strncmp(fin.calls[i].arguments, p[i].args, p[i].args_len) &&
                 (!p[i].whole || !strcmp(fin.calls[i].arguments, p[i].args)) &&
                 (i >= n_prev || !strncmp(p[i].args, prev[i], strlen(prev[i])));
            if (ok && i == 0 && (i >= n_prev || strcmp(p[i].args, prev[i])))
                steps++;
        }
        if (!ok)
            CHECK(0, "%s: %d calls after %zu bytes: %s (%s)", fl_chat_format_name(fmt), n, k,
                  n > 0 ? p[n - 1].args : "", n > 0 ? p[n - 1].name : "");
        for (int i = 0; i < n_prev; i++)
            free(prev[i]);
        for (int i = 0; ok && i < n; i++)
            prev[i] = strdup(p[i].args);
        n_prev = ok ? n : 0;
        fl_tool_partials_free(p, n);
    }
    CHECK(!ok || (n_prev == fin.n_calls && steps >= 3),
          "%s: %d of %d calls at the end, the first's arguments in %d steps",
          fl_chat_format_name(fmt), n_prev, fin.n_calls, steps);
    for (int i = 0; i < n_prev; i++)
        free(prev[i]);
    fl_tool_answer_free(&fin);
}

static void test_partial(void)
{
    grow(FL_CHAT_CHATML, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
         "{\"city\": \"Paris\", \"days\": 3, \"o\": {\"a\": [1, {\"b\": 2}]}, \"s\": \"x,}\\\"y\"}}\n"
         "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>");
    grow(FL_CHAT_GLM45, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
         "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>t</arg_key>\n"
         "<arg_value>[1, 2]</arg_value>\n</tool_call><tool_call>now\n</tool_call>");
    grow(FL_CHAT_GLM47, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
         "<arg_key>days</arg_key><arg_value>3</arg_value><arg_key>x</arg_key><arg_value>y"
         "</arg_value></tool_call>");
    grow(FL_CHAT_MINIMAX_M2, "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
         "name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n<parameter "
         "name=\"x\">y</parameter>\n</invoke>\n<invoke name=\"now\">\n</invoke>\n</minimax:tool_call>");
    grow(FL_CHAT_MINIMAX_M3, NS "<tool_call>\n" NS "<invoke name=\"get_weather\">" NS "<city>Paris" NS
         "</city>" NS "<o>" NS "<a>" NS "<item>1" NS "</item>" NS "</a>" NS "<b>x" NS "</b>" NS "</o>" NS
         "<days>3" NS "</days>" NS "</invoke>\n" NS "<invoke name=\"now\">" NS "</invoke>\n" NS
         "</tool_call>");
    grow(FL_CHAT_KIMI_K3, "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" "
         "index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument"
         "<|sep|><|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
         "<|open|>argument key=\"x\" type=\"array\"<|sep|>[1]<|close|>argument<|sep|><|close|>call<|sep|>"
         "<|open|>call tool=\"now\" index=\"2\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>");
    grow(FL_CHAT_KIMI_K3, "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
         "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
         "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
         "<|open|>argument key=\"x\" type=\"array\"<|sep|>[1]<|close|>argument<|sep|>"
         "<|close|>call<|sep|><|close|>tools<|sep|>");
    grow(FL_CHAT_DEEPSEEK_V32, "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
         "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
         "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
         "<｜DSML｜parameter name=\"x\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
         "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"now\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>");
    grow(FL_CHAT_QWEN35, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>"
         "\n<parameter=days>\n3\n</parameter>\n<parameter=x>\ny\n</parameter>\n</function>\n</tool_call>");
    grow(FL_CHAT_KIMI_K2_INSTRUCT, "<|tool_calls_section_begin|><|tool_call_begin|>functions."
         "get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3, \"x\": [1]}"
         "<|tool_call_end|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}"
         "<|tool_call_end|><|tool_calls_section_end|>");
    grow(FL_CHAT_DEEPSEEK_V31, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
         "{\"city\": \"Paris\", \"days\": 3, \"x\": null}<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
    grow(FL_CHAT_DEEPSEEK_V3_0324, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
         "get_weather\n```json\n{\"city\": \"Paris\", \"days\": 3, \"x\": \"é\"}\n```<｜tool▁call▁end｜>\n"
         "<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n```json\n{}\n```<｜tool▁call▁end｜>"
         "<｜tool▁calls▁end｜>");
    static const struct { enum fl_chat_format fmt; const char *text; } twice[] = {
        { FL_CHAT_CHATML, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1, \"a\": 2}}\n"
          "</tool_call>" },
        { FL_CHAT_GLM45, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>a"
          "</arg_key>\n<arg_value>2</arg_value>\n</tool_call>" },
    };
    for (size_t i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) /* a stream sent a: 1 */
        all_content(twice[i].fmt, &twice[i].text, 1);
    grow(FL_CHAT_GPT_OSS, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
         "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
         "\"Paris\", \"days\": 3, \"x\": [1]}<|call|>");
    printf("calls read as the answer grows: names, then arguments that only grow (12 formats)\n");
}

int main(void)
{
    test_calls();
    test_glm();
    test_minimax();
    test_minimax_m3();
    test_minimax_m3_round_trip();
    test_kimi_k3();
    test_dsml();
    test_gpt_oss();
    test_kimi();
    test_deepseek();
    test_deepseek_fenced();
    test_qwen_xml();
    test_glm47();
    test_not_calls();
    test_prefix();
    test_partial();
    return check_summary("test-tool-calls");
}

/* test-tool-calls: the calls in an answer (text/tool-calls.h): chatml's
 * <tool_call> blocks read into names and arguments with the text around
 * them as content; anything not well-formed stays content, whole; and the
 * bytes a stream may send before it knows whether a call starts. */
#include <errno.h>
#include <string.h>

#include "tests/check.h"
#include "text/tool-calls.h"

static void parse(const char *text, struct fl_tool_answer *a)
{
    CHECK(fl_tool_calls_parse(FL_CHAT_CHATML, text, strlen(text), a) == 0, "parse '%s'", text);
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

int main(void)
{
    test_calls();
    test_not_calls();
    test_prefix();
    return check_summary("test-tool-calls");
}

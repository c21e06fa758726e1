/* test-anthropic.c: Anthropic's Messages API as an OpenAI chat request
 * (api/anthropic.h): bodies against the OpenAI bodies they stand for,
 * written out here; the refusals, each naming its field; the message and
 * error objects written back. (tests/serve-anthropic.js drives the server
 * with Anthropic's own client.) */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/anthropic.h"
#include "api/openai.h"
#include "check.h"
#include "chat-body-check.h"

static void test_requests(void)
{
    converts(api_anthropic_to_chat,
             "{\"model\": \"m\", \"max_tokens\": 9, \"system\": \"Be brief.\", \"messages\": "
             "[{\"role\": \"user\", \"content\": \"Hi\"}], \"stop_sequences\": [\"\\n\"], "
             "\"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 5, \"stream\": true, "
             "\"metadata\": {\"user_id\": \"u\"}}",
             "{\"model\": \"m\", \"max_tokens\": 9, \"messages\": [{\"role\": \"system\", \"content\": "
             "\"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}], \"stop\": [\"\\n\"], "
             "\"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 5, \"stream\": true}",
             "plain fields");
    converts(api_anthropic_to_chat,
             "{\"system\": [{\"type\": \"text\", \"text\": \"A\", \"cache_control\": {\"type\": "
             "\"ephemeral\"}}, {\"type\": \"text\", \"text\": \"B\"}], \"messages\": [{\"role\": "
             "\"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}]}]}",
             "{\"messages\": [{\"role\": \"system\", \"content\": \"AB\"}, {\"role\": \"user\", "
             "\"content\": [{\"type\": \"text\", \"text\": \"x\"}]}]}",
             "system blocks run together (as llama-server), content blocks as parts");
    /* Claude Code: system messages among the turns, passed on as they are;
     * its billing header's cch= checksum written fffff (llama-server's) */
    converts(api_anthropic_to_chat,
             "{\"system\": [{\"type\": \"text\", \"text\": \"x-anthropic-billing-header: "
             "cc_version=2.1; cch=a1b2c; cc_entrypoint=cli;\"}, {\"type\": \"text\", \"text\": "
             "\"You are\"}], \"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
             "{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"system\", \"content\": "
             "[{\"type\": \"text\", \"text\": \"T\"}, {\"type\": \"text\", \"text\": \"U\"}]}]}",
             "{\"messages\": [{\"role\": \"system\", \"content\": \"x-anthropic-billing-header: "
             "cc_version=2.1; cch=fffff; cc_entrypoint=cli;You are\"}, {\"role\": \"user\", "
             "\"content\": \"q\"}, {\"role\": \"system\", \"content\": \"S\"}, {\"role\": "
             "\"system\", \"content\": [{\"type\": \"text\", \"text\": \"T\"}, {\"type\": "
             "\"text\", \"text\": \"U\"}]}]}",
             "system messages among the turns; the billing header's checksum");
    converts(api_anthropic_to_chat,
             "{\"system\": \"x-anthropic-billing-header: cch=12345\", \"messages\": [{\"role\": "
             "\"user\", \"content\": \"q\"}]}",
             "{\"messages\": [{\"role\": \"system\", \"content\": \"x-anthropic-billing-header: "
             "cch=12345\"}, {\"role\": \"user\", \"content\": \"q\"}]}",
             "a checksum without its ';' is left as it is");
    /* a turn with thinking and a call; the next turn's results first, then its text */
    converts(api_anthropic_to_chat,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
             "\"content\": [{\"type\": \"thinking\", \"thinking\": \"hm\", \"signature\": \"s\"}, "
             "{\"type\": \"redacted_thinking\", \"data\": \"x\"}, {\"type\": \"thinking\", "
             "\"thinking\": \"!\"}, {\"type\": \"tool_use\", \"id\": \"t1\", \"name\": \"f\", "
             "\"input\": {\"a\": 1}}, {\"type\": \"tool_use\", \"id\": \"t2\", \"name\": \"g\", "
             "\"input\": {}}]}, {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", "
             "\"tool_use_id\": \"t1\", \"content\": \"r1\"}, {\"type\": \"tool_result\", "
             "\"tool_use_id\": \"t2\", \"content\": [{\"type\": \"text\", \"text\": \"r2\"}], "
             "\"is_error\": true}, {\"type\": \"text\", \"text\": \"go\"}]}], \"tools\": [{\"name\": "
             "\"f\", \"description\": \"F.\", \"input_schema\": {\"type\": \"object\"}}, {\"type\": "
             "\"custom\", \"name\": \"g\", \"input_schema\": {\"type\": \"object\"}}], "
             "\"tool_choice\": {\"type\": \"tool\", \"name\": \"f\", \"disable_parallel_tool_use\": "
             "true}, \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 64}}",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
             "\"content\": [], \"reasoning_content\": \"hm!\", \"tool_calls\": [{\"id\": \"t1\", "
             "\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}}, "
             "{\"id\": \"t2\", \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": "
             "\"{}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"t1\", \"content\": \"r1\"}, "
             "{\"role\": \"tool\", \"tool_call_id\": \"t2\", \"content\": [{\"type\": \"text\", "
             "\"text\": \"r2\"}]}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
             "\"go\"}]}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
             "\"description\": \"F.\", \"parameters\": {\"type\": \"object\"}}}, {\"type\": "
             "\"function\", \"function\": {\"name\": \"g\", \"description\": \"\", \"parameters\": "
             "{\"type\": \"object\"}}}], \"tool_choice\": {\"type\": \"function\", \"function\": "
             "{\"name\": \"f\"}}, \"parallel_tool_calls\": false, \"reasoning_budget_tokens\": 64}",
             "thinking, calls, results, tools, a named tool_choice, a budget");
    converts(api_anthropic_to_chat,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tool_choice\": {\"type\": "
             "\"any\"}, \"thinking\": {\"type\": \"disabled\"}, \"tools\": [{\"name\": \"f\", "
             "\"input_schema\": {}}]}",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tool_choice\": "
             "\"required\", \"chat_template_kwargs\": {\"enable_thinking\": false}, \"tools\": "
             "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"\", "
             "\"parameters\": {}}}]}",
             "tool_choice any, thinking disabled");
    static const char *const bad[][2] = {
        { "[1]", "body" },
        { "{\"messages\": []}", "messages: expected a non-empty array" },
        { "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "messages[0]: expected" },
        { "{\"messages\": [{\"role\": \"system\", \"content\": [{\"type\": \"image\"}]}]}",
          "messages[0].content[0]: expected a text block" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content: expected" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\": {}}]}]}",
          "messages[0].content[0]: image input is not supported" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_use\", \"id\": \"a\", "
          "\"name\": \"f\", \"input\": {}}]}]}", "messages[0].content[0]: tool_use blocks are not "
          "understood in user turns" },
        { "{\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"id\": "
          "\"a\", \"name\": \"f\", \"input\": [1]}]}]}", "messages[0].content[0]: a tool_use block" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", "
          "\"tool_use_id\": \"a\", \"content\": [{\"type\": \"image\"}]}]}]}",
          "messages[0].content[0].content[0]: only text blocks" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"system\": [{\"type\": "
          "\"image\"}]}", "system[0]: expected a text block" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tools\": [{\"type\": "
          "\"bash_20250124\", \"name\": \"bash\"}]}", "tools[0]: Anthropic's server tool" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tools\": [{\"name\": \"f\"}]}",
          "tools[0]: expected" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"tool_choice\": {\"type\": "
          "\"tool\"}}", "tool_choice: expected" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"thinking\": {\"type\": "
          "\"enabled\", \"budget_tokens\": \"a\"}}", "thinking.budget_tokens" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"stop_sequences\": "
          "[\"1\", \"2\", \"3\", \"4\", \"5\", \"6\", \"7\", \"8\", \"9\"]}", "stop_sequences: expected" },
        { "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"stop_sequences\": [5]}",
          "stop_sequences[0]" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        refuses(api_anthropic_to_chat, bad[i][0], bad[i][1]);
}

static void expect_json(json_t *v, const char *want, const char *what)
{
    json_t *w = body_of(want);
    char *g = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK(v && json_equal(v, w), "%s: %s", what, g ? g : "NULL");
    free(g);
    json_decref(v), json_decref(w);
}

static void test_answers(void)
{
    struct fl_tool_call calls[] = { { "f", "{\"a\":1}" } };
    const struct fl_tool_answer ans = { NULL, 0, calls, 1 };
    const struct api_anthropic_message m = {
        .id = "msg_1", .model = "m", .reasoning = "hm", .reasoning_len = 2, .text = "hi\xff",
        .len = 3, .tools = &ans, .stop_reason = api_anthropic_stop_reason("stop", false, true),
        .input_tokens = 10, .cached_tokens = 4, .output_tokens = 3,
    };
    expect_json(api_anthropic_message_json(&m),
                "{\"id\": \"msg_1\", \"type\": \"message\", \"role\": \"assistant\", \"content\": "
                "[{\"type\": \"thinking\", \"thinking\": \"hm\", \"signature\": \"\"}, {\"type\": "
                "\"text\", \"text\": \"hi\\ufffd\"}, {\"type\": \"tool_use\", \"id\": \"toolu_msg_1_0\", "
                "\"name\": \"f\", \"input\": {\"a\": 1}}], \"model\": \"m\", \"stop_reason\": "
                "\"tool_use\", \"stop_sequence\": null, \"usage\": {\"input_tokens\": 6, "
                "\"cache_creation_input_tokens\": 0, \"cache_read_input_tokens\": 4, "
                "\"output_tokens\": 3}}", "a message with thinking, text (not UTF-8) and a call");
    CHECK(!strcmp(api_anthropic_stop_reason("length", false, false), "max_tokens") &&
              !strcmp(api_anthropic_stop_reason("stop", true, false), "stop_sequence") &&
              !strcmp(api_anthropic_stop_reason("stop", false, false), "end_turn"),
          "stop reasons");
    static const struct { unsigned status; const char *type; } errs[] = {
        { 400, "invalid_request_error" }, { 401, "authentication_error" },
        { 404, "not_found_error" }, { 413, "request_too_large" }, { 500, "api_error" },
        { 503, "overloaded_error" },
    };
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        char want[160];
        snprintf(want, sizeof(want), "{\"type\": \"error\", \"error\": {\"type\": \"%s\", "
                 "\"message\": \"why\"}}", errs[i].type);
        expect_json(api_anthropic_error_json(api_error_json("x", "y", "why"), errs[i].status),
                    want, errs[i].type);
    }
}

int main(void)
{
    test_requests();
    test_answers();
    return check_summary("test-anthropic");
}

/* test-responses.c: OpenAI's Responses API as a chat request
 * (api/responses.h): bodies against the chat bodies they stand for,
 * written out here; the refusals, each naming its field; the response
 * object. (tests/serve-responses.js drives the server with the openai
 * client's responses API.) */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/openai.h"
#include "api/responses.h"
#include "check.h"
#include "chat-body-check.h"

static void test_requests(void)
{
    converts(api_responses_to_chat,
             "{\"model\": \"m\", \"instructions\": \"Be brief.\", \"input\": \"Hi\", "
             "\"max_output_tokens\": 9, \"temperature\": 0.5, \"top_p\": 0.9, \"stream\": true, "
             "\"store\": false, \"reasoning\": {\"effort\": \"low\"}, \"text\": {\"format\": "
             "{\"type\": \"json_object\"}}}",
             "{\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
             "{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 9, \"temperature\": 0.5, "
             "\"top_p\": 0.9, \"stream\": true, \"reasoning_effort\": \"low\", \"response_format\": "
             "{\"type\": \"json_object\"}}",
             "plain fields");
    /* an earlier turn given back: reasoning, text and a call in one assistant
     * message, the call's output, a developer message */
    converts(api_responses_to_chat,
             "{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": "
             "\"q\"}]}, {\"type\": \"reasoning\", \"id\": \"rs_1\", \"summary\": [{\"type\": "
             "\"summary_text\", \"text\": \"S\"}], \"content\": [{\"type\": \"reasoning_text\", "
             "\"text\": \"hm\"}]}, {\"type\": \"message\", \"role\": \"assistant\", \"status\": "
             "\"completed\", \"content\": [{\"type\": \"output_text\", \"text\": \"ok\"}]}, "
             "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": "
             "\"{}\"}, {\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": \"r\"}, "
             "{\"role\": \"developer\", \"content\": \"d\"}], \"tools\": [{\"type\": \"function\", "
             "\"name\": \"f\", \"parameters\": {\"type\": \"object\"}, \"strict\": true}, {\"type\": "
             "\"web_search\"}], \"tool_choice\": {\"type\": \"function\", \"name\": \"f\"}, "
             "\"parallel_tool_calls\": false}",
             "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"q\"}]}, "
             "{\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"ok\"}], "
             "\"reasoning_content\": \"hm\", \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", "
             "\"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\", "
             "\"tool_call_id\": \"c1\", \"content\": \"r\"}, {\"role\": \"system\", \"content\": \"d\"}], "
             "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
             "{\"type\": \"object\"}}}], \"tool_choice\": {\"type\": \"function\", \"function\": "
             "{\"name\": \"f\"}}, \"parallel_tool_calls\": false}",
             "items merged into turns, function tools only");
    converts(api_responses_to_chat,
             "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"a\", "
             "\"schema\": {\"type\": \"object\"}, \"strict\": true}}}",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": "
             "\"json_schema\", \"json_schema\": {\"name\": \"a\", \"schema\": {\"type\": \"object\"}}}}",
             "a json_schema format");
    static const char *const bad[][2] = {
        { "[]", "body" },
        { "{}", "input: expected" },
        { "{\"input\": \"x\", \"previous_response_id\": \"resp_1\"}", "previous_response_id" },
        { "{\"input\": \"x\", \"background\": true}", "background" },
        { "{\"input\": \"x\", \"instructions\": 3}", "instructions" },
        { "{\"input\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "input[0]: a message's role" },
        { "{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", \"image_url\": "
          "\"u\"}]}]}", "input[0].content[0]: input_image is not supported" },
        { "{\"input\": [{\"type\": \"function_call\", \"name\": \"f\"}]}", "input[0]: a function_call" },
        { "{\"input\": [{\"type\": \"item_reference\", \"id\": \"x\"}]}", "input[0]: responses are not stored" },
        { "{\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c\", \"output\": "
          "[{\"type\": \"input_file\"}]}]}", "input[0].output.content[0]: input_file" },
        { "{\"input\": \"x\", \"tools\": [{\"type\": \"function\"}]}", "tools[0]: a function tool" },
        { "{\"input\": \"x\", \"tool_choice\": {\"type\": \"file_search\"}}", "tool_choice" },
        { "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\"}}}", "text.format" },
        { "{\"input\": \"x\", \"max_output_tokens\": \"9\"}", "max_output_tokens" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        refuses(api_responses_to_chat, bad[i][0], bad[i][1]);
}

static void test_response(void)
{
    struct fl_tool_call calls[] = { { "f", "{\"a\":1}" } };
    const struct fl_tool_answer ans = { NULL, 0, calls, 1 };
    const struct api_response r = {
        .id = "resp_9", .model = "m", .created = 5, .reasoning = "hm", .reasoning_len = 2,
        .text = "hi", .len = 2, .tools = &ans, .incomplete = true, .input_tokens = 10,
        .cached_tokens = 4, .output_tokens = 3,
    };
    json_t *got = api_response_json(&r), *want = body_of(
        "{\"id\": \"resp_9\", \"object\": \"response\", \"created_at\": 5, \"status\": \"incomplete\", "
        "\"incomplete_details\": {\"reason\": \"max_output_tokens\"}, \"error\": null, \"model\": \"m\", "
        "\"output\": [{\"id\": \"rs_9\", \"type\": \"reasoning\", \"summary\": [], \"content\": "
        "[{\"type\": \"reasoning_text\", \"text\": \"hm\"}], \"status\": \"completed\"}, {\"id\": "
        "\"msg_9\", \"type\": \"message\", \"role\": \"assistant\", \"status\": \"incomplete\", "
        "\"content\": [{\"type\": \"output_text\", \"text\": \"hi\", \"annotations\": [], "
        "\"logprobs\": []}]}, {\"id\": \"fc_9_0\", \"type\": \"function_call\", \"status\": "
        "\"completed\", \"call_id\": \"call_9_0\", \"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}], "
        "\"usage\": {\"input_tokens\": 10, \"input_tokens_details\": {\"cached_tokens\": 4}, "
        "\"output_tokens\": 3, \"output_tokens_details\": {\"reasoning_tokens\": 0}, "
        "\"total_tokens\": 13}}");
    char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK(got && json_equal(got, want), "the response object: %s", g ? g : "NULL");
    free(g);
    json_decref(got), json_decref(want);
}

int main(void)
{
    test_requests();
    test_response();
    return check_summary("test-responses");
}

/* test-api: the OpenAI-compatible documents (api/openai.h): batch lines and
 * request bodies that are accepted, with the fields they carry; malformed
 * ones refused with the field named; the output objects' shape. */
#include <errno.h>
#include <string.h>

#include "api/openai.h"
#include "tests/check.h"

static int parse(const char *line, struct api_batch_line *l, struct fl_err *err)
{
    return api_batch_line_parse(line, strlen(line), l, err);
}

static void test_accepted(void)
{
    struct api_batch_line l;
    struct fl_err err = { "" };
    CHECK(parse("{\"custom_id\":\"r1\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
                "\"text\":\"b\"}]}],\"max_tokens\":12,\"temperature\":0.25,\"top_p\":0.5,\"seed\":42,"
                "\"stop\":[\"x\",\"yz\"],\"frequency_penalty\":0.5,\"typical_p\":0.7,\"unknown\":1}}", &l, &err) == 0,
          "chat line refused: %s", err.msg);
    const struct api_request *r = &l.req;
    CHECK(!strcmp(l.custom_id, "r1") && r->kind == API_CHAT && r->n_msgs == 2 &&
              !strcmp(r->msgs[0].role, "system") && !strcmp(r->msgs[1].content, "ab") &&
              r->max_tokens == 12 && r->n_stop == 2 && !strcmp(r->stop[1], "yz") &&
              !strcmp(r->model, "m"),
          "chat line fields");
    struct fl_sampler_params d, s;
    fl_sampler_defaults(&d, 1);
    api_request_sampling(r, &d, &s);
    CHECK(s.temperature == 0.25f && s.top_p == 0.5f && s.seed == 42 && s.top_k == d.top_k &&
              s.frequency_penalty == 0.5f && s.min_p == d.min_p && s.typical_p == 0.7f &&
              d.typical_p == 1.0f,
          "sampling: given fields over the defaults");
    api_batch_line_free(&l);
    CHECK(parse("{\"custom_id\":\"r2\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":[5,6,7]}}",
                &l, &err) == 0 && l.req.kind == API_COMPLETION && l.req.n_prompt_ids == 3 &&
              l.req.prompt_ids[2] == 7 && l.req.max_tokens == -1,
          "token-id prompt: %s", err.msg);
    api_batch_line_free(&l);
    /* the same fields asking for nothing are accepted */
    CHECK(parse("{\"custom_id\":\"r4\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":"
                "[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[],\"tool_choice\":\"auto\","
                "\"response_format\":{\"type\":\"text\"},\"logprobs\":false,\"top_logprobs\":0,"
                "\"logit_bias\":{},\"echo\":false,\"best_of\":1,\"suffix\":null}}", &l, &err) == 0,
          "fields asking for nothing refused: %s", err.msg);
    api_batch_line_free(&l);
    CHECK(parse("{\"custom_id\":\"r3\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":[\"hi\"],"
                "\"n_predict\":3,\"stop\":\"\\n\"}}", &l, &err) == 0 &&
              !strcmp(l.req.prompt, "hi") && l.req.max_tokens == 3 && l.req.n_stop == 1,
          "[string] prompt: %s", err.msg);
    api_batch_line_free(&l);
}

static void test_refused(void)
{
    static const struct { const char *line, *want; } cases[] = {
        { "not json", "the line" },
        { "[1]", "expected a JSON object" },
        { "{\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\"}}", "custom_id" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/embeddings\",\"body\":{}}", "url" },
        { "{\"custom_id\":\"x\",\"method\":\"GET\",\"url\":\"/v1/completions\",\"body\":{}}", "method" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\"}", "body" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[]}}",
          "body.messages" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"content\":"
          "\"a\"}]}}", "body.messages[0].role" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":[{\"type\":\"image_url\"}]}]}}", "messages[0].content[0]" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":[[1],[2]]}}",
          "body.prompt[0]" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"temperature\":\"hot\"}}", "body.temperature: expected a number" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"top_p\":2}}",
          "body.top_p: 2 is outside" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"max_tokens\":1.5}}", "body.max_tokens: expected an integer" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"n\":2}}",
          "body.n" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}}", "body.stop" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"stop\":\"\"}}",
          "body.stop" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"stream\":true}}", "body.stream" },
        /* asked for what is not generated: refused by name, not ignored */
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\"}]}}", "body.tools: tool calls" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tool_choice\":\"required\"}}", "body.tool_choice" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"response_format\":{\"type\":\"json_object\"}}}",
          "body.response_format: only" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"response_format\":\"json\"}}", "body.response_format" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"logprobs\":true,\"top_logprobs\":2}}", "body.logprobs" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"logprobs\":3}}",
          "body.logprobs" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":{\"5\":-100}}}", "body.logit_bias" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"grammar\":\"root ::= \\\"a\\\"\"}}", "body.grammar" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"echo\":true}}",
          "body.echo" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"best_of\":2}}",
          "body.best_of" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct api_batch_line l;
        struct fl_err err = { "" };
        const int rc = parse(cases[i].line, &l, &err);
        CHECK(rc == -EINVAL && strstr(err.msg, cases[i].want) && !strchr(err.msg, '\n'),
              "case %zu: rc %d, \"%s\" (wanted \"%s\")", i, rc, err.msg, cases[i].want);
        if (i >= 3)
            CHECK(l.custom_id && !strcmp(l.custom_id, "x"), "case %zu: custom_id lost", i);
        api_batch_line_free(&l);
    }
    printf("%zu malformed lines refused, each naming its field\n", sizeof(cases) / sizeof(cases[0]));
}

static void test_outputs(void)
{
    const struct api_completion c = { API_CHAT, "chatcmpl-1", "m", 7, "hi", 2, "length", 3, 2 };
    json_t *o = api_batch_output("r1", 1, "batch_req_1", api_completion_json(&c), NULL, NULL);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(s && strstr(s, "\"custom_id\":\"r1\"") && strstr(s, "\"status_code\":200") &&
              strstr(s, "\"content\":\"hi\"") && strstr(s, "\"finish_reason\":\"length\"") &&
              strstr(s, "\"total_tokens\":5") && strstr(s, "\"error\":null") &&
              strstr(s, "\"object\":\"chat.completion\""),
          "completion output: %s", s);
    free(s);
    json_decref(o);
    o = api_batch_output(NULL, 9, "batch_req_2", NULL, "invalid_request", "line 9: bad");
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(s && strstr(s, "\"custom_id\":null") && strstr(s, "\"line\":9") &&
              strstr(s, "\"response\":null") && strstr(s, "\"code\":\"invalid_request\""),
          "error output: %s", s);
    free(s);
    json_decref(o);
    o = api_error_json("invalid_request_error", "bad_json", "nope");
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(s && !strcmp(s, "{\"error\":{\"code\":\"bad_json\",\"message\":\"nope\","
                          "\"type\":\"invalid_request_error\"}}"), "error object: %s", s);
    free(s);
    json_decref(o);
}

int main(void)
{
    test_accepted();
    test_refused();
    test_outputs();
    return check_summary("test-api");
}

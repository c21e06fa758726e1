/* test-api: the OpenAI-compatible documents (api/openai.h): batch lines and
 * request bodies that are accepted, with the fields they carry; malformed
 * ones refused with the field named; the output objects' shape. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "api/native.h"
#include "api/embeddings.h"
#include "api/openai.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"
#include "tests/check.h"
#include "tests/json-body.h"

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
              !strcmp(r->msgs[0].role, "system") && !strcmp(r->msgs[1].content, "a\nb") &&
              r->max_tokens == 12 && r->n_stop == 2 && !strcmp(r->stop[1], "yz") &&
              !strcmp(r->model, "m"),
          "chat line fields (text parts joined by lines, as llama-server joins them)");
    struct fl_sampler_params d, s;
    fl_sampler_defaults(&d, 1);
    api_request_sampling(r, &d, &s);
    CHECK(s.temperature == 0.25f && s.top_p == 0.5f && s.seed == 42 && s.top_k == d.top_k &&
              s.frequency_penalty == 0.5f && s.min_p == d.min_p && s.typical_p == 0.7f &&
              d.typical_p == 1.0f,
          "sampling: given fields over the defaults");
    api_batch_line_free(&l);
    CHECK(!r->no_cache_prompt, "the prompt cache is on unless a request says");
    CHECK(parse("{\"custom_id\":\"r2\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":[5,6,7],"
                "\"cache_prompt\":false}}", &l, &err) == 0 && l.req.kind == API_COMPLETION &&
              l.req.n_prompt_ids == 3 && l.req.prompt_ids[2] == 7 && l.req.max_tokens == -1 &&
              l.req.no_cache_prompt,
          "token-id prompt, cache_prompt false: %s", err.msg);
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
        { "{\"custom_id\":\"x\",\"url\":\"/v1/moderations\",\"body\":{}}", "url" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/embeddings\",\"body\":{}}", "body.input" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/embeddings\",\"body\":{\"content\":\"a\"}}",
          "body.input" },
        { "{\"custom_id\":\"x\",\"method\":\"GET\",\"url\":\"/v1/completions\",\"body\":{}}", "method" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\"}", "body" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[]}}",
          "body.messages" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"content\":"
          "\"a\"}]}}", "body.messages[0].role" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":[{\"type\":\"image_url\"}]}]}}", "messages[0].content[0]" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":[[1],{}]}}",
          "body.prompt[1]" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"temperature\":\"hot\"}}", "body.temperature: expected a number" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"top_p\":2}}",
          "body.top_p: 2 is outside" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"max_tokens\":1.5}}", "body.max_tokens: expected an integer" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"n\":0}}",
          "body.n" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}}", "body.stop" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"stop\":\"\"}}",
          "body.stop" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"stream\":true}}", "body.stream" },
        /* asked for what is not generated: refused by name, not ignored */
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"functions\":[{\"name\":\"f\"}]}}", "body.functions: the legacy" },
        /* tools: each field named */
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\"}]}}", "body.tools[0]: expected" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
          "\"a b\"}}]}}", "body.tools[0].function.name" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
          "\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}}", "\"f\" is given twice" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tool_choice\":\"required\"}}", "body.tool_choice: asks for a call" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
          "\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}}",
          "no tool is named \"g\"" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
          "\"f\"}}],\"response_format\":{\"type\":\"json_object\"}}}", "body.response_format: JSON mode or a JSON schema and tools" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
          "\"f\",\"arguments\":3}}]}]}}", "body.messages[1].tool_calls[0].function.arguments" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
          "\"f\",\"arguments\":\"{\\\"n\\\":</think>7}\"}}]}]}}",
          "body.messages[1].tool_calls[0].function.arguments: not JSON text" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
          "\"f\",\"description\":7}}]}}", "body.tools[0].function.description: expected a string" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\",\"tool_calls\":[]}]}}", "body.messages[0].tool_calls: expected" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"tools\":"
          "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}}", "body.tools: tools are for chat" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}}",
          "body.response_format.json_schema.schema: expected a JSON schema" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
          "{\"schema\":{\"type\":\"string\",\"pattern\":\"a\"}}}}}",
          "json_schema: \"pattern\" is not supported (at the root)" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"response_format\":{\"type\":\"json_object\",\"schema\":{\"type\":\"string\"}},"
          "\"json_schema\":{\"type\":\"string\"}}}", "body.json_schema: given twice" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"response_format\":{\"type\":\"json\"}}}", "body.response_format: {\"type\": \"text\"}" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"response_format\":\"json\"}}", "body.response_format" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"n_probs\":3}}",
          "body.n_probs" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":{\"5\":-101}}}", "body.logit_bias: expected biases" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":{\"-5\":1}}}", "body.logit_bias: expected token ids" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":{\"99999999999\":1}}}", "body.logit_bias: expected token ids" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":[[\"\",1]]}}", "body.logit_bias: an empty text" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":[[5]]}}", "body.logit_bias: expected [token id, bias] pairs" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":{\"5\":\"ban\"}}}", "body.logit_bias: expected biases" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"logit_bias\":7}}", "body.logit_bias: expected an object" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"grammar\":7}}", "body.grammar: expected a string of GBNF" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_object\"}}}",
          "body.grammar: a grammar and a JSON schema (or JSON mode) both constrain" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{\"type\":\"integer\"}}}",
          "body.grammar: a grammar and a JSON schema" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"grammar\":\"root ::= \\\"a\\\"\",\"tools\":[{\"type\":"
          "\"function\",\"function\":{\"name\":\"f\"}}]}}", "body.grammar: a grammar cannot hold an "
          "answer with tools" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":"
          "\"user\",\"content\":\"a\"}],\"echo\":true}}", "body.echo: echo is for completions" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"echo\":true,"
          "\"stream\":true,\"logprobs\":1}}", "body.echo: echo with logprobs is not streamed" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"max_tokens\":0}}",
          "body.max_tokens: must be at least 1" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"echo\":1}}",
          "body.echo" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\",\"best_of\":2}}",
          "body.best_of" },
        { "{\"custom_id\":\"x\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
          "\"cache_prompt\":\"no\"}}", "body.cache_prompt" },
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
    const struct api_completion c = { .kind = API_CHAT, .id = "chatcmpl-1", .model = "m",
                                      .created = 7, .text = "hi", .len = 2,
                                      .finish_reason = "length", .prompt_tokens = 3,
                                      .completion_tokens = 2, .cached_tokens = 1 };
    json_t *o = api_batch_output("r1", 1, "batch_req_1", api_completion_json(&c), NULL, NULL);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(s && strstr(s, "\"custom_id\":\"r1\"") && strstr(s, "\"status_code\":200") &&
              strstr(s, "\"content\":\"hi\"") && strstr(s, "\"finish_reason\":\"length\"") &&
              strstr(s, "\"total_tokens\":5") && strstr(s, "\"error\":null") &&
              strstr(s, "\"prompt_tokens_details\":{\"cached_tokens\":1}") &&
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

/* logprobs: the request fields, and both answer shapes over a real vocabulary */
static void test_logit_bias(void)
{
    struct api_batch_line l;
    struct fl_err err = { "" };
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":"
                "[{\"role\":\"user\",\"content\":\"a\"}],\"response_format\":{\"type\":"
                "\"json_object\"}}}", &l, &err) == 0 && l.req.json_object,
          "JSON mode: %s", err.msg);
    api_batch_line_free(&l);
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                "\"echo\":true,\"max_tokens\":0,\"logprobs\":1}}", &l, &err) == 0 && l.req.echo &&
              api_request_max_tokens(&l.req, 16, 512) == 0 && l.req.logprobs,
          "echo with max_tokens 0 (the prompt's logprobs alone): %s", err.msg);
    api_batch_line_free(&l);
    /* a schema in each of the three places a client puts one */
    static const char *const schemas[] = {
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":"
        "true,\"schema\":{\"type\":\"integer\"}}}",
        "\"response_format\":{\"type\":\"json_object\",\"schema\":{\"type\":\"integer\"}}",
        "\"json_schema\":{\"type\":\"integer\"}",
    };
    for (int i = 0; i < 3; i++) {
        char line[512];
        snprintf(line, sizeof(line), "{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":"
                 "{\"prompt\":\"a\",%s}}", schemas[i]);
        CHECK(parse(line, &l, &err) == 0 && !l.req.json_object && l.req.json_schema &&
                  !strcmp(fl_json_str(l.req.json_schema, "type"), "integer"),
              "schema %d: %s", i, err.msg);
        api_batch_line_free(&l);
    }
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                "\"logit_bias\":{\"7\":-100,\"1024\":false,\"3\":2.5}}}", &l, &err) == 0 &&
              l.req.n_logit_bias == 3 && l.req.logit_bias[0].id == 7 &&
              l.req.logit_bias[0].bias == -100.0f && l.req.logit_bias[1].id == 1024 &&
              l.req.logit_bias[1].bias == -INFINITY && l.req.logit_bias[2].bias == 2.5f,
          "logit_bias object: %s", err.msg);
    struct gguf_file *g = NULL;
    struct fl_tokenizer *tok = NULL; /* 1025 tokens */
    if (gguf_open("tests/data/qwen3moe-tiny-F16.gguf", &g, &err) ||
        fl_tokenizer_load(g, &tok, &err)) {
        CHECK(0, "tokenizer: %s", err.msg);
        return;
    }
    CHECK(api_request_check_vocab(&l.req, tok, &err) == 0, "ids below 1025 fit");
    l.req.logit_bias[1].id = 1025;
    CHECK(api_request_check_vocab(&l.req, tok, &err) == -EINVAL && strstr(err.msg, "1025"),
          "1025 is outside 1025 tokens: %s", err.msg);
    api_batch_line_free(&l);
    /* a grammar, compiled against the vocabulary: its tokens are the model's */
    static const struct { const char *grammar, *error; } grammars[] = {
        { "root ::= [a-z]+ \\\"!\\\"", NULL },
        { "root ::= <[1024]> \\\"a\\\"", NULL },
        { "root ::= <[1025]>", "grammar: line 1, column 10: a token id outside the vocabulary" },
        { "root ::= item", "grammar: rule 'item' is used but not defined" },
    };
    for (size_t i = 0; i < sizeof(grammars) / sizeof(grammars[0]); i++) {
        char line[256];
        snprintf(line, sizeof(line), "{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":"
                 "{\"prompt\":\"a\",\"grammar\":\"%s\"}}", grammars[i].grammar);
        err.msg[0] = 0;
        const int rc = parse(line, &l, &err) ? -1 : api_request_check_vocab(&l.req, tok, &err);
        CHECK(grammars[i].error ? rc == -EINVAL && strstr(err.msg, grammars[i].error)
                                : rc == 0 && l.req.grammar && l.req.grammar_len > 8,
              "%s: rc %d, %s", grammars[i].grammar, rc, err.msg);
        api_batch_line_free(&l);
    }
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                "\"grammar\":\"\"}}", &l, &err) == 0 && !l.req.grammar, "an empty grammar is none");
    api_batch_line_free(&l);
    /* llama.cpp's text entries: each of the text's tokens (plain text, no
     * BOS) gets the bias, beside the ids */
    int32_t want[64];
    const int n_hello = fl_tokenize(tok, " hello<|im_end|>", 16, false, false, want, 64);
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                "\"logit_bias\":{\"7\":1,\" hello<|im_end|>\":-3}}}", &l, &err) == 0 &&
              l.req.n_logit_bias == 1 && l.req.n_bias_text == 1 &&
              api_request_check_vocab(&l.req, tok, &err) == 0 && n_hello > 3 &&
              l.req.n_logit_bias == 1 + n_hello && l.req.n_bias_text == 0,
          "a text key: %d biases (%s)", l.req.n_logit_bias, err.msg);
    for (int i = 0; i < n_hello && l.req.n_logit_bias == 1 + n_hello; i++)
        CHECK(l.req.logit_bias[1 + i].id == want[i] && l.req.logit_bias[1 + i].bias == -3.0f,
              "text token %d: %d, want %d", i, l.req.logit_bias[1 + i].id, want[i]);
    api_batch_line_free(&l);
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                "\"logit_bias\":[[\"ab\",false],[5,2]]}}", &l, &err) == 0 &&
              api_request_check_vocab(&l.req, tok, &err) == 0 && l.req.n_logit_bias >= 2 &&
              l.req.logit_bias[0].id == 5 && l.req.logit_bias[1].bias == -INFINITY,
          "a text pair banned: %s", err.msg);
    api_batch_line_free(&l);
    char big[5200] = "{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                     "\"logit_bias\":[[\"";
    for (int i = 0; i < 1100; i++) /* far more than 1,024 tokens */
        strcat(big, " x");
    strcat(big, "\",1]]}}");
    CHECK(parse(big, &l, &err) == 0 && api_request_check_vocab(&l.req, tok, &err) == -EINVAL &&
              strstr(err.msg, "more than 1024"), "a text of 1,100 tokens: %s", err.msg);
    api_batch_line_free(&l);
    fl_tokenizer_free(tok);
    gguf_close(g);
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                "\"logit_bias\":[[9,1],[10,false]]}}", &l, &err) == 0 && l.req.n_logit_bias == 2 &&
              l.req.logit_bias[1].id == 10 && l.req.logit_bias[1].bias == -INFINITY,
          "llama.cpp's pairs: %s", err.msg);
    api_batch_line_free(&l);
}

static void test_logprobs(void)
{
    struct api_batch_line l;
    struct fl_err err = { "" };
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":"
                "[{\"role\":\"user\",\"content\":\"a\"}],\"logprobs\":true,\"top_logprobs\":4}}",
                &l, &err) == 0 && l.req.logprobs && l.req.top_logprobs == 4,
          "chat logprobs: %s", err.msg);
    api_batch_line_free(&l);
    CHECK(parse("{\"custom_id\":\"a\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"a\","
                "\"logprobs\":0}}", &l, &err) == 0 && l.req.logprobs && l.req.top_logprobs == 0,
          "completions logprobs 0: the chosen token's only: %s", err.msg);
    api_batch_line_free(&l);
    static const char *const refused[] = {
        "\"logprobs\":false,\"top_logprobs\":2", "\"logprobs\":true,\"top_logprobs\":21",
        "\"logprobs\":\"yes\"",
    };
    for (int i = 0; i < 3; i++) {
        char line[300];
        snprintf(line, sizeof(line), "{\"custom_id\":\"a\",\"url\":\"/v1/chat/completions\","
                 "\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],%s}}", refused[i]);
        CHECK(parse(line, &l, &err) == -EINVAL && strstr(err.msg, "logprobs"), "%s: %s",
              refused[i], err.msg);
        api_batch_line_free(&l);
    }

    struct gguf_file *g = NULL;
    struct fl_tokenizer *tok = NULL;
    if (gguf_open("tests/data/qwen3moe-tiny-F16.gguf", &g, &err) ||
        fl_tokenizer_load(g, &tok, &err)) {
        CHECK(0, "tokenizer: %s", err.msg);
        return;
    }
    char p0[64], p1[64];
    const int n0 = fl_token_to_piece(tok, 300, p0, sizeof(p0) - 1, false, true);
    const int n1 = fl_token_to_piece(tok, 301, p1, sizeof(p1) - 1, false, true);
    p0[n0 > 0 ? n0 : 0] = p1[n1 > 0 ? n1 : 0] = '\0';
    const struct fl_token_logprob v[2] = {
        { .token = { 300, -0.5f }, .top = { { 300, -0.5f }, { 301, -1.25f } }, .n_top = 2,
          .text_start = 0, .text_end = (size_t)n0 },
        { .token = { 301, -2.0f }, .n_top = 0, .text_start = (size_t)n0,
          .text_end = (size_t)(n0 + n1) },
    };
    json_t *chat = api_logprobs_json(API_CHAT, tok, v, 2);
    const json_t *e0 = json_array_get(json_object_get(chat, "content"), 0);
    const json_t *top = json_object_get(e0, "top_logprobs");
    CHECK(json_array_size(json_object_get(chat, "content")) == 2 &&
              !strcmp(fl_json_str(e0, "token"), p0) &&
              json_real_value(json_object_get(e0, "logprob")) == -0.5 &&
              json_array_size(json_object_get(e0, "bytes")) == (size_t)n0 &&
              json_integer_value(json_array_get(json_object_get(e0, "bytes"), 0)) ==
                  (unsigned char)p0[0] &&
              json_array_size(top) == 2 &&
              !strcmp(fl_json_str(json_array_get(top, 1), "token"), p1) &&
              json_real_value(json_object_get(json_array_get(top, 1), "logprob")) == -1.25,
          "chat logprobs shape");
    json_decref(chat);
    json_t *cmpl = api_logprobs_json(API_COMPLETION, tok, v, 2);
    const json_t *tops = json_object_get(cmpl, "top_logprobs");
    CHECK(!strcmp(json_string_value(json_array_get(json_object_get(cmpl, "tokens"), 1)), p1) &&
              json_real_value(json_array_get(json_object_get(cmpl, "token_logprobs"), 1)) == -2.0 &&
              json_real_value(json_object_get(json_array_get(tops, 0), p1)) == -1.25 &&
              json_object_size(json_array_get(tops, 1)) == 0 &&
              json_integer_value(json_array_get(json_object_get(cmpl, "text_offset"), 1)) == n0,
          "completions logprobs shape");
    json_decref(cmpl);
    fl_tokenizer_free(tok);
    gguf_close(g);
}

/* Reasoning: the request's fields and the server's defaults under them;
 * a chat answer read into reasoning, content and calls. */
static void test_reasoning(void)
{
    struct api_request r;
    struct fl_err err = { "" };
    json_t *b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],"
                        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"w\"}}],"
                        "\"reasoning_format\":\"auto\",\"thinking_budget_tokens\":7}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "reasoning request: %s", err.msg);
    json_decref(b);
    const struct api_reasoning_defaults d = { .format = API_REASONING_NONE, .thinking = 0,
                                              .budget = 2, .budget_message = "Enough." };
    api_request_reasoning_defaults(&r, &d);
    CHECK(r.reasoning_format == API_REASONING_DEEPSEEK && r.thinking == 0 &&
              r.reasoning_budget == 7 && !strcmp(r.reasoning_budget_message, "Enough."),
          "the request's fields over the defaults: %d %d %d", r.reasoning_format, r.thinking,
          r.reasoning_budget);
    struct api_answer_reader rd;
    api_answer_reader_init(&r, FL_CHAT_CHATML, &rd);
    CHECK(rd.split && !rd.legacy && !rd.opened && rd.budget == 7 &&
              rd.tools.mode == API_TOOLS_BLOCKS, "chatml reader");
    /* Qwen3 thinks, then calls: the call is read from the answer after </think> */
    const char *text = "<think>\nI should call w.\n</think>\n\n<tool_call>\n{\"name\": \"w\", "
                       "\"arguments\": {}}\n</tool_call>";
    struct api_answer a;
    CHECK(api_answer_read(&rd, text, strlen(text), true, &a) == 0 && a.has_tools &&
              a.tools.n_calls == 1 && a.tools.content_len == 0 && a.reasoning_len == 16 &&
              !memcmp(a.reasoning, "I should call w.", 16),
          "reasoning '%.*s', %d calls", (int)a.reasoning_len, a.reasoning, a.tools.n_calls);
    const struct api_completion c = { .kind = API_CHAT, .id = "chatcmpl-1", .model = "m",
                                      .created = 7, .finish_reason = "stop", .tools = &a.tools,
                                      .reasoning = a.reasoning, .reasoning_len = a.reasoning_len };
    json_t *o = api_completion_json(&c);
    json_t *m = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "message");
    CHECK(!strcmp(fl_json_str(m, "reasoning_content"), "I should call w.") &&
              json_is_null(json_object_get(m, "content")) &&
              json_array_size(json_object_get(m, "tool_calls")) == 1,
          "message with reasoning_content and a call");
    json_decref(o);
    api_answer_free(&a);
    /* a call written inside the reasoning is not one */
    text = "<think><tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call></think>Sunny.";
    CHECK(api_answer_read(&rd, text, strlen(text), true, &a) == 0 && a.tools.n_calls == 0 &&
              !strcmp(a.tools.content, "Sunny.") && a.reasoning_len > 0,
          "a call inside the reasoning: %d calls, content '%s'", a.tools.n_calls, a.tools.content);
    api_answer_free(&a);
    /* MiniMax's prompt opened the reasoning; deepseek-legacy keeps it in content */
    r.reasoning_format = API_REASONING_LEGACY;
    api_answer_reader_init(&r, FL_CHAT_MINIMAX_M2, &rd);
    rd.tools.mode = API_TOOLS_OFF;
    text = "plan\n</think>\n\nHello";
    CHECK(rd.opened && rd.legacy && api_answer_read(&rd, text, strlen(text), true, &a) == 0 &&
              a.reasoning_len == 4 && a.content == text && a.content_len == strlen(text),
          "legacy: content as written");
    api_answer_free(&a);
    /* gpt-oss: the analysis channel is the reasoning, the final one the content */
    r.reasoning_format = API_REASONING_DEEPSEEK;
    api_answer_reader_init(&r, FL_CHAT_GPT_OSS, &rd);
    rd.tools.mode = API_TOOLS_OFF;
    text = "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>"
           "final<|message|>Hello!";
    CHECK(!rd.opened && api_answer_read(&rd, text, strlen(text), true, &a) == 0 &&
              a.reasoning_len == 16 && !memcmp(a.reasoning, "The user greets.", 16) &&
              a.content_len == 6 && !memcmp(a.content, "Hello!", 6),
          "gpt-oss channels: '%.*s' / '%.*s'", (int)a.reasoning_len, a.reasoning,
          (int)a.content_len, a.content);
    api_answer_free(&a);
    /* no split for "none", nor for an answer held to JSON */
    r.reasoning_format = API_REASONING_NONE;
    api_answer_reader_init(&r, FL_CHAT_MINIMAX_M2, &rd);
    CHECK(!rd.split && rd.opened && rd.budget == 7, "none: no split; the budget still holds");
    r.reasoning_format = API_REASONING_DEEPSEEK;
    r.json_object = true;
    api_answer_reader_init(&r, FL_CHAT_MINIMAX_M2, &rd);
    CHECK(!rd.split && !rd.opened && rd.budget == -1, "JSON mode: no reasoning read or held");
    api_request_free(&r);

    static const char *const bad[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_format\":\"r1\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
        "{\"enable_thinking\":\"false\"}}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_budget_tokens\":1.5}",
        "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"reasoning_content\":[]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_generation_prompt\":1}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
        "{\"clear_thinking\":\"no\"}}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
        "{\"thinking\":1}}",
        "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}],\"continue_final_message\":"
        "\"answer\",\"add_generation_prompt\":false}",
        "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}],\"continue_final_message\":true}",
    };
    static const char *const field[] = { "reasoning_format", "enable_thinking",
                                         "reasoning_budget_tokens", "reasoning_content",
                                         "add_generation_prompt", "clear_thinking",
                                         "chat_template_kwargs.thinking",
                                         "continue_final_message",
                                         "Cannot set both" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        b = body_of(bad[i]);
        err.msg[0] = '\0';
        CHECK(api_request_parse(b, API_CHAT, &r, &err) == -EINVAL && strstr(err.msg, field[i]),
              "refused %s: '%s'", field[i], err.msg);
        json_decref(b);
    }
}

/* A last assistant message continued (llama-server's prefill): in its
 * content, or in its reasoning when it has no content, the answer then
 * starting inside the reasoning; what cannot be continued is refused. */
static void test_prefill(void)
{
    static const struct {
        const char *body, *tail; /* the prompt's end; NULL: refused */
        bool opened;
    } v[] = {
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
          "\"content\":\"Hel\"}]}", "<|im_start|>assistant\n<think>\n\n</think>\n\nHel", false },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
          "\"content\":\"\",\"reasoning_content\":\"Hm\"}]}", "<|im_start|>assistant\n<think>\nHm", true },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
          "\"content\":\"Hel\"}],\"add_generation_prompt\":false}", "</think>\n\nHel", false },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"add_generation_prompt\":false}",
          "Hi<|im_end|>\n", false },
        /* text parts as llama-server joins them: by lines, a continued answer's by a blank line */
        { "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"H\"},"
          "{\"type\":\"text\",\"text\":\"i\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":"
          "\"text\",\"text\":\"He\"},{\"type\":\"text\",\"text\":\"l\"}]}]}",
          "H\ni<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHe\n\nl", false },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
          "\"content\":[{\"type\":\"text\",\"text\":\"He\"},{\"type\":\"text\",\"text\":\"l\"}]},"
          "{\"role\":\"user\",\"content\":\"Go\"}]}",
          "He\nl<|im_end|>\n<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n", false },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
          "\"content\":\"A\"},{\"role\":\"assistant\",\"content\":\"B\"}]}", NULL, false },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"continue_final_message\":"
          "\"content\",\"add_generation_prompt\":false}", NULL, false },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
          "\"content\":\"\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":"
          "{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}", NULL, false },
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct api_request r;
        struct fl_err err = { "" };
        json_t *b = body_of(v[i].body);
        CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "prefill %zu: %s", i, err.msg);
        json_decref(b);
        char *text = NULL;
        const char *why = "";
        const int n = api_render_chat(FL_CHAT_CHATML, &r, &text, &why);
        if (!v[i].tail) {
            CHECK(n == -EINVAL && *why, "prefill %zu refused: %s", i, why);
        } else {
            const size_t t = strlen(v[i].tail);
            CHECK(n >= (int)t && !strcmp(text + n - t, v[i].tail), "prefill %zu: '%s'", i,
                  text ? text : why);
            struct api_answer_reader rd;
            api_answer_reader_init(&r, FL_CHAT_CHATML, &rd);
            CHECK(rd.opened == v[i].opened, "prefill %zu: the answer opened %d", i, rd.opened);
        }
        free(text);
        api_request_free(&r);
    }
}

/* A continued message's reasoning, then JSON or a forced call: the
 * reasoning closed with the format's own tag first (gpt-oss: its analysis
 * message ended, the call in a message of its own). */
static void test_prefill_closes(void)
{
    static const char hm[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":"
                             "\"assistant\",\"content\":\"%s\",\"reasoning_content\":\"Hm\"}],%s}";
    static const char json[] = "\"response_format\":{\"type\":\"json_object\"}";
    static const char call[] = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],"
                               "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"now\"}}";
    static const struct {
        enum fl_chat_format fmt;
        const char *content, *extra, *tail;
    } v[] = {
        { FL_CHAT_CHATML, "", json, "<think>\nHm\n</think>\n\n" },
        { FL_CHAT_GPT_OSS, "", json, "<|channel|>analysis<|message|>Hm<|end|><|start|>assistant"
          "<|channel|>final<|message|>" },
        { FL_CHAT_GPT_OSS, "", call, "<|channel|>analysis<|message|>Hm<|end|><|start|>assistant"
          "<|channel|>commentary to=functions.now <|constrain|>json<|message|>" },
        { FL_CHAT_GPT_OSS, "Hel", call, "<|channel|>final<|message|>Hel<|end|><|start|>assistant"
          "<|channel|>commentary to=functions.now <|constrain|>json<|message|>" },
        { FL_CHAT_QWEN3_CODER, "Hel", call, "<|im_start|>assistant\nHel<tool_call>\n<function=now>\n" },
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char body[512];
        snprintf(body, sizeof(body), hm, v[i].content, v[i].extra);
        struct api_request r;
        struct fl_err err = { "" };
        json_t *b = body_of(body);
        CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "closes %zu: %s", i, err.msg);
        json_decref(b);
        char *text = NULL;
        const char *why = "";
        const int n = api_render_chat(v[i].fmt, &r, &text, &why);
        const size_t t = strlen(v[i].tail);
        CHECK(n >= (int)t && !strcmp(text + n - t, v[i].tail), "closes %zu (%s): '%s'", i,
              fl_chat_format_name(v[i].fmt), text ? text : why);
        free(text);
        api_request_free(&r);
    }
}

/* "n" / "n_cmpl": choices; another choice merged into a completion. */
static void test_choices(void)
{
    struct api_request r;
    struct fl_err err = { "" };
    json_t *b = body_of("{\"prompt\":\"a\",\"n_cmpl\":3}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == 0 && r.n == 3, "n_cmpl 3: %s", err.msg);
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":\"a\"}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == 0 && r.n == 1, "n defaults to 1");
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":\"a\",\"n\":129}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == -EINVAL && strstr(err.msg, "n:"),
          "n 129: '%s'", err.msg);
    json_decref(b);
    /* a list of prompts: strings, or lists of token ids; selected one at a time */
    b = body_of("{\"prompt\":[\"a\",\"bc\"]}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == 0 && r.n_prompts == 2 &&
              !strcmp(r.prompt, "a") && api_request_select_prompt(&r, 1) == 0 &&
              !strcmp(r.prompt, "bc"),
          "two prompts: %s", err.msg);
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":[[5,6],[7]]}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == 0 && r.n_prompts == 2 &&
              r.n_prompt_ids == 2 && r.prompt_ids[1] == 6 && api_request_select_prompt(&r, 1) == 0 &&
              r.n_prompt_ids == 1 && r.prompt_ids[0] == 7 && !r.prompt,
          "two prompts of ids: %s", err.msg);
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":[5,6]}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == 0 && r.n_prompts == 1 &&
              r.n_prompt_ids == 2, "one prompt of ids");
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":[\"a\",[1]]}"); /* two prompts, a string and ids */
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == 0 && r.n_prompts == 2 &&
              !strcmp(r.prompt, "a") && api_request_select_prompt(&r, 1) == 0 && !r.prompt &&
              r.n_prompt_ids == 1,
          "a string and ids: two prompts: '%s'", err.msg);
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":[\"a\",3,\"b\"]}"); /* llama-server's mixed prompt: one */
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == 0 && r.n_prompts == 1 &&
              r.prompt_mixed && !r.prompt && !r.prompt_ids,
          "ids and strings mixed: one prompt: '%s'", err.msg);
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":[\"a\",3.5]}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == -EINVAL && strstr(err.msg, "prompt"),
          "a mixed prompt's number that is no token id: '%s'", err.msg);
    json_decref(b);
    struct api_completion c = { .kind = API_COMPLETION, .id = "cmpl-1", .model = "m", .created = 1,
                                .text = "x", .len = 1, .finish_reason = "stop",
                                .prompt_tokens = 4, .completion_tokens = 2 };
    json_t *doc = api_completion_json(&c);
    c.text = "yz", c.len = 2, c.completion_tokens = 3;
    CHECK(api_completion_add_choice(doc, api_completion_json(&c), 1, false) == 0, "add a choice");
    json_t *ch = json_object_get(doc, "choices"), *u = json_object_get(doc, "usage");
    CHECK(json_array_size(ch) == 2 &&
              json_integer_value(json_object_get(json_array_get(ch, 1), "index")) == 1 &&
              !strcmp(fl_json_str(json_array_get(ch, 1), "text"), "yz") &&
              json_integer_value(json_object_get(u, "prompt_tokens")) == 4 &&
              json_integer_value(json_object_get(u, "completion_tokens")) == 5 &&
              json_integer_value(json_object_get(u, "total_tokens")) == 9,
          "two choices, usage summed (the prompt once)");
    CHECK(api_completion_add_choice(doc, json_object(), 2, true) == -EINVAL, "not a completion: -EINVAL");
    json_decref(doc);
    /* two prompts of two choices each: a prompt counted once per two choices */
    json_t *four[4];
    for (int i = 0; i < 4; i++) {
        c.completion_tokens = 1 + i, c.prompt_tokens = 10 * (1 + i / 2);
        four[i] = api_completion_json(&c);
    }
    doc = api_completion_merge(four, 4, 2);
    u = json_object_get(doc, "usage");
    CHECK(doc && json_array_size(json_object_get(doc, "choices")) == 4 &&
              json_integer_value(json_object_get(json_array_get(json_object_get(doc, "choices"), 3),
                                                 "index")) == 3 &&
              json_integer_value(json_object_get(u, "prompt_tokens")) == 30 &&
              json_integer_value(json_object_get(u, "completion_tokens")) == 10,
          "merged: 4 choices, prompts 10 + 20, completions 1 + 2 + 3 + 4");
    json_decref(doc);
    four[0] = api_completion_json(&c), four[1] = NULL, four[2] = api_completion_json(&c);
    CHECK(api_completion_merge(four, 3, 1) == NULL, "a missing choice: NULL (the rest freed)");
}

/* llama-server's /completion (api/native.h): its fields, its refusals,
 * and its result object. */
static void test_native(void)
{
    struct api_request r;
    struct fl_err err = { "" };
    json_t *b = body_of("{\"prompt\":\"hi\",\"n_predict\":0,\"n_probs\":4,\"return_tokens\":true,"
                        "\"samplers\":[\"dry\",\"min_p\",\"temperature\"],\"id_slot\":1,"
                        "\"xtc_probability\":0,\"top_n_sigma\":-1,\"min_keep\":2}");
    CHECK(api_request_parse_native(b, &r, &err) == 0 && r.native && r.n_probs == 4 &&
              r.logprobs && r.top_logprobs == 4 && r.return_tokens && r.has_order &&
              r.sampling.n_order == 3 && r.sampling.order[0] == FL_SAMPLER_DRY &&
              r.sampling.order[1] == FL_SAMPLER_MIN_P &&
              api_request_max_tokens(&r, -1, 100) == 0 && r.has_min_keep &&
              r.sampling.min_keep == 2,
          "native fields: %s", err.msg);
    json_decref(b);
    api_request_free(&r);
    /* llama-server's DRY, XTC, top-n-sigma, dynamic temperature and mirostat
     * fields over the server's settings; a dry_base below 1 keeps the server's */
    b = body_of("{\"prompt\":\"hi\",\"dry_multiplier\":0.8,\"dry_base\":0.5,"
                "\"dry_allowed_length\":3,\"dry_penalty_last_n\":128,"
                "\"dry_sequence_breakers\":[\"\\n\",\"###\"],\"top_n_sigma\":1.5,"
                "\"xtc_probability\":0.25,\"xtc_threshold\":0.2,\"dynatemp_range\":0.5,"
                "\"dynatemp_exponent\":2,\"mirostat\":2,\"mirostat_tau\":4,\"mirostat_eta\":0.2}");
    struct fl_sampler_params d, s;
    fl_sampler_defaults(&d, 1);
    d.dry_base = 1.5f;
    CHECK(api_request_parse_native(b, &r, &err) == 0, "sampler fields: %s", err.msg);
    api_request_sampling(&r, &d, &s);
    CHECK(s.dry_multiplier == 0.8f && s.dry_base == 1.5f && s.dry_allowed_length == 3 &&
              s.dry_penalty_last_n == 128 && s.n_dry_breakers == 2 &&
              !strcmp(s.dry_breakers[0], "\n") && !strcmp(s.dry_breakers[1], "###") &&
              s.top_n_sigma == 1.5f && s.xtc_probability == 0.25f && s.xtc_threshold == 0.2f &&
              s.dynatemp_range == 0.5f && s.dynatemp_exponent == 2.0f && s.mirostat == 2 &&
              s.mirostat_tau == 4.0f && s.mirostat_eta == 0.2f && s.top_k == d.top_k,
          "sampler fields applied");
    json_decref(b);
    api_request_free(&r);
    b = body_of("{\"prompt\":\"hi\"}"); /* no n_probs: logprobs on all the same (the ids) */
    CHECK(api_request_parse_native(b, &r, &err) == 0 && r.logprobs && r.n_probs == 0 &&
              api_request_max_tokens(&r, -1, 100) == 100,
          "native defaults: %s", err.msg);
    json_decref(b);
    api_request_free(&r);
    static const struct { const char *body, *want; } no[] = {
        { "{\"prompt\":\"a\",\"n_probs\":21}", "n_probs" },
        { "{\"prompt\":\"a\",\"dry_multiplier\":-1}", "dry_multiplier" },
        { "{\"prompt\":\"a\",\"mirostat\":3}", "mirostat" },
        { "{\"prompt\":\"a\",\"xtc_probability\":1.5}", "xtc_probability" },
        { "{\"prompt\":\"a\",\"dry_sequence_breakers\":[]}", "dry_sequence_breakers" },
        { "{\"prompt\":\"a\",\"dry_sequence_breakers\":[\"\\n\", 3]}", "dry_sequence_breakers[1]" },
        { "{\"prompt\":\"a\",\"dry_allowed_length\":\"2\"}", "dry_allowed_length" },
        { "{\"prompt\":\"a\",\"samplers\":[\"infill\"]}", "samplers" },
        { "{\"prompt\":\"a\",\"samplers\":[1]}", "samplers" },
        { "{\"prompt\":\"a\",\"samplers\":\"kq\"}", "samplers" },
        { "{\"prompt\":\"a\",\"echo\":true}", "echo" },
        { "{\"prompt\":\"a\",\"return_tokens\":1}", "return_tokens" },
        { "{\"prompt\":\"a\",\"lora\":[{\"id\":0}]}", "lora" },
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        b = body_of(no[i].body);
        CHECK(api_request_parse_native(b, &r, &err) == -EINVAL && strstr(err.msg, no[i].want) &&
                  !strchr(err.msg, '\n'),
              "%s: '%s'", no[i].body, err.msg);
        json_decref(b);
    }
    b = body_of("{\"prompt\":\"a\",\"n_probs\":2}");
    CHECK(api_request_parse(b, API_COMPLETION, &r, &err) == -EINVAL && strstr(err.msg, "n_probs"),
          "n_probs on /v1/completions: '%s'", err.msg);
    json_decref(b);
    const int32_t toks[] = { 5, 6 };
    const struct api_native_result res = {
        .final = true, .index = 1, .content = "a\nb", .len = 3, .tokens = toks, .n_tokens = 2,
        .tokens_predicted = 2, .tokens_evaluated = 4, .prompt = "p", .prompt_len = 1,
        .stop_type = api_native_stop_type("stop", 0), .stopping_word = "x", .tokens_cached = 6,
        .cache_n = 1, .prompt_s = 0.003, .predicted_s = 0.002,
    };
    json_t *o = api_native_json(&res);
    const json_t *t = json_object_get(o, "timings");
    CHECK(o && json_is_true(json_object_get(o, "stop")) &&
              json_is_true(json_object_get(o, "has_new_line")) &&
              !strcmp(fl_json_str(o, "stop_type"), "word") &&
              json_array_size(json_object_get(o, "tokens")) == 2 &&
              json_integer_value(json_object_get(t, "prompt_n")) == 3 &&
              fabs(json_real_value(json_object_get(t, "predicted_per_second")) - 1000.0) < 1e-6,
          "a native result's fields");
    json_decref(o);
    CHECK(!strcmp(api_native_stop_type("stop", -1), "eos") &&
              !strcmp(api_native_stop_type("length", -1), "limit") &&
              !strcmp(api_native_stop_type("cancelled", -1), "none"),
          "stop types");
    printf("native: /completion's fields, %zu refusals, its result\n", sizeof(no) / sizeof(no[0]));
}

/* Embeddings bodies: the input forms, the fields, the refusals; base64
 * against RFC 4648's vectors; llama-server's scaling rules. */
static void test_embeddings(void)
{
    static const char *const enc[][2] = { { "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" },
                                          { "foo", "Zm9v" }, { "foob", "Zm9vYg==" },
                                          { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" } };
    for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
        json_t *j = fl_json_base64(enc[i][0], strlen(enc[i][0]));
        CHECK(j && !strcmp(json_string_value(j), enc[i][1]), "base64 of \"%s\": %s", enc[i][0],
              j ? json_string_value(j) : "NULL");
        json_decref(j);
    }
    struct api_embd_request r;
    struct fl_err err = { "" };
    const char *ok = "{\"input\": [\"a\", [1, 2], \"b c\"], \"encoding_format\": \"base64\", "
                     "\"embd_normalize\": 0, \"model\": \"m\"}";
    CHECK(!api_embd_parse(ok, strlen(ok), true, 2, &r, &err) && r.n_in == 3 && r.oai && r.base64 &&
              r.normalize == 0 && r.has_normalize && !strcmp(r.model, "m") &&
              !strcmp(r.in[0].text, "a") && r.in[1].n_ids == 2 && r.in[1].ids[1] == 2 &&
              !strcmp(r.in[2].text, "b c"),
          "an embeddings body: %s", err.msg);
    api_embd_free(&r);
    const char *ids = "{\"input\": [5, 6, 7]}", *native = "{\"content\": \"x\"}";
    CHECK(!api_embd_parse(ids, strlen(ids), true, 2, &r, &err) && r.n_in == 1 && r.in[0].n_ids == 3 &&
              r.normalize == 2 && !r.has_normalize, "one list of ids is one input: %s", err.msg);
    api_embd_free(&r);
    CHECK(!api_embd_parse(native, strlen(native), true, 2, &r, &err) && !r.oai,
          "\"content\" is llama-server's body: %s", err.msg);
    api_embd_free(&r);
    static const char *const no[] = { "[]", "{}", "{\"input\": 3}", "{\"input\": []}",
        "{\"input\": [[]]}", "{\"input\": [\"a\", 5]}", "{\"input\": [-1]}",
        "{\"input\": \"a\", \"encoding_format\": \"hex\"}", "{\"input\": \"a\", \"model\": 1}",
        "{\"input\": \"a\", \"embd_normalize\": 1.5}", "{\"input\": \"a\", \"embd_normalize\": -2}" };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        err.msg[0] = 0;
        CHECK(api_embd_parse(no[i], strlen(no[i]), true, 2, &r, &err) == -EINVAL && err.msg[0] &&
                  !strchr(err.msg, '\n'), "refused: %s (%s)", no[i], err.msg);
        api_embd_free(&r);
    }
    const float v[3] = { 3, -4, 0 };
    float o[3];
    api_embd_normalize(v, o, 3, 2);
    CHECK(o[0] == 0.6f && o[1] == -0.8f && o[2] == 0, "euclidean: %g %g %g", o[0], o[1], o[2]);
    api_embd_normalize(v, o, 3, 1);
    CHECK(fabsf(o[0] - 3.0f / 7) < 1e-7f && fabsf(o[1] + 4.0f / 7) < 1e-7f, "taxicab");
    api_embd_normalize(v, o, 3, 0);
    CHECK(fabsf(o[1] + 32760.0f) < 1e-2f, "max absolute: %g", o[1]);
    api_embd_normalize(v, o, 3, -1);
    CHECK(!memcmp(o, v, sizeof(v)), "none");
    printf("embeddings: bodies, %zu refusals, base64, scaling\n", sizeof(no) / sizeof(no[0]));
}

int main(void)
{
    test_embeddings();
    test_native();
    test_prefill();
    test_prefill_closes();
    test_choices();
    test_reasoning();
    test_accepted();
    test_refused();
    test_outputs();
    test_logprobs();
    test_logit_bias();
    return check_summary("test-api");
}

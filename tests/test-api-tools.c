/* test-api-tools: a chat request's tools (api/openai.h, api/tools.c): the
 * fields, the prompt with a forced call's opening in each format, the
 * answer read in each mode, the schemas and grammars forced calls are
 * held to, and the calls as JSON. */
#include <errno.h>
#include <string.h>

#include "api/openai.h"
#include "tests/check.h"
#include "tests/json-body.h"
#include "text/grammar.h"
#include "text/json-schema.h"
#include "text/tool-calls.h"

/* Whether the answer text is accepted whole by schema sc. */
static bool schema_accepts(const json_t *sc, const char *text)
{
    struct fl_schema *s = NULL;
    static struct fl_schema_state m;
    if (!sc || fl_schema_compile(sc, &s, NULL))
        return false;
    fl_schema_init(s, &m);
    const bool ok = fl_schema_feed(s, &m, text, strlen(text)) && fl_schema_done(&m);
    fl_schema_free(s);
    return ok;
}

/* The schemas forced calls are held to (api_tool_schema). */
static void test_tool_schemas(void)
{
    struct api_request r;
    struct fl_err err = { "" };
    json_t *b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
                        "{\"type\":\"function\",\"function\":{\"name\":\"w\",\"parameters\":{\"type\":"
                        "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"t\"}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"p\",\"parameters\":{\"type\":"
                        "\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}],"
                        "\"tool_choice\":\"required\"}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "tools request: %s", err.msg);
    json_decref(b);
    struct api_tool_reader t;
    api_tool_reader_init(&r, FL_CHAT_CHATML, &t);
    json_t *sc = api_tool_schema(&r, &t);
    static const struct { const char *answer; bool ok; } calls[] = {
        { "{\"name\": \"w\", \"arguments\": {\"city\": \"Oslo\"}}", true },
        { "{\"name\": \"w\", \"arguments\": {}}", false },      /* city is required */
        { "{\"name\": \"t\", \"arguments\": {\"any\": [1]}}", true }, /* no parameters: any object */
        { "{\"name\": \"p\", \"arguments\": {\"s\": 1}}", true },  /* a pattern: any object */
        { "{\"name\": \"x\", \"arguments\": {}}", false },       /* no such tool */
        { "{\"arguments\": {}, \"name\": \"t\"}", false },       /* the name first */
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
        CHECK(schema_accepts(sc, calls[i].answer) == calls[i].ok, "required among three: %s",
              calls[i].answer);
    json_decref(sc);
    api_request_free(&r);
    b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
                "{\"type\":\"function\",\"function\":{\"name\":\"w\",\"parameters\":{\"type\":"
                "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}],"
                "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"w\"}}}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "named: %s", err.msg);
    json_decref(b);
    api_tool_reader_init(&r, FL_CHAT_CHATML, &t);
    sc = api_tool_schema(&r, &t);
    CHECK(schema_accepts(sc, "{\"city\": \"Oslo\"}") && !schema_accepts(sc, "{}"),
          "named: the arguments are of its parameters");
    json_decref(sc);
    api_tool_reader_init(&r, FL_CHAT_GLM45, &t);
    CHECK(!api_tool_schema(&r, &t), "glm-4.5: no schema (its pairs are not JSON)");
    api_request_free(&r);
    /* parameters with $defs (as Pydantic writes them) among several tools: their refs
     * still point into them; and more tools than readings: every name callable */
    b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
                "{\"type\":\"function\",\"function\":{\"name\":\"d\",\"parameters\":{\"$defs\":"
                "{\"C\":{\"enum\":[\"x\",\"y\"]}},\"type\":\"object\",\"properties\":{\"c\":"
                "{\"$ref\":\"#/$defs/C\"}},\"required\":[\"c\"]}}},"
                "{\"type\":\"function\",\"function\":{\"name\":\"t\"}}],\"tool_choice\":\"required\"}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "$defs: %s", err.msg);
    json_decref(b);
    api_tool_reader_init(&r, FL_CHAT_CHATML, &t);
    sc = api_tool_schema(&r, &t);
    CHECK(schema_accepts(sc, "{\"name\": \"d\", \"arguments\": {\"c\": \"y\"}}") &&
              !schema_accepts(sc, "{\"name\": \"d\", \"arguments\": {\"c\": \"z\"}}"),
          "a $ref into a tool's own $defs, inside the calls' anyOf");
    json_decref(sc);
    api_request_free(&r);
    char many[1024] = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[";
    for (int i = 0; i < 6; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many),
                 "%s{\"type\":\"function\",\"function\":{\"name\":\"f%d\"}}", i ? "," : "", i);
    strcat(many, "],\"tool_choice\":\"required\"}");
    b = body_of(many);
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "six tools: %s", err.msg);
    json_decref(b);
    api_tool_reader_init(&r, FL_CHAT_CHATML, &t);
    sc = api_tool_schema(&r, &t);
    CHECK(schema_accepts(sc, "{\"name\": \"f5\", \"arguments\": {}}") &&
              schema_accepts(sc, "{\"name\": \"f0\", \"arguments\": {\"a\": 1}}") &&
              !schema_accepts(sc, "{\"name\": \"f6\", \"arguments\": {}}"),
          "six tools: every name callable, no other");
    json_decref(sc);
    api_request_free(&r);
    printf("tools: forced calls held to their parameters (named, required among three)\n");
}

static void test_tools(void)
{
    struct api_request r;
    struct fl_err err = { "" };
    json_t *b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
                        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":"
                        "\"function\",\"function\":{\"name\":\"w\",\"arguments\":{\"city\":\"Köln\"}}}]},"
                        "{\"role\":\"tool\",\"content\":\"rain\"}],\"tools\":[{\"type\":\"function\","
                        "\"function\":{\"strict\":true,\"parameters\":{\"type\":\"object\"},\"name\":\"w\"}}],"
                        "\"tool_choice\":\"required\",\"parallel_tool_calls\":false}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "tools request: %s", err.msg);
    json_decref(b);
    CHECK(r.n_tools == 1 && !strcmp(r.tool_names[0], "w") &&
              !strcmp(r.tools_json[0], "{\"type\": \"function\", \"function\": {\"name\": \"w\", "
                                       "\"description\": \"\", \"parameters\": {\"type\": \"object\"}}}"),
          "tool as llama-server passes it (name, description, parameters; no other key) and "
          "the template's tojson writes it: %s", r.n_tools ? r.tools_json[0] : "");
    CHECK(r.tool_choice == API_TOOL_NAMED && !strcmp(r.tool_name, "w") && r.one_call,
          "required with one tool: named, one call");
    CHECK(r.msgs[1].n_calls == 1 && !strcmp(r.msgs[1].calls[0].arguments, "{\"city\": \"Köln\"}") &&
              !strcmp(r.msgs[1].content, ""),
          "an assistant's call, arguments given as an object: '%s'",
          r.msgs[1].n_calls ? r.msgs[1].calls[0].arguments : "");
    char *text = NULL;
    const char *why = "";
    int n = api_render_chat(FL_CHAT_CHATML, &r, &text, &why);
    const char *tail = "<|im_start|>assistant\n<tool_call>\n{\"name\": \"w\", \"arguments\": ";
    CHECK(n > 0 && strstr(text, "<tools>\n{\"type\": \"function\"") &&
              strstr(text, "<|im_start|>user\n<tool_response>\nrain\n</tool_response><|im_end|>\n") &&
              !strcmp(text + n - strlen(tail), tail),
          "prompt: %s", text ? text : why);
    free(text);
    text = NULL;
    n = api_render_chat(FL_CHAT_LLAMA3, &r, &text, &why);
    CHECK(n == -ENOTSUP && strstr(why, "chatml"), "llama3 with tools: %d %s", n, why);
    free(text);

    struct api_tool_reader t;
    api_tool_reader_init(&r, FL_CHAT_GLM45, &t);
    CHECK(t.mode == API_TOOLS_ARGS && !t.json, "glm-4.5: a forced call without JSON mode");
    api_tool_reader_init(&r, FL_CHAT_CHATML, &t);
    struct fl_tool_answer a;
    CHECK(t.json && t.mode == API_TOOLS_ARGS && api_tool_read(&t, "{\"city\": \"Bonn\"}", 16, true, &a) == 0 &&
              a.n_calls == 1 && !strcmp(a.calls[0].name, "w") &&
              !strcmp(a.calls[0].arguments, "{\"city\":\"Bonn\"}"),
          "named: the answer is the arguments");
    const struct api_completion c = { .kind = API_CHAT, .id = "chatcmpl-1", .model = "m",
                                      .created = 7, .text = "", .finish_reason = "stop",
                                      .prompt_tokens = 3, .completion_tokens = 5, .tools = &a };
    json_t *o = api_completion_json(&c);
    char *s = json_dumps(o, JSON_COMPACT);
    CHECK(s && strstr(s, "\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
                         "\"call_chatcmpl-1_0\",\"type\":\"function\",\"function\":{\"name\":\"w\","
                         "\"arguments\":\"{\\\"city\\\":\\\"Bonn\\\"}\"}}]}") &&
              strstr(s, "\"finish_reason\":\"tool_calls\""),
          "answer with a call: %s", s);
    free(s);
    json_decref(o);
    fl_tool_answer_free(&a);
    CHECK(api_tool_read(&t, "{\"city\": \"Bo", 13, false, &a) == 0 && a.n_calls == 0 &&
              !strcmp(a.content, "{\"city\": \"Bo"), "named, cut short: content as it came");
    fl_tool_answer_free(&a);
    api_request_free(&r);

    b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":"
                "\"function\",\"function\":{\"name\":\"a\"}},{\"type\":\"function\",\"function\":"
                "{\"name\":\"b\"}}]}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0 && r.tool_choice == API_TOOL_AUTO &&
              !r.json_object && !r.one_call, "auto: %s", err.msg);
    json_decref(b);
    api_tool_reader_init(&r, FL_CHAT_CHATML, &t);
    const char *two = "Both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>";
    CHECK(t.mode == API_TOOLS_BLOCKS && api_tool_read(&t, two, strlen(two), true, &a) == 0 &&
              a.n_calls == 2 && !strcmp(a.content, "Both."), "auto: two calls and content");
    CHECK(api_tool_content_prefix(&t, two, strlen(two)) == 6, "auto: content up to the first call");
    /* a streamed call: its first chunk names it (its id as the whole answer's), later ones
     * bring more of its arguments */
    struct api_chunk ch = { .kind = API_CHAT, .id = "chatcmpl-2", .model = "m", .call = 2,
                            .call_name = a.calls[1].name, .call_args = a.calls[1].arguments,
                            .call_args_len = 4 };
    o = api_chunk_json(&ch);
    s = json_dumps(o, JSON_COMPACT);
    CHECK(s && strstr(s, "\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_chatcmpl-2_1\","
                         "\"type\":\"function\",\"function\":{\"name\":\"b\",\"arguments\":"
                         "\"{\\\"x\\\"\"}}]"), "a call's first chunk: %s", s);
    free(s);
    json_decref(o);
    ch.call_name = NULL;
    ch.call_args += 4;
    ch.call_args_len = strlen(ch.call_args);
    o = api_chunk_json(&ch);
    s = json_dumps(o, JSON_COMPACT);
    CHECK(s && strstr(s, "\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":"
                         "\":1}\"}}]"), "a call's later chunk: %s", s);
    free(s);
    json_decref(o);
    fl_tool_answer_free(&a);
    api_request_free(&r);
    printf("tools: parsed, prompt with the call's opening, answers read, calls as JSON\n");
}

/* A forced call in Kimi K2's, gpt-oss's and DeepSeek V3.1's formats
 * (the reasoning its prompt opened closed first): the prompt ends with
 * the call's opening (Kimi's id counts the conversation's calls), and the
 * answer, the arguments in JSON mode, is read back as the call. */
static void test_forced_formats(void)
{
    struct api_request r;
    struct fl_err err = { "" };
    json_t *b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"Time?\"}],\"tools\":"
                        "[{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],\"tool_choice\":"
                        "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "forced: %s", err.msg);
    json_decref(b);
    static const struct { enum fl_chat_format fmt; const char *tail; } v[] = {
        { FL_CHAT_KIMI_K2_THINKING, "<|im_assistant|>assistant<|im_middle|><think></think>"
          "<|tool_calls_section_begin|><|tool_call_begin|>functions.now:0<|tool_call_argument_begin|>" },
        { FL_CHAT_GPT_OSS, "<|start|>assistant<|channel|>commentary to=functions.now <|constrain|>json"
          "<|message|>" },
        { FL_CHAT_DEEPSEEK_V31, "<｜User｜>Time?<｜Assistant｜><think></think><｜tool▁calls▁begin｜>"
          "<｜tool▁call▁begin｜>now<｜tool▁sep｜>" },
        { FL_CHAT_DEEPSEEK_V3_0324, "<｜User｜>Time?<｜Assistant｜><｜tool▁calls▁begin｜>"
          "<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n```json\n" },
        { FL_CHAT_DEEPSEEK_R1, "<｜User｜>Time?<｜Assistant｜><think>\n</think><｜tool▁calls▁begin｜>"
          "<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n```json\n" },
    };
    /* Qwen3.5's named call: the reasoning closed, the function opened; the
     * model's pairs and the close read back */
    char *text = NULL;
    const char *why = "";
    const int n35 = api_render_chat(FL_CHAT_QWEN35, &r, &text, &why);
    static const char q35[] = "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
                              "<function=now>\n";
    CHECK(n35 > 0 && (size_t)n35 >= sizeof(q35) - 1 && !strcmp(text + n35 - (sizeof(q35) - 1), q35),
          "qwen3.5: the prompt ends with the call's opening: %s", text ? text : why);
    free(text);
    struct api_tool_reader tq;
    api_tool_reader_init(&r, FL_CHAT_QWEN35, &tq);
    struct fl_tool_answer aq;
    static const char ans[] = "<parameter=tz>\nUTC\n</parameter>\n";
    CHECK(!tq.json && api_tool_read(&tq, ans, sizeof(ans) - 1, true, &aq) == 0 && aq.n_calls == 1 &&
              !strcmp(aq.calls[0].name, "now") && !strcmp(aq.calls[0].arguments, "{\"tz\":\"UTC\"}"),
          "qwen3.5: the pairs read as the call (closed for the model that ended)");
    fl_tool_answer_free(&aq);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char *text = NULL;
        const char *why = "";
        const int n = api_render_chat(v[i].fmt, &r, &text, &why);
        CHECK(n > 0 && (size_t)n >= strlen(v[i].tail) && !strcmp(text + n - strlen(v[i].tail), v[i].tail),
              "%s: the prompt ends with the call's opening: %s", fl_chat_format_name(v[i].fmt),
              text ? text : why);
        free(text);
        struct api_tool_reader t;
        api_tool_reader_init(&r, v[i].fmt, &t);
        struct fl_tool_answer a;
        CHECK(t.json && api_tool_read(&t, "{\"tz\": \"UTC\"}", 13, true, &a) == 0 && a.n_calls == 1 &&
                  !strcmp(a.calls[0].name, "now") && !strcmp(a.calls[0].arguments, "{\"tz\":\"UTC\"}"),
              "%s: the answer is the call's arguments", fl_chat_format_name(v[i].fmt));
        fl_tool_answer_free(&a);
    }
    api_request_free(&r);
}

/* Feeds text to a compiled grammar: the bytes read, and whether whole. */
static size_t grammar_reads(const struct fl_grammar *g, const char *text, bool *done)
{
    static struct fl_grammar_state m, scratch[2];
    fl_grammar_init(g, &m);
    size_t i = 0;
    while (text[i] && fl_grammar_feed(g, &m, text + i, 1, scratch))
        i++;
    *done = fl_grammar_done(&m);
    return i;
}

/* Forced calls in GLM-4.5's and MiniMax-M2's formats (and "required" in
 * Kimi K2's and gpt-oss's): the grammar after
 * the prompt's opening takes the calls written as the formats write them,
 * and refuses a missing required parameter, an unknown one, a value of the
 * wrong type and a tool that is not offered. */
static void test_tool_grammars(void)
{
    static const char tools[] =
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"weather\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":"
        "{\"type\":\"integer\"},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";
    static const struct {
        enum fl_chat_format fmt;
        const char *choice, *text;
        size_t ok; /* bytes read; (size_t)-1: all, and whole */
    } cases[] = {
        { FL_CHAT_GLM45, "named", "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days"
          "</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", (size_t)-1 },
        { FL_CHAT_GLM45, "named", "<arg_key>city</arg_key>\n<arg_value>a<b</arg_value>\n<arg_key>unit"
          "</arg_key>\n<arg_value>f</arg_value>\n</tool_call>", (size_t)-1 },
        { FL_CHAT_GLM45, "named", "<arg_key>days</arg_key>", 9 },           /* city first */
        { FL_CHAT_GLM45, "named", "<arg_key>city</arg_key>\n<arg_value>P</arg_value>\n<arg_key>zip", 58 },
        { FL_CHAT_GLM45, "named", "<arg_key>city</arg_key>\n<arg_value>P</arg_value>\n<arg_key>days"
          "</arg_key>\n<arg_value>x", 84 },
        { FL_CHAT_GLM45, "named", "</tool_call>", 1 },                     /* city is required */
        { FL_CHAT_GLM45, "required", "now\n</tool_call>", (size_t)-1 },
        { FL_CHAT_GLM45, "required", "weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
          "</tool_call>", (size_t)-1 },
        { FL_CHAT_GLM45, "required", "other\n", 0 },
        { FL_CHAT_MINIMAX_M2, "named", "<parameter name=\"city\">Paris</parameter>\n<parameter "
          "name=\"unit\">c</parameter>\n</invoke>\n</minimax:tool_call>", (size_t)-1 },
        { FL_CHAT_MINIMAX_M2, "named", "<parameter name=\"unit\">", 17 },
        { FL_CHAT_MINIMAX_M2, "required", "<invoke name=\"now\">\n</invoke>\n</minimax:tool_call>",
          (size_t)-1 },
        { FL_CHAT_MINIMAX_M2, "required", "<invoke name=\"later\">", 14 },
        /* MiniMax-M3's: every tag after its namespace token, nested values for any type */
        { FL_CHAT_MINIMAX_M3, "named", FL_MINIMAX_M3_NS "<city>Paris" FL_MINIMAX_M3_NS "</city>"
          FL_MINIMAX_M3_NS "<unit>c" FL_MINIMAX_M3_NS "</unit>" FL_MINIMAX_M3_NS "</invoke>\n"
          FL_MINIMAX_M3_NS "</tool_call>", (size_t)-1 },
        { FL_CHAT_MINIMAX_M3, "named", FL_MINIMAX_M3_NS "<unit>", 14 },        /* city first */
        { FL_CHAT_MINIMAX_M3, "named", FL_MINIMAX_M3_NS "<city>P" FL_MINIMAX_M3_NS "</city>"
          FL_MINIMAX_M3_NS "<days>x", 59 },                                   /* not an integer */
        { FL_CHAT_MINIMAX_M3, "required", FL_MINIMAX_M3_NS "<invoke name=\"now\">" FL_MINIMAX_M3_NS
          "<a>" FL_MINIMAX_M3_NS "<item>1" FL_MINIMAX_M3_NS "</item>" FL_MINIMAX_M3_NS "</a>"
          FL_MINIMAX_M3_NS "</invoke>\n" FL_MINIMAX_M3_NS "</tool_call>", (size_t)-1 },
        { FL_CHAT_MINIMAX_M3, "required", FL_MINIMAX_M3_NS "<invoke name=\"later\">", 27 },
        /* Kimi K3's: arguments that say their type, the call's and tools part's closes */
        { FL_CHAT_KIMI_K3, "named", "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris"
          "<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>"
          "argument<|sep|><|open|>argument key=\"unit\" type=\"string\"<|sep|>f<|close|>argument"
          "<|sep|><|close|>call<|sep|><|close|>tools<|sep|>", (size_t)-1 },
        { FL_CHAT_KIMI_K3, "named", "<|open|>argument key=\"days\"", 22 },      /* city first */
        { FL_CHAT_KIMI_K3, "named", "<|open|>argument key=\"city\" type=\"string\"<|sep|>P<|close|>"
          "argument<|sep|><|open|>argument key=\"days\" type=\"string\"", 107 }, /* a number's */
        { FL_CHAT_KIMI_K3, "required", "now\" index=\"1\"<|sep|><|close|>call<|sep|><|close|>tools"
          "<|sep|>", (size_t)-1 },
        { FL_CHAT_KIMI_K3, "required", "later\"", 0 },
        /* Kimi K2's and gpt-oss's "required": a tool's name, the markers, a JSON object */
        { FL_CHAT_KIMI_K2_INSTRUCT, "required", "now:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
          "<|tool_calls_section_end|>", (size_t)-1 },
        { FL_CHAT_KIMI_K2_INSTRUCT, "required", "weather:0<|tool_call_argument_begin|>{\"city\": "
          "\"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>", (size_t)-1 },
        { FL_CHAT_KIMI_K2_INSTRUCT, "required", "weather:1", 8 },
        { FL_CHAT_KIMI_K2_INSTRUCT, "required", "now:0<|tool_call_argument_begin|>[", 33 },
        { FL_CHAT_GPT_OSS, "required", "weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}",
          (size_t)-1 },
        { FL_CHAT_GPT_OSS, "required", "later", 0 },
        /* GLM-4.7's pairs, without newlines */
        { FL_CHAT_GLM47, "named", "<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days"
          "</arg_key><arg_value>3</arg_value></tool_call>", (size_t)-1 },
        { FL_CHAT_GLM47, "named", "<arg_key>city</arg_key>\n", 23 }, /* no newline */
        { FL_CHAT_GLM47, "required", "now</tool_call>", (size_t)-1 },
        { FL_CHAT_GLM47, "required", "weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>"
          "</tool_call>", (size_t)-1 },
        /* Qwen3.5's / Qwen3-Coder's XML: <parameter=K>\nV\n</parameter>\n lines */
        { FL_CHAT_QWEN35, "named", "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
          "</parameter>\n</function>\n</tool_call>", (size_t)-1 },
        { FL_CHAT_QWEN35, "named", "<parameter=days>", 11 },                   /* city first */
        { FL_CHAT_QWEN3_CODER, "required", "now>\n</function>\n</tool_call>", (size_t)-1 },
        { FL_CHAT_QWEN3_CODER, "required", "weather>\n<parameter=city>\nOslo\n</parameter>\n"
          "</function>\n</tool_call>", (size_t)-1 },
        { FL_CHAT_QWEN3_CODER, "required", "later>", 0 },
        /* DeepSeek V3.1's: a name, <｜tool▁sep｜>, a JSON object, its closes */
        { FL_CHAT_DEEPSEEK_V31, "required", "weather<｜tool▁sep｜>{\"city\": \"Oslo\"}"
          "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", (size_t)-1 },
        { FL_CHAT_DEEPSEEK_V31, "required", "now<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
          "<｜tool▁calls▁end｜>", (size_t)-1 },
        { FL_CHAT_DEEPSEEK_V31, "required", "now<｜tool▁sep｜>[", 21 },
        { FL_CHAT_DEEPSEEK_V31, "required", "nowhere", 3 },
        /* V3-0324's and R1's: after function<｜tool▁sep｜>, a name and the fenced object */
        { FL_CHAT_DEEPSEEK_V3_0324, "required", "weather\n```json\n{\"city\": \"Oslo\"}\n```"
          "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", (size_t)-1 },
        { FL_CHAT_DEEPSEEK_R1, "required", "now\n```json\n{}\n```<｜tool▁call▁end｜>"
          "<｜tool▁calls▁end｜>", (size_t)-1 },
        { FL_CHAT_DEEPSEEK_R1, "required", "now\n```json\n{}<｜tool▁call▁end｜>", 14 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[1024];
        snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,"
                 "\"tool_choice\":%s}", tools, !strcmp(cases[i].choice, "named")
                 ? "{\"type\":\"function\",\"function\":{\"name\":\"weather\"}}" : "\"required\"");
        json_t *b = body_of(body);
        struct api_request r;
        struct fl_err err = { "" };
        if (api_request_parse(b, API_CHAT, &r, &err)) {
            CHECK(0, "case %zu: %s", i, err.msg);
            json_decref(b);
            continue;
        }
        json_decref(b);
        struct api_tool_reader t;
        api_tool_reader_init(&r, cases[i].fmt, &t);
        char *text = api_tool_grammar(&r, &t, NULL);
        struct fl_grammar *g = NULL;
        CHECK(text && fl_grammar_compile(text, strlen(text), NULL, &g, &err) == 0,
              "case %zu: the grammar compiles: %s\n%s", i, err.msg, text ? text : "(none)");
        bool done = false;
        const size_t got = g ? grammar_reads(g, cases[i].text, &done) : 0;
        const size_t want = cases[i].ok == (size_t)-1 ? strlen(cases[i].text) : cases[i].ok;
        CHECK(g && got == want && done == (cases[i].ok == (size_t)-1),
              "case %zu (%s): read %zu of '%s', want %zu (whole %d)", i, cases[i].choice, got,
              cases[i].text, want, done);
        fl_grammar_free(g);
        free(text);
        api_request_free(&r);
    }
    struct api_request r;
    struct fl_err err = { "" };
    json_t *b = body_of("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    CHECK(api_request_parse(b, API_CHAT, &r, &err) == 0, "no tools: %s", err.msg);
    json_decref(b);
    struct api_tool_reader t;
    api_tool_reader_init(&r, FL_CHAT_GLM45, &t);
    CHECK(!api_tool_grammar(&r, &t, NULL), "no tools: no grammar");
    api_request_free(&r);
    printf("tool grammars: GLM-4.5's, MiniMax-M2/M3's and Kimi K3's forced calls held to the tools' parameters\n");
}

int main(void)
{
    test_tools();
    test_tool_schemas();
    test_forced_formats();
    test_tool_grammars();
    return check_summary("test-api-tools");
}

/* tool-grammar.c: the grammar a forced call in GLM-4.5's / 4.7's, MiniMax-M2's or
 * Qwen3.5's / Qwen3-Coder's XML-style format is held to, and a call among the tools in Kimi K2's,
 * DeepSeek V3.1's and gpt-oss's (openai.h's api_tool_grammar). */
#include "api/openai.h"

#include "api/request-tools.h"

#include "text/tokenizer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing GBNF text; the first failure sticks. */
struct gbnf {
    char *p;
    size_t n, cap;
    bool failed;
};

static void add(struct gbnf *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct gbnf *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (g->failed || k < 0 || (g->n + (size_t)k + 1 > g->cap &&
                               !(g->p = realloc(g->p, g->cap = 2 * (g->n + (size_t)k + 1))))) {
        g->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(g->p + g->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    g->n += (size_t)k;
}

/* s as a GBNF literal: quotes, backslashes and control bytes escaped. */
static void literal(struct gbnf *g, const char *s)
{
    add(g, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c == '"' || *c == '\\')
            add(g, "\\%c", *c);
        else if (*c < 0x20)
            add(g, "\\x%02X", *c);
        else
            add(g, "%c", *c);
    add(g, "\"");
}

/* The values a parameter's schema allows, as the formats write them:
 * strings bare (they may not hold "</", which would close the value),
 * anything else as JSON. */
static void value_rule(struct gbnf *g, const json_t *schema)
{
    const json_t *e = json_object_get(schema, "enum");
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (json_is_array(e) && json_array_size(e) > 0) {
        size_t i;
        const json_t *v;
        add(g, "(");
        json_array_foreach(e, i, v) {
            char *j = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            add(g, "%s", i ? " | " : "");
            literal(g, json_is_string(v) ? json_string_value(v) : j ? j : "null");
            free(j);
        }
        add(g, ")");
    } else if (type && !strcmp(type, "string")) {
        add(g, "text");
    } else if (type && !strcmp(type, "integer")) {
        add(g, "\"-\"? ([0-9] | [1-9] [0-9]{1,15})");
    } else if (type && !strcmp(type, "number")) {
        add(g, "number");
    } else if (type && !strcmp(type, "boolean")) {
        add(g, "(\"true\" | \"false\")");
    } else if (type && !strcmp(type, "null")) {
        add(g, "\"null\"");
    } else if (type && (!strcmp(type, "object") || !strcmp(type, "array"))) {
        add(g, "%s", type);
    } else {
        add(g, "text"); /* any: written bare, read back as JSON when it is */
    }
}

/* One pair of a call: open key mid value close, in the format's tags;
 * mid_json (DeepSeek V3.2's typed pairs): mid before a string, mid_json
 * before any other value (a schema without a type: either); nested
 * (MiniMax-M3's): ns <KEY> value ns </KEY>, objects and arrays as nested
 * tags (the rules below). */
struct tags {
    const char *open, *mid, *close, *mid_json;
    bool nested; /* MiniMax-M3's */
    bool typed;  /* Kimi K3's: op "argument key=\"K\" type=\"T\"" sp V cl "argument" sp */
};

/* Kimi K3's pair: the type its value's JSON type is, the value as that
 * type allows (a string as it is, the rest as JSON). */
static void typed_pair(struct gbnf *g, const char *key, const json_t *schema)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    const json_t *e = json_object_get(schema, "enum");
    const bool str = (type && !strcmp(type, "string")) ||
                     (json_is_array(e) && json_is_string(json_array_get(e, 0)));
    add(g, "op \"argument key=\\\"\" ");
    literal(g, key);
    add(g, " \"\\\" type=\\\"\" ");
    if (str || (type && strcmp(type, "string"))) {
        const char *word = str ? "string"
                           : !strcmp(type, "integer") || !strcmp(type, "number") ? "number"
                                                                                 : type;
        literal(g, word);
        add(g, " \"\\\"\" sp ");
        if (type && !strcmp(type, "string") && !json_is_array(e))
            add(g, "ktext");
        else
            value_rule(g, schema);
    } else {
        add(g, "(\"string\\\"\" sp ktext | [a-z]+ \"\\\"\" sp value)");
    }
    add(g, " cl \"argument\" sp");
}

/* MiniMax-M3's pair: its value as its type allows, objects and arrays as
 * tags (any keys: a grammar cannot tie a close to its opening's name, a
 * mismatched one makes no call when read back). */
static void nested_pair(struct gbnf *g, const char *key, const json_t *schema)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    add(g, "ns \"<\" ");
    literal(g, key);
    add(g, " \">\" ");
    if (type && !strcmp(type, "object"))
        add(g, "xobj");
    else if (type && !strcmp(type, "array"))
        add(g, "xarr");
    else if (!type && !json_object_get(schema, "enum"))
        add(g, "xval");
    else
        value_rule(g, schema);
    add(g, " ns \"</\" ");
    literal(g, key);
    add(g, " \">\"");
}

static void pair(struct gbnf *g, const struct tags *t, const char *key, const json_t *schema)
{
    if (t->nested) {
        nested_pair(g, key, schema);
        return;
    }
    if (t->typed) {
        typed_pair(g, key, schema);
        return;
    }
    add(g, "\"%s\" ", t->open);
    literal(g, key);
    const char *type = json_string_value(json_object_get(schema, "type"));
    const json_t *e = json_object_get(schema, "enum");
    const bool str = (type && !strcmp(type, "string")) ||
                     (json_is_array(e) && json_is_string(json_array_get(e, 0)));
    if (!t->mid_json || str) {
        add(g, " \"%s\" ", t->mid);
        value_rule(g, schema);
    } else if (type || json_is_array(e)) {
        add(g, " \"%s\" ", t->mid_json);
        value_rule(g, schema);
    } else {
        add(g, " (\"%s\" text | \"%s\" value)", t->mid, t->mid_json);
    }
    add(g, " \"%s\"", t->close);
}

/* Tool i's arguments as pairs: the required parameters as declared, then
 * the optional ones as declared, each skippable; any keys when its
 * parameters name none. */
static void args_rule(struct gbnf *g, const struct api_request *req, size_t i,
                      const struct tags *t)
{
    const json_t *f = api_tool_function(req, i);
    const json_t *p = json_object_get(json_object_get(f, "parameters"), "properties");
    const json_t *req_keys = json_object_get(json_object_get(f, "parameters"), "required");
    if ((!json_is_object(p) || !json_object_size(p)) && t->nested) {
        add(g, "xobj");
        return;
    }
    if ((!json_is_object(p) || !json_object_size(p)) && t->typed) {
        add(g, "(op \"argument key=\\\"\" [^\"]+ \"\\\" type=\\\"\" [a-z]+ \"\\\"\" sp ktext cl "
               "\"argument\" sp)*");
        return;
    }
    if (!json_is_object(p) || !json_object_size(p)) {
        add(g, "(\"%s\" key \"%s\" text \"%s\")*", t->open, t->mid, t->close);
        return;
    }
    add(g, "\"\"");
    for (int pass = 0; pass < 2; pass++) {
        const char *key;
        const json_t *schema;
        json_object_foreach((json_t *)p, key, schema) {
            bool required = false;
            size_t k;
            const json_t *r;
            json_array_foreach(req_keys, k, r)
                required = required || (json_is_string(r) && !strcmp(json_string_value(r), key));
            if (required != (pass == 0))
                continue;
            add(g, " %s", required ? "" : "(");
            pair(g, t, key, schema);
            add(g, "%s", required ? "" : ")?");
        }
    }
}

/* The shared rules: bare text, keys, JSON numbers, objects and arrays. */
static void common_rules(struct gbnf *g)
{
    add(g, "text ::= ([^<] | \"<\" [^/])*\n"
           "key ::= [^<\"\\n]+\n"
           "number ::= \"-\"? ([0-9] | [1-9] [0-9]{1,15}) (\".\" [0-9]{1,16})? "
           "([eE] [-+]? [0-9]{1,4})?\n"
           "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
           "object ::= \"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws value "
           "ws)*)? \"}\"\n"
           "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n"
           "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
           "[0-9a-fA-F]{4}))* \"\\\"\"\n"
           "ws ::= [ \\t\\n]{0,20}\n");
}

/* g with the shared rules after its root: the text, or NULL (freed) when
 * memory ran out. */
static char *finished(struct gbnf *g)
{
    common_rules(g);
    if (g->failed) {
        free(g->p);
        return NULL;
    }
    return g->p;
}

/* A format's marker: the token itself where the vocabulary has it as one
 * (a grammar's <[id]>: a control token has no text to match), else its
 * text. */
static void marker(struct gbnf *g, const struct fl_tokenizer *tok, const char *text)
{
    const int32_t id = tok ? fl_token_lookup(tok, text, strlen(text)) : FL_TOKEN_NULL;
    if (id >= 0)
        add(g, " <[%d]> ", (int)id);
    else
        literal(g, text);
}

static void tool_names(struct gbnf *g, const struct api_request *req)
{
    add(g, "(");
    for (size_t i = 0; i < req->n_tools; i++) {
        add(g, "%s", i ? " | " : "");
        literal(g, req->tool_names[i]);
    }
    add(g, ")");
}

/* MiniMax-M3's nested values and its namespace token (a token of tok's
 * where it is one). */
static void nested_rules(struct gbnf *g, const struct fl_tokenizer *tok)
{
    add(g, "ns ::= ");
    marker(g, tok, FL_MINIMAX_M3_NS);
    add(g, "\nxkey ::= [^<>/\\n]+\n"
           "xobj ::= (ns \"<\" xkey \">\" xval ns \"</\" xkey \">\")*\n"
           "xarr ::= (ns \"<item>\" xval ns \"</item>\")*\n"
           "xval ::= (ns \"<\" xkey \">\" xval ns \"</\" xkey \">\")+ | text\n");
}

/* Kimi K3's markers (tokens of tok's where they are ones), and its string
 * values: text without "<|" (where the markers are no tokens, a value
 * could otherwise run on through them). */
static void k3_rules(struct gbnf *g, const struct fl_tokenizer *tok)
{
    add(g, "ktext ::= ([^<] | \"<\" [^|])*\n");
    add(g, "op ::= ");
    marker(g, tok, "<|open|>");
    add(g, "\ncl ::= ");
    marker(g, tok, "<|close|>");
    add(g, "\nsp ::= ");
    marker(g, tok, "<|sep|>");
    add(g, "\n");
}

/* "required" in Kimi K2's, DeepSeek's and gpt-oss's formats, after the
 * prompt's opening (Kimi's and gpt-oss's `functions.`, DeepSeek's
 * <｜tool▁call▁begin｜>, V3-0324's and R1's with function<｜tool▁sep｜>): one
 * of the tools' names, the format's way to its arguments, a JSON object
 * (JSON mode's: these formats' named calls hold it to the parameters), and
 * Kimi's and DeepSeek's closes. */
static char *named_json_call(const struct api_request *req, const struct api_tool_reader *t,
                             const struct fl_tokenizer *tok)
{
    struct gbnf g = { 0 };
    add(&g, "root ::= ");
    tool_names(&g, req);
    if (t->fmt == FL_CHAT_GPT_OSS) { /* its <|call|> ends the answer */
        add(&g, " \" \" ");
        marker(&g, tok, "<|constrain|>");
        add(&g, " \"json\" ");
        marker(&g, tok, "<|message|>");
        add(&g, " object\n");
    } else if (t->fmt == FL_CHAT_DEEPSEEK_V31) {
        marker(&g, tok, "<｜tool▁sep｜>");
        add(&g, " object ");
        marker(&g, tok, "<｜tool▁call▁end｜>");
        marker(&g, tok, "<｜tool▁calls▁end｜>");
        add(&g, "\n");
    } else if (t->fmt == FL_CHAT_DEEPSEEK_V3_0324 || t->fmt == FL_CHAT_DEEPSEEK_R1) {
        add(&g, " \"\\n```json\\n\" object \"\\n```\" ");
        marker(&g, tok, "<｜tool▁call▁end｜>");
        marker(&g, tok, "<｜tool▁calls▁end｜>");
        add(&g, "\n");
    } else {
        add(&g, " \":%zu\" ", api_request_n_calls(req)); /* its ids count the calls */
        marker(&g, tok, "<|tool_call_argument_begin|>");
        add(&g, " object ");
        marker(&g, tok, "<|tool_call_end|>");
        marker(&g, tok, "<|tool_calls_section_end|>");
        add(&g, "\n");
    }
    return finished(&g);
}

char *api_tool_grammar(const struct api_request *req, const struct api_tool_reader *t,
                       const struct fl_tokenizer *tok)
{
    const bool glm47 = t->fmt == FL_CHAT_GLM47;
    const bool glm = t->fmt == FL_CHAT_GLM45 || glm47, minimax = t->fmt == FL_CHAT_MINIMAX_M2;
    const bool m3 = t->fmt == FL_CHAT_MINIMAX_M3, k3 = t->fmt == FL_CHAT_KIMI_K3;
    const bool qwen = t->fmt == FL_CHAT_QWEN35 || t->fmt == FL_CHAT_QWEN3_CODER;
    if (t->mode == API_TOOLS_CALL && req->n_tools &&
        (t->fmt == FL_CHAT_GPT_OSS || t->fmt == FL_CHAT_KIMI_K2_INSTRUCT ||
         t->fmt == FL_CHAT_KIMI_K2_THINKING || t->fmt == FL_CHAT_DEEPSEEK_V31 ||
         t->fmt == FL_CHAT_DEEPSEEK_V3_0324 || t->fmt == FL_CHAT_DEEPSEEK_R1))
        return named_json_call(req, t, tok);
    const bool dsml = t->fmt == FL_CHAT_DEEPSEEK_V32;
    if ((!glm && !minimax && !qwen && !dsml && !m3 && !k3) ||
        (t->mode != API_TOOLS_ARGS && t->mode != API_TOOLS_CALL))
        return NULL;
    static const struct tags
        glm_tags = { .open = "<arg_key>", .mid = "</arg_key>\\n<arg_value>", .close = "</arg_value>\\n" },
        mm_tags = { .open = "<parameter name=\\\"", .mid = "\\\">", .close = "</parameter>\\n" },
        qwen_tags = { .open = "<parameter=", .mid = ">\\n", .close = "\\n</parameter>\\n" },
        glm47_tags = { .open = "<arg_key>", .mid = "</arg_key><arg_value>", .close = "</arg_value>" },
        dsml_tags = { .open = "<｜DSML｜parameter name=\\\"", .mid = "\\\" string=\\\"true\\\">",
                      .close = "</｜DSML｜parameter>\\n", .mid_json = "\\\" string=\\\"false\\\">" },
        m3_tags = { .nested = true }, k3_tags = { .typed = true };
    const struct tags *tg = glm47 ? &glm47_tags : glm ? &glm_tags : qwen ? &qwen_tags
                            : dsml ? &dsml_tags : m3 ? &m3_tags : k3 ? &k3_tags : &mm_tags;
    const char *end = glm    ? "\"</tool_call>\""
                      : qwen ? "\"</function>\\n</tool_call>\""
                      : dsml ? "\"</｜DSML｜invoke>\\n</｜DSML｜function_calls>\""
                      : m3   ? "ns \"</invoke>\\n\" ns \"</tool_call>\""
                      : k3   ? "cl \"call\" sp cl \"tools\" sp"
                             : "\"</invoke>\\n</minimax:tool_call>\"";
    struct gbnf g = { 0 };
    if (t->mode == API_TOOLS_ARGS) { /* the prompt opened the named call */
        const size_t i = api_tool_index(req, t->name);
        if (i == req->n_tools)
            return NULL;
        add(&g, "root ::= ");
        args_rule(&g, req, i, tg);
        add(&g, " %s\n", end);
    } else { /* the prompt opened the block: one call of any tool */
        add(&g, "root ::= (");
        for (size_t i = 0; i < req->n_tools; i++) {
            add(&g, "%s", i ? " | " : "");
            add(&g, glm || qwen || k3 ? "" /* Qwen's prompt: <function=, Kimi K3's: tool=" */
                                    : dsml ? "\"<｜DSML｜invoke name=\\\"\" "
                                    : m3   ? "ns \"<invoke name=\\\"\" "
                                           : "\"<invoke name=\\\"\" "); /* Qwen's prompt: <function= */
            literal(&g, req->tool_names[i]);
            add(&g, glm47 ? " " : glm ? " \"\\n\" " : qwen ? " \">\\n\" " : m3 ? " \"\\\">\" "
                    : k3 ? " \"\\\" index=\\\"1\\\"\" sp "
                                                                                  : " \"\\\">\\n\" ");
            args_rule(&g, req, i, tg);
        }
        add(&g, ") %s\n", end);
    }
    if (m3)
        nested_rules(&g, tok);
    if (k3)
        k3_rules(&g, tok);
    return finished(&g);
}

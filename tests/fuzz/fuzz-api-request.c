/* fuzz-api-request: libFuzzer target for what `faultline serve` does with
 * an HTTP body (serve/http.c): the bytes as JSON, then as a chat and as a
 * completion request (api/openai.h; each prompt of a list selected) and as
 * llama-server's /completion (api/native.h, its result objects too), and
 * the chunk and completion objects built from what is accepted; a chat
 * accepted also renders in chatml (tools, calls and results too) and its
 * answer is read for reasoning and tool calls; the schema a forced call is
 * held to compiles, and so does the grammar of a forced call in GLM's or
 * MiniMax's format; a grammar compiles or says why (no vocabulary here:
 * its tokens are refused). As llama-server's /infill (api/native.h), an
 * accepted body builds its fill-in-the-middle prompt over a vocabulary of
 * byte tokens and the FIM tokens, roomy and cut to a batch of 8. As
 * Anthropic's /v1/messages (api/anthropic.h), a body converts into an
 * OpenAI chat body that goes through the chat checks above, or is refused
 * in one line; so does it as OpenAI's /v1/responses (api/responses.h). As
 * an embeddings body (api/embeddings.h), an accepted one has inputs that
 * each hold text or token ids, and its answers (OpenAI's in both encodings,
 * llama-server's) serialise; a refused one says why in one line.
 *
 * Whatever is accepted must have a prompt or messages and its chunks must
 * serialise; whatever is refused must say why in one line. A broken
 * contract aborts. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "api/anthropic.h"
#include "api/embeddings.h"
#include "api/native.h"
#include "api/responses.h"
#include "api/openai.h"
#include "gguf/gguf-writer.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"
#include "text/grammar.h"
#include "text/json-schema.h"
#include "text/tool-calls.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz-api-request: %s\n", what);
    abort();
}

static void serialises(json_t *v, const char *what)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    if (!s)
        die(what);
    free(s);
    json_decref(v);
}

/* The prompt in chatml, which has tools; the message's text read as an
 * answer and written back with its calls. */
static void tools(const struct api_request *r, const struct api_completion *comp, const char *text)
{
    char *p = NULL;
    const char *why = "";
    const int n = api_render_chat(FL_CHAT_CHATML, r, &p, &why);
    /* a continued last message can be refused only when rendered (two
     * assistant messages at the end, calls in it, nothing to continue):
     * --no-prefill-assistant, known after parsing, would accept them */
    const bool continued = r->continue_final > 0 ||
                           (r->n_msgs && !strcmp(r->msgs[r->n_msgs - 1].role, "assistant"));
    if ((n < 0 && !(n == -EINVAL && continued && *why)) || (n >= 0 && (!p || strlen(p) != (size_t)n)))
        die("an accepted chat does not render in chatml");
    free(p);
    p = NULL; /* gpt-oss's template: rendered, or refused (tools, channel tags) */
    const int g = api_render_chat(FL_CHAT_GPT_OSS, r, &p, &why);
    if (g >= 0 && (!p || strlen(p) != (size_t)g))
        die("a gpt-oss render is not its length");
    free(p);
    static const enum fl_chat_format other[] = { /* the other formats with tools */
        FL_CHAT_QWEN35, FL_CHAT_QWEN3_CODER, FL_CHAT_GLM45, FL_CHAT_GLM47, FL_CHAT_MINIMAX_M2,
        FL_CHAT_MINIMAX_M3, FL_CHAT_KIMI_K3, FL_CHAT_KIMI_K2_INSTRUCT, FL_CHAT_KIMI_K2_THINKING,
        FL_CHAT_DEEPSEEK_V31,
        FL_CHAT_DEEPSEEK_V3_0324, FL_CHAT_DEEPSEEK_R1,
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) { /* rendered, or refused */
        p = NULL;                                                        /* in one line */
        const int q = api_render_chat(other[i], r, &p, &why);
        if ((q >= 0 && (!p || strlen(p) != (size_t)q)) || (q < 0 && (q != -EINVAL || !*why)))
            die("a render is not its length, or refused without a reason");
        free(p);
    }
    struct api_tool_reader t;
    api_tool_reader_init(r, FL_CHAT_CHATML, &t);
    json_t *forced = api_tool_schema(r, &t); /* a forced call's schema compiles */
    struct fl_schema *fs = NULL;
    if (forced && fl_schema_compile(forced, &fs, NULL))
        die("a forced call's schema does not compile");
    fl_schema_free(fs);
    json_decref(forced);
    static const enum fl_chat_format forced_fmt[] = { FL_CHAT_GLM45, FL_CHAT_MINIMAX_M2,
                                                      FL_CHAT_MINIMAX_M3, FL_CHAT_KIMI_K3,
                                                      FL_CHAT_KIMI_K2_INSTRUCT,
                                                      FL_CHAT_GPT_OSS };
    for (int f = 0; f < 6; f++) { /* a forced call's grammar compiles */
        api_tool_reader_init(r, forced_fmt[f], &t);
        char *gbnf = api_tool_grammar(r, &t, NULL);
        struct fl_grammar *gr = NULL;
        struct fl_err err;
        if (gbnf && fl_grammar_compile(gbnf, strlen(gbnf), NULL, &gr, &err))
            die("a forced call's grammar does not compile");
        fl_grammar_free(gr);
        free(gbnf);
    }
    /* the message's text as an answer in MiniMax-M2's format (its prompt
     * opens the reasoning): its parts lie within the text (with tools, the
     * content is the text outside the calls, in the tools' answer) */
    struct api_answer_reader rd;
    api_answer_reader_init(r, FL_CHAT_MINIMAX_M2, &rd);
    struct api_answer a;
    const size_t n_text = strlen(text);
    if (api_answer_read(&rd, text, n_text, n_text % 2, &a))
        die("an answer cannot be read");
    const char *in = a.has_tools ? a.tools.content : text;
    const size_t n_in = a.has_tools ? a.tools.content_len : n_text;
    if (a.reasoning < text || a.reasoning + a.reasoning_len > text + n_text ||
        (a.content_len && (a.content < in || a.content + a.content_len > in + n_in)))
        die("an answer's parts lie outside it");
    struct api_completion c = *comp;
    c.tools = a.has_tools ? &a.tools : NULL;
    c.reasoning = a.reasoning;
    c.reasoning_len = a.reasoning_len;
    serialises(api_completion_json(&c), "an answer with tools does not serialise");
    api_answer_free(&a);
}

/* What /completion (llama-server's own API) answers for r: its result
 * object, whole and as a stream's event, with the settings. */
static void native_results(const struct api_request *r, const char *text)
{
    struct fl_sampler_params d, out;
    fl_sampler_defaults(&d, 1);
    api_request_sampling(r, &d, &out);
    if (r->n_probs < 0 || r->n_probs > FL_MAX_TOP_LOGPROBS || !r->logprobs ||
        out.n_order < 0 || out.n_order > FL_SAMPLER_MAX_ORDER)
        die("native fields out of range");
    /* what the parser accepts makes a sampler (no vocabulary here to spell
     * DRY's breakers) that draws a token */
    struct fl_sampler_params q = out;
    q.n_dry_breakers = 0;
    struct fl_sampler *smp = NULL;
    static const float logits[8] = { 0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 1.0f, -3.0f, 0.25f };
    if (fl_sampler_new(&q, 8, NULL, &smp) != 0)
        die("accepted sampler fields that fl_sampler_new refuses");
    for (int i = 0; i < 3; i++) {
        const int32_t id = fl_sampler_sample(smp, logits);
        if (id < 0 || id > 7)
            die("accepted sampler fields drew no token");
        fl_sampler_accept(smp, id);
    }
    fl_sampler_free(smp);
    const struct api_native_settings st = { .sampling = &out, .n_predict = r->max_tokens,
                                            .stop = r->stop, .n_stop = r->n_stop,
                                            .grammar = r->grammar, .grammar_len = r->grammar_len };
    const int32_t ids[2] = { 1, 2 };
    struct api_native_result res = { .final = true, .content = text, .len = strlen(text),
                                     .tokens = ids, .n_tokens = 2, .model = r->model,
                                     .prompt = text, .prompt_len = strlen(text),
                                     .stop_type = api_native_stop_type("stop", r->n_stop - 1),
                                     .settings = api_native_settings_json(&st) };
    if (!res.settings)
        die("native settings do not serialise");
    serialises(api_native_json(&res), "a native result does not serialise");
    res.final = false;
    res.settings = NULL;
    serialises(api_native_json(&res), "a native event does not serialise");
}

static const struct fl_tokenizer *fim_tok(void);

static void one(json_t *body, enum api_kind kind, bool native)
{
    struct api_request r;
    struct fl_err err = { "" };
    if (native ? api_request_parse_native(body, &r, &err) : api_request_parse(body, kind, &r, &err)) {
        if (!err.msg[0] || strchr(err.msg, '\n'))
            die("refused without a one-line reason");
        return;
    }
    if (kind == API_CHAT ? r.n_msgs == 0 : !r.prompt && !r.prompt_mixed && r.n_prompt_ids == 0)
        die("accepted without a prompt");
    for (int p = r.n_prompts - 1; kind == API_COMPLETION && p >= 0; p--) /* each of a list */
        if (api_request_select_prompt(&r, p) || (!r.prompt && !r.prompt_mixed && r.n_prompt_ids == 0))
            die("a prompt of the list cannot be selected");
    if (r.top_logprobs < 0 || r.top_logprobs > FL_MAX_TOP_LOGPROBS ||
        r.n_logit_bias < 0 || r.n_logit_bias > API_MAX_LOGIT_BIAS)
        die("logprobs or logit_bias out of range");
    for (int i = 0; i < r.n_logit_bias; i++)
        if (r.logit_bias[i].id < 0 || !(r.logit_bias[i].bias >= -100.0f || r.logit_bias[i].bias == -INFINITY) ||
            r.logit_bias[i].bias > 100.0f)
            die("a logit_bias entry out of range");
    struct fl_grammar *g = NULL; /* a grammar compiles, or says why in one line */
    err.msg[0] = 0;
    if (r.grammar && (r.json_object || r.json_schema || !r.grammar_len))
        die("a grammar beside a schema, or an empty one, accepted");
    if (r.grammar && fl_grammar_compile(r.grammar, r.grammar_len, NULL, &g, &err) &&
        strncmp(err.msg, "grammar: ", 9))
        die("a grammar refused without its line");
    fl_grammar_free(g);
    struct fl_sampler_params d, out;
    fl_sampler_defaults(&d, 1);
    api_request_sampling(&r, &d, &out);
    const char *text = r.kind == API_CHAT ? r.msgs[0].content : r.prompt ? r.prompt : "";
    const struct api_chunk c = { .kind = kind, .id = "x", .model = r.model ? r.model : "m",
                                 .role = true, .text = text, .len = strlen(text),
                                 .finish_reason = r.stream ? "stop" : NULL,
                                 .usage = r.include_usage };
    serialises(api_chunk_json(&c), "a chunk does not serialise");
    const struct api_completion comp = { .kind = kind, .id = "x", .model = c.model, .created = 1,
                                         .text = text, .len = strlen(text),
                                         .finish_reason = "length", .prompt_tokens = 1,
                                         .completion_tokens = 1 };
    json_t *doc = api_completion_json(&comp); /* with a second choice, as "n" asks */
    if (!doc || api_completion_add_choice(doc, api_completion_json(&comp), 1, true))
        die("a second choice cannot be added");
    serialises(doc, "a completion does not serialise");
    if (kind == API_CHAT)
        tools(&r, &comp, text);
    if (native)
        native_results(&r, text);
    if (r.suffix) { /* OpenAI's suffix: a FIM prompt of the prompt and it, or why not */
        static const struct api_infill_limits lim = { 64, 8, 256, false };
        int32_t *ids = NULL;
        const char *why = NULL;
        const int n = api_request_prompt_tokens(fim_tok(), FL_CHAT_CHATML, &r, &lim, &ids, &why);
        if (n >= 0 ? n < 3 || ids[n - 1] != fl_token_fim(fim_tok(), FL_FIM_MID) : !why)
            die("a suffix's prompt without its FIM tokens, or refused without a reason");
        free(ids);
    }
    api_request_free(&r);
}

/* SPM: <unk> <s> </s>, the 256 byte tokens, then Qwen's six FIM tokens */
static struct fl_tokenizer *fim_vocab(void)
{
    static const char *const fim[] = { "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                                       "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>" };
    enum { N = 3 + 256 + 6 };
    static char bytes[256][8];
    const char *tokens[N] = { "<unk>", "<s>", "</s>" };
    int32_t types[N] = { 2, 3, 3 };
    for (int i = 3; i < N; i++) {
        snprintf(bytes[(i - 3) & 255], 8, "<0x%02X>", (i - 3) & 255);
        tokens[i] = i < 3 + 256 ? bytes[i - 3] : fim[i - 3 - 256];
        types[i] = i < 3 + 256 ? 6 : 3;
    }
    char path[] = "/tmp/fuzz-api-request-XXXXXX";
    const int fd = mkstemp(path);
    struct gguf_writer *w = NULL;
    struct gguf_file *g = NULL;
    struct fl_tokenizer *tok = NULL;
    if (fd < 0)
        die("no temporary file");
    close(fd);
    if (gguf_writer_open(path, &w, NULL) ||
        gguf_writer_kv_str(w, "tokenizer.ggml.model", "llama") ||
        gguf_writer_kv_str_arr(w, "tokenizer.ggml.tokens", tokens, N) ||
        gguf_writer_kv_arr(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, types, N) ||
        gguf_writer_finish(w, NULL) || gguf_open(path, &g, NULL) || fl_tokenizer_load(g, &tok, NULL))
        die("the FIM vocabulary does not load");
    gguf_writer_close(w);
    gguf_close(g);
    unlink(path);
    return tok;
}

static const struct fl_tokenizer *fim_tok(void)
{
    static struct fl_tokenizer *tok;
    if (!tok)
        tok = fim_vocab();
    return tok;
}

/* /infill: accepted bodies build a prompt ending in the middle token,
 * within what the limits let through besides the prompt's own tokens. */
static void infill(json_t *body)
{
    const struct fl_tokenizer *tok = fim_tok();
    struct api_request r;
    struct fl_err err = { "" };
    json_t *copy = json_deep_copy(body); /* parsing adds an empty prompt */
    const int rc = copy ? api_request_parse_infill(copy, &r, &err) : -1;
    json_decref(copy);
    if (rc) {
        if (copy && (!err.msg[0] || strchr(err.msg, '\n')))
            die("an infill body refused without a one-line reason");
        return;
    }
    if (!r.infill || !r.input_prefix || !r.input_suffix || !r.prompt)
        die("an infill body accepted without its pieces");
    static const struct api_infill_limits lims[] = { { 2048, -1, 4096, false }, { 8, 2, 20, true } };
    for (int l = 0; l < 2; l++) {
        int32_t *ids = NULL;
        const char *why = "";
        const int n = api_infill_tokens(tok, &r, &lims[l], &ids, &why);
        if (n < 3 || ids[n - 1] != fl_token_fim(tok, FL_FIM_MID))
            die("an infill prompt without its FIM tokens");
        int32_t *p = NULL; /* tight: 8 of extra, BOS, 6 of prefix, 3 FIM tokens, the prompt */
        const int np = fl_tokenize_alloc(tok, r.prompt, strlen(r.prompt), false, true, &p);
        free(p);
        if (l == 1 && np >= 0 && n > 8 + 1 + 6 + 3 + np)
            die("an infill prompt over its limits");
        free(ids);
    }
    api_request_free(&r);
}

/* An embeddings body at /v1/embeddings (oai) and at /embedding. */
static void embeddings(json_t *body, bool oai)
{
    struct api_embd_request r;
    struct fl_err err = { "" };
    if (api_embd_from_json(body, oai, API_EMBD_NORM_DEFAULT, &r, &err)) {
        if (!err.msg[0] || strchr(err.msg, '\n'))
            die("an embeddings body refused without a one-line reason");
        api_embd_free(&r);
        return;
    }
    if (r.n_in < 1 || r.n_in > API_MAX_INPUTS || r.normalize < -1)
        die("embeddings accepted without inputs, or with too many");
    static const float row[4] = { 1.0f, -2.5f, 0.0f, 3e-8f };
    const float **rows = calloc((size_t)r.n_in, sizeof(*rows));
    int *n = calloc((size_t)r.n_in, sizeof(int));
    for (int i = 0; rows && n && i < r.n_in; i++) {
        if (!r.in[i].text && r.in[i].n_ids < 1)
            die("an embeddings input with neither text nor ids");
        rows[i] = row;
        n[i] = 1;
    }
    for (int b64 = 0; rows && n && b64 < 2; b64++) {
        r.base64 = b64;
        serialises(api_embd_answer(&r, "model", rows, n, 4, n), "an embeddings answer");
    }
    free(rows);
    free(n);
    api_embd_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body = NULL;
    struct fl_err err = { "" };
    if (fl_json_load_bytes((const char *)data, size, false, "the body", &body, &err))
        return 0;
    one(body, API_CHAT, false);
    one(body, API_COMPLETION, false);
    one(body, API_COMPLETION, true);
    infill(body);
    embeddings(body, true);
    embeddings(body, false);
    const char *name = NULL;
    if (!api_slot_filename(body, &name) &&
        (!name[0] || strlen(name) > 255 || strpbrk(name, "/\\") || strstr(name, "..")))
        die("a slot file name with a folder or '..' taken");
    /* Anthropic's Messages API and OpenAI's Responses API: a chat body, or one line */
    for (int api = 0; api < 2; api++) {
        json_t *chat = NULL;
        err.msg[0] = 0;
        if (api ? api_responses_to_chat(body, &chat, &err) : api_anthropic_to_chat(body, &chat, &err)) {
            if (!err.msg[0] || strchr(err.msg, '\n') || chat)
                die("a Messages / Responses body refused without a one-line reason");
        } else {
            if (!json_is_object(chat) || !json_is_array(json_object_get(chat, "messages")))
                die("a Messages / Responses body converted without messages");
            one(chat, API_CHAT, false);
        }
        json_decref(chat);
    }
    json_decref(body);
    return 0;
}

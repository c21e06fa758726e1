/* serve.c: `faultline serve` — the flags of an OpenAI-compatible server
 * (serve/server.h) over every session flag `run` takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "app/cli/session-flags.h"
#include "base/units.h"
#include "base/whole-file.h"
#include "serve/server.h"

static int usage(FILE *out)
{
    fprintf(out,
            "usage: faultline serve -m MODEL [--host 127.0.0.1] [--port 8080] [-np 4] [-c CELLS]\n"
            "                       [--api-key KEY[,KEY...]] [--api-key-file FILE] [--alias NAME]\n"
            "                       [--chat-template NAME | --chat-template-file FILE.jinja]\n"
            "                       [-n MAX_TOKENS] [--temp 0.8 ...] [--max-queue 64]\n"
            "                       [--max-body 8M] [--max-conn 512] [--timeout 60] [--drain 10]\n"
            "                       [--no-cache-prompt] [--reasoning-format auto|deepseek|none|\n"
            "                       deepseek-legacy] [-rea on|off|auto] [--chat-template-kwargs J]\n"
            "                       [--reasoning-budget N] [--reasoning-budget-message TEXT]\n"
            "                       [--reasoning-effort low|medium|high]\n"
            "                       [-j SCHEMA | -jf FILE | --grammar GBNF | --grammar-file FILE]\n"
            "                       [--spm-infill] [--no-slots] [--no-prefill-assistant]\n"
            "                       [--slot-save-path DIR]\n"
            "                       [--pooling none|mean|cls|last] [--embd-normalize 2]\n"
            "                       [--spec-type ngram-simple [--spec-ngram-simple-size-n 12]\n"
            "                        [--spec-ngram-simple-size-m 48]]\n"
            "                       [-md DRAFT_MODEL [--spec-draft-n-max 3] [--spec-draft-n-min 0]\n"
            "                        [--spec-draft-p-min 0] [-td N] [-ctkd TYPE] [-ctvd TYPE]]\n"
            "An OpenAI-compatible server: POST /v1/chat/completions, /v1/completions (\"stream\":\n"
            "true: server-sent events; \"tools\" and \"tool_choice\" for Qwen3, Qwen3.5, Qwen3-Coder,\n"
            "GLM, MiniMax, gpt-oss, Kimi and DeepSeek V3.1 models; a thinking model's <think> comes back as\n"
            "message.reasoning_content, or with --reasoning-format none, or \"reasoning_format\":\n"
            "\"none\", in content; -rea off, or \"chat_template_kwargs\": {\"enable_thinking\": false},\n"
            "asks Qwen3, Qwen3.5, GLM and DeepSeek V3.1 not to think;\n"
            "--reasoning-budget N, or \"reasoning_budget_tokens\": N, forces </think> after N tokens),\n"
            "GET /v1/models, /health, /metrics, POST /tokenize, /detokenize, /apply-template;\n"
            "llama-server's POST /completion, GET /props, GET /slots (each sequence's request;\n"
            "?fail_on_no_slot=1: 503 when all are busy; --no-slots: off), POST\n"
            "/slots/{id}?action=save|restore|erase {\"filename\"} (with --slot-save-path DIR: a\n"
            "slot's prompt cache in DIR/filename, read back by this or a later server with the same\n"
            "bits), POST /infill (fill in\n"
            "the middle for code editors, on models with FIM tokens; -b sizes its prefix and\n"
            "suffix, --spm-infill puts the suffix first); Anthropic's POST /v1/messages and\n"
            "/v1/messages/count_tokens (agents written for Claude: ANTHROPIC_BASE_URL=\n"
            "http://127.0.0.1:8080; x-api-key);\n"
            "OpenAI's POST /v1/responses (Codex, client.responses; stateless);\n"
            "POST /v1/embeddings (client.embeddings) and llama-server's /embedding: the final norm's\n"
            "output pooled by --pooling (default: the model's pooling_type, else last; none: a row\n"
            "per token, /embedding only) and scaled by --embd-normalize (2: unit length; -1: none).\n"
            "-j / --grammar hold the answers of requests that ask for no format, schema, grammar or\n"
            "tools of their own to a JSON schema or a GBNF grammar (a request's \"grammar\" or\n"
            "\"json_schema\" does it for itself).\n"
            "A chat whose last message is the assistant's is continued from it (a prefill, as\n"
            "llama-server; --no-prefill-assistant closes it and answers anew).\n"
            "-np sequences run at once, sharing -c KV cells and every expert read (default -c 0:\n"
            "the model's trained context, as much of it as the memory beside the placement holds\n"
            "with a 1 GiB margin, at least 4096; -v prints it).\n"
            "--spec-type ngram-simple: speculative decoding without a draft model (llama.cpp's):\n"
            "when a sequence's last N tokens appeared in it before, the M after them (at most 30)\n"
            "are checked in the same step; the answers stay byte for byte the same\n"
            "(/completion's timings: draft_n, draft_n_accepted). -md FILE: a draft model with the\n"
            "same vocabulary proposes up to --spec-draft-n-max tokens (llama.cpp's draft-simple,\n"
            "after ngram-simple's when both are on), on the CPU, for every sequence at once.\n"
            "A prompt that starts as an earlier one did reads its whole -b chunks from the prompt\n"
            "cache (the same bits as computing them; --no-cache-prompt, or \"cache_prompt\": false\n"
            "in a request, turns it off). Loopback only unless --host says otherwise.\n"
            "SIGINT/SIGTERM: stop accepting, give in-flight requests --drain seconds, exit 0.\n"
            "\n"
            "  faultline serve -m model.gguf --port 8080 &\n"
            "  curl -s localhost:8080/v1/chat/completions -H 'Content-Type: application/json' \\\n"
            "    -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 32}'\n"
            "  node -e 'const OpenAI = require(\"openai\"); new OpenAI({baseURL: \"http://127.0.0.1:8080/v1\",\n"
            "    apiKey: \"none\"}).chat.completions.create({model: \"m\", stream: true, messages:\n"
            "    [{role: \"user\", content: \"Hello\"}]}).then(async s => { for await (const c of s)\n"
            "    process.stdout.write(c.choices[0]?.delta?.content ?? \"\") })'\n");
    eng_session_print_usage(out);
    return out == stdout ? 0 : 2;
}

static bool arg_size(int argc, char **argv, int *i, size_t *out)
{
    const char *v = NULL;
    uint64_t n = 0;
    if (!eng_arg_str("serve", argc, argv, i, &v))
        return false;
    if (fl_parse_size(v, &n) || n < 1024 || n > (1ull << 32)) {
        fprintf(stderr, "faultline serve: %s wants a size from 1K to 4G, not '%s'\n", argv[*i - 1], v);
        return false;
    }
    *out = (size_t)n;
    return true;
}

/* --api-key-file (llama-server's): a key per line, blank lines skipped,
 * joined to --api-key's list in *keys (owned by the caller). 0, or -1 with
 * one line said. */
static int read_keys(struct srv_opts *o, const char *path, char **keys)
{
    char *text = NULL;
    size_t len;
    const int rc = fl_read_whole_file(path, 1 << 20, &text, &len);
    if (rc) {
        fprintf(stderr, "faultline serve: --api-key-file %s: %s\n", path, strerror(-rc));
        return -1;
    }
    size_t n = o->api_key ? strlen(o->api_key) : 0;
    char *list = malloc(n + len + 2);
    if (!list) {
        free(text);
        return -1;
    }
    memcpy(list, o->api_key ? o->api_key : "", n);
    for (char *line = strtok(text, "\r\n"); line; line = strtok(NULL, "\r\n"))
        if (line[strspn(line, " \t")]) { /* a key may hold no comma: it separates keys */
            if (strchr(line, ',')) {
                fprintf(stderr, "faultline serve: --api-key-file %s: a key with a comma\n", path);
                free(text), free(list);
                return -1;
            }
            n += (size_t)sprintf(list + n, "%s%s", n ? "," : "", line);
        }
    free(text);
    if (!n) {
        fprintf(stderr, "faultline serve: --api-key-file %s: no key in it\n", path);
        free(list);
        return -1;
    }
    o->api_key = *keys = list;
    return 0;
}

/* --slot-save-path's folder exists (llama-server's check). */
static bool is_folder(const char *path)
{
    struct stat st;
    if (!stat(path, &st) && S_ISDIR(st.st_mode))
        return true;
    fprintf(stderr, "faultline serve: --slot-save-path %s: not a folder\n", path);
    return false;
}

static int parse(int argc, char **argv, struct srv_opts *o, const char **chat,
                 struct eng_constraint_args *cons, char **keys)
{
    srv_opts_init(o);
    o->sp.n_seq = 4;
    bool seed_given = false;
    const char *key_file = NULL;
    struct eng_compat compat = { 0 };
    const struct eng_common_args common = { &o->sp, NULL, NULL, true, &compat };
    const struct eng_request_args reqs = { &o->sp, &o->samp, &seed_given, &o->max_tokens, chat,
                                           &o->reasoning, cons };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int taken;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout);
        if ((taken = eng_arg_requests("serve", argc, argv, &i, &reqs)) != 0)
            ok = taken > 0;
        else if (!strcmp(a, "--host"))
            ok = eng_arg_str("serve", argc, argv, &i, &o->host);
        else if (!strcmp(a, "--port"))
            ok = eng_arg_int("serve", argc, argv, &i, 0, 65535, &o->port);
        else if (!strcmp(a, "--api-key"))
            ok = eng_arg_str("serve", argc, argv, &i, &o->api_key);
        else if (!strcmp(a, "--api-key-file"))
            ok = eng_arg_str("serve", argc, argv, &i, &key_file);
        else if (!strcmp(a, "--alias") || !strcmp(a, "-a"))
            ok = eng_arg_str("serve", argc, argv, &i, &o->alias);
        else if (!strcmp(a, "--max-queue"))
            ok = eng_arg_int("serve", argc, argv, &i, 1, 1 << 20, &o->max_queue);
        else if (!strcmp(a, "--max-conn"))
            ok = eng_arg_int("serve", argc, argv, &i, 4, 1 << 16, &o->max_conn);
        else if (eng_arg_is(a, "-to", "--timeout"))
            ok = eng_arg_int("serve", argc, argv, &i, 1, 86400, &o->timeout_s);
        else if ((taken = eng_arg_spec("serve", argc, argv, &i, &o->spec)) != 0)
            ok = taken > 0;
        else if ((taken = eng_arg_embd("serve", argc, argv, &i, &o->pooling,
                                       &o->embd_normalize)) != 0)
            ok = taken > 0;
        else if (!strcmp(a, "--spm-infill"))
            o->spm_infill = true;
        else if (!strcmp(a, "--slots") || !strcmp(a, "--no-slots"))
            o->no_slots = !strcmp(a, "--no-slots");
        else if (!strcmp(a, "--slot-save-path"))
            ok = eng_arg_str("serve", argc, argv, &i, &o->slot_save_path) &&
                 is_folder(o->slot_save_path);
        else if (!strcmp(a, "--max-body"))
            ok = arg_size(argc, argv, &i, &o->max_body);
        else if (!strcmp(a, "--drain")) {
            int d = 0;
            ok = eng_arg_int("serve", argc, argv, &i, 0, 3600, &d);
            o->drain_s = d;
        } else
            ok = eng_arg_last("serve", argc, argv, &i, &common) > 0;
        if (!ok)
            return 2;
    }
    if (!o->sp.model_path) {
        fprintf(stderr, "faultline serve: -m MODEL is required\n");
        return usage(stderr);
    }
    if (eng_constraint_load("serve", cons, &o->constraint) ||
        (key_file && read_keys(o, key_file, keys)))
        return 2;
    eng_args_finish("serve", &common);
    if (compat.batch) /* llama.cpp's -b: /infill's batch of prefix and suffix */
        o->infill_batch = compat.batch;
    return -1;
}

int cli_serve(int argc, char **argv)
{
    struct srv_opts o;
    const char *chat = NULL;
    struct eng_constraint_args cons = { 0 };
    char *keys = NULL; /* --api-key-file's, with --api-key's */
    int rc = parse(argc, argv, &o, &chat, &cons, &keys);
    if (rc >= 0) {
        eng_constraint_free(&cons);
        free(keys);
        return rc;
    }
    if (chat && (o.chat = fl_chat_format_from_name(chat)) == FL_CHAT_UNKNOWN) {
        fprintf(stderr, "faultline serve: --chat-template %s: not a known format\n", chat);
        return 2;
    }
    struct fl_err err = { "" };
    rc = srv_run(&o, &err);
    eng_constraint_free(&cons);
    free(keys);
    if (rc)
        fprintf(stderr, "faultline serve: %s\n", err.msg);
    return rc ? 1 : 0;
}

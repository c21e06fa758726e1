/* run.c: `faultline run` — generate text from a prompt, streaming tokens to
 * stdout as they come (after the prompt, as llama-completion shows it), or
 * a conversation (run-chat.c); the speed line goes to stderr. The first
 * Ctrl-C stops generating, the statistics are still printed and written,
 * and the exit status is 130; a second one exits at once. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/openai.h"
#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "app/cli/interrupt.h"
#include "app/cli/run.h"
#include "app/cli/session-flags.h"
#include "base/json.h"
#include "base/whole-file.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "text/chat.h"
#include "text/json-schema.h"
#include "text/tokenizer.h"

static int usage(FILE *out)
{
    fprintf(out,
        "usage: faultline run -m MODEL [-p PROMPT | -f FILE] [-n N] [-t T] [-c CTX] [options]\n"
        "Generates text after the prompt, or holds a conversation in the model's chat format.\n"
        "  -p, --prompt TEXT     the prompt (escapes such as \\n are processed; --no-escape)\n"
        "  -f, --file FILE       the prompt from a file; - reads standard input\n"
        "  -c, --ctx-size N      positions in the KV cache (default 0: the model's trained\n"
        "                        context, cut to the memory the placement leaves with a\n"
        "                        1 GiB margin, at least 4096; -v prints it)\n"
        "  -n, --n-predict N     tokens to make (default -1: until the model ends its turn or\n"
        "                        the context is full; -2: until the context is full)\n"
        "  -r, --reverse-prompt TEXT  stop when the output shows TEXT (repeatable)\n"
        "  --prompt-cache FILE   keep the prompt's start in FILE and read it back when a later\n"
        "                        prompt starts the same (whole -b chunks; same output bits);\n"
        "                        --prompt-cache-ro reads only; --prompt-cache-all is taken;\n"
        "                        in -cnv, the first turn's (a long -sys system prompt)\n"
        "  --ignore-eos          never end early (end-of-generation tokens are not drawn)\n"
        "  -j, --json-schema SCHEMA  every answer is a JSON value of SCHEMA (the subset of\n"
        "                        docs/serve.md's structured outputs); it ends when whole\n"
        "  -jf, --json-schema-file FILE  the same, the schema read from FILE\n"
        "  --grammar GBNF        every answer is a sentence of this grammar (llama.cpp's GBNF,\n"
        "                        docs/serve.md); it ends when nothing more may follow\n"
        "  --grammar-file FILE   the same, the grammar read from FILE\n"
        "  -l, --logit-bias ID(+|-)BIAS  add BIAS to token ID's logit (15043+1, 15043-inf\n"
        "                        bans it; repeatable)\n"
        "  --no-display-prompt   print only the generated text\n"
        "  -sp, --special        print control tokens' text too (<|im_end|>, ...)\n"
        "  --verbose-prompt      print the prompt's tokens (id -> 'piece') on stderr first\n"
        "  -e, --escape / --no-escape  process escapes in the prompt (default on)\n"
        "  --chat, -st, --single-turn  one answer to the prompt in the chat format\n"
        "conversation (default when the model has a chat format and stdin is a terminal):\n"
        "  -cnv, --conversation, -i, --interactive   turn it on; -no-cnv, --no-conversation off\n"
        "  -sys, --system-prompt TEXT   the system turn\n"
        "  --chat-template NAME  a built-in format (chatml, qwen3.5, qwen3-coder, llama2,\n"
        "                        llama3, mistral-v7, deepseek3, deepseek-v3.1,\n"
        "                        deepseek-v3-0324, deepseek-r1, gpt-oss, glm-4.5, glm-4.7,\n"
        "                        chatglm4, minimax-m2, minimax-m3, kimi-k3, ...) instead of\n"
        "                        the model's\n"
        "  -rea, --reasoning on|off|auto  off: the model answers without thinking (Qwen3's,\n"
        "                        Qwen3.5's, GLM's and DeepSeek V3.1's enable_thinking=false;\n"
        "                        MiniMax-M3's thinking_mode disabled);\n"
        "                        auto: as the template\n"
        "  --chat-template-kwargs JSON  '{\"enable_thinking\": false}' is -rea off;\n"
        "                        '{\"clear_thinking\": false}' keeps GLM-4.7's reasoning;\n"
        "                        '{\"thinking_mode\": \"enabled\"}' MiniMax-M3's (or disabled,\n"
        "                        adaptive); '{\"thinking\": false}' Kimi K3's (DeepSeek V3.1's)\n"
        "                        and '{\"thinking_effort\": \"low\"}' (high, max)\n"
        "  --reasoning-effort low|medium|high  gpt-oss's reasoning effort (its system turn)\n"
        "  --reasoning-budget N  in a chat answer, after N tokens of reasoning force\n"
        "                        </think> (0: answer at once; -1, the default: no limit)\n"
        "  --reasoning-budget-message TEXT  forced before </think> when the budget ends it\n"
        "  --spec-type ngram-simple  speculative decoding without a draft model (llama.cpp's):\n"
        "                        when the last N tokens appeared before, the M after them (at\n"
        "                        most 30) are checked in one step; the output stays the same\n"
        "  --spec-ngram-simple-size-n N, --spec-ngram-simple-size-m M  (12, 48)\n"
        "  -md, --spec-draft-model FILE  a draft model with the same vocabulary proposes the\n"
        "                        next tokens (llama.cpp's draft-simple; after ngram-simple's\n"
        "                        when both are on); the output stays the same\n"
        "  --spec-draft-n-max N (3, at most 30), --spec-draft-n-min N (0),\n"
        "  --spec-draft-p-min P (0), -td N (its threads), -ctkd/-ctvd TYPE (its KV cache)\n"
        "  In the conversation: /exit ends it; Ctrl-C stops the answer, a Ctrl-C at the\n"
        "  prompt ends it; a line ending in \\ continues on the next.\n"
        "sampling: --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --typical 1.0\n"
        "          --repeat-penalty 1.0 --repeat-last-n 64 --presence-penalty 0\n"
        "          --frequency-penalty 0 --min-keep 0 -s/--seed S (--temp 0 is greedy)\n"
        "          --dry-multiplier 0 --dry-base 1.75 --dry-allowed-length 2\n"
        "          --dry-penalty-last-n 64 --dry-sequence-breaker S (repeatable; none)\n"
        "          --top-nsigma -1 --xtc-probability 0 --xtc-threshold 0.1\n"
        "          --dynatemp-range 0 --dynatemp-exp 1 --mirostat 0|1|2 --mirostat-lr 0.1\n"
        "          --mirostat-ent 5\n"
        "          --samplers \"" FL_SAMPLER_DEFAULT_ORDER "\" or\n"
        "          --sampling-seq " FL_SAMPLER_DEFAULT_SEQ ": the order (llama.cpp's names and default)\n"
        "llama.cpp flags taken as notes: -b/-ub (tokens per forward call = min), -tb, -fa,\n"
        "  --mlock, --no-mmap, -v, --log-disable, --jinja.\n"
        "Exit status: 0 done, 1 runtime error, 2 command-line mistake, 130 after Ctrl-C.\n");
    eng_session_print_usage(out);
    return out == stdout ? 0 : ENG_EXIT_USAGE;
}


/* llama.cpp's -l TOKEN_ID(+|-)BIAS ("15043+1", "15043-inf"). */
static bool parse_bias(const char *v, struct fl_logit_bias *out)
{
    char *end = NULL;
    const long id = v[0] >= '0' && v[0] <= '9' ? strtol(v, &end, 10) : -1;
    if (id < 0 || id > INT32_MAX || !end || (*end != '+' && *end != '-'))
        return false;
    const char sign = *end;
    char *num_end = NULL;
    const float b = strtof(end + 1, &num_end);
    if (num_end == end + 1 || *num_end || isnan(b) || b < 0 || end[1] == '-' || end[1] == '+')
        return false;
    *out = (struct fl_logit_bias){ (int32_t)id, sign == '-' ? -b : b };
    return true;
}

/* The flags only run has. 1 taken, 0 not one, -1 bad value (said). */
static int run_reasoning_arg(int argc, char **argv, int *i, struct run_opts *o)
{
    struct api_reasoning_defaults r = { .format = API_REASONING_DEEPSEEK, .thinking = o->thinking,
                                        .budget = o->think_budget, .effort = o->reasoning_effort,
                                        .budget_message = o->think_message,
                                        .keep_reasoning = o->keep_reasoning,
                                        .ds_thinking = o->ds_thinking,
                                        .think_mode = o->think_mode,
                                        .thinking_effort = o->thinking_effort };
    const int taken = eng_arg_reasoning("run", argc, argv, i, &r);
    o->think_mode = r.think_mode;
    o->thinking_effort = r.thinking_effort;
    o->thinking = r.thinking;
    o->keep_reasoning = r.keep_reasoning;
    o->ds_thinking = r.ds_thinking;
    o->reasoning_effort = r.effort;
    o->think_budget = r.budget;
    o->think_message = r.budget_message;
    return taken;
}

static int parse_own(struct run_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    bool ok = true;
    int taken;
    if (eng_arg_is(a, "-n", "--n-predict"))
        ok = eng_arg_int("run", argc, argv, i, -2, 1 << 24, &o->n_gen);
    else if (eng_arg_is(a, "-r", "--reverse-prompt")) {
        ok = o->n_reverse < RUN_MAX_REVERSE &&
             eng_arg_str("run", argc, argv, i, &o->reverse[o->n_reverse++]);
        if (!ok)
            fprintf(stderr, "faultline run: at most %d -r texts\n", RUN_MAX_REVERSE);
    } else if (eng_arg_is(a, "-l", "--logit-bias")) {
        const char *v = NULL;
        ok = o->n_bias < RUN_MAX_BIAS && eng_arg_str("run", argc, argv, i, &v) &&
             parse_bias(v, &o->bias[o->n_bias++]);
        if (!ok)
            fprintf(stderr, "faultline run: %s %s: expected TOKEN_ID+BIAS or TOKEN_ID-BIAS "
                    "(15043+1, 15043-inf), at most %d\n", a, v ? v : "", RUN_MAX_BIAS);
    } else if (eng_arg_is(a, "--ignore-eos", NULL))
        o->ignore_eos = true;
    else if (eng_arg_is(a, "--no-display-prompt", NULL))
        o->display_prompt = false;
    else if (eng_arg_is(a, "-sp", "--special"))
        o->special = true;
    else if (eng_arg_is(a, "--verbose-prompt", NULL))
        o->verbose_prompt = true;
    else if (eng_arg_is(a, "-e", "--escape"))
        o->escape = true;
    else if (eng_arg_is(a, "--no-escape", NULL))
        o->escape = false;
    else if (eng_arg_is(a, "--chat", NULL) || eng_arg_is(a, "-st", "--single-turn"))
        o->chat = true;
    else if (eng_arg_is(a, "-cnv", "--conversation") || eng_arg_is(a, "-i", "--interactive"))
        o->conversation = 1;
    else if (eng_arg_is(a, "-no-cnv", "--no-conversation"))
        o->conversation = 0;
    else if (eng_arg_is(a, "-sys", "--system-prompt"))
        ok = eng_arg_str("run", argc, argv, i, &o->system_prompt);
    else if (eng_arg_is(a, "--chat-template", NULL))
        ok = eng_arg_str("run", argc, argv, i, &o->chat_template);
    else if (eng_arg_is(a, "--chat-template-file", NULL))
        return eng_arg_chat_template_file("run", argc, argv, i, &o->chat_template);
    else if (eng_arg_is(a, "-rea", "--reasoning") || eng_arg_is(a, "--chat-template-kwargs", NULL) ||
             eng_arg_is(a, "--reasoning-effort", NULL) || eng_arg_is(a, "--reasoning-budget", NULL) ||
             eng_arg_is(a, "--reasoning-budget-message", NULL))
        return run_reasoning_arg(argc, argv, i, o);
    else if ((taken = eng_arg_constraint("run", argc, argv, i, &o->cons)) != 0)
        return taken;
    else if ((taken = eng_arg_spec("run", argc, argv, i, &o->spec)) != 0)
        return taken;
    else if (eng_arg_is(a, "--prompt-cache", NULL))
        ok = eng_arg_str("run", argc, argv, i, &o->prompt_cache);
    else if (eng_arg_is(a, "--prompt-cache-ro", NULL))
        o->prompt_cache_ro = true;
    else if (eng_arg_is(a, "--prompt-cache-all", NULL))
        o->prompt_cache_all = true;
    else
        return 0;
    return ok ? 1 : -1;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
    *o = (struct run_opts){ .n_gen = -1, .conversation = -1, .thinking = -1, .display_prompt = true,
                            .escape = true, .think_budget = -1,
                            .spec = ENG_SPEC_PARAMS_DEFAULT };
    eng_session_params_init(&o->sp);
    const struct eng_common_args common = { &o->sp, &o->prompt, &o->prompt_file, true,
                                            &o->compat };
    fl_sampler_defaults(&o->samp, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int taken;
        if (eng_arg_is(a, "-h", "--help"))
            return usage(stdout);
        if ((taken = eng_arg_sampling("run", argc, argv, &i, &o->samp, &o->seed_given)) == 0 &&
            (taken = parse_own(o, argc, argv, &i)) == 0 &&
            (taken = eng_arg_common("run", argc, argv, &i, &common)) == 0) {
            fprintf(stderr, "faultline run: unknown option '%s' (see --help)\n", a);
            taken = -1;
        }
        if (taken < 0)
            return ENG_EXIT_USAGE;
    }
    if (o->chat_template && fl_chat_format_from_name(o->chat_template) == FL_CHAT_UNKNOWN) {
        fprintf(stderr, "faultline run: --chat-template %s: not a built-in format\n",
                o->chat_template);
        return ENG_EXIT_USAGE;
    }
    if (o->prompt && o->prompt_file) {
        fprintf(stderr, "faultline run: -p and -f both give the prompt: pick one\n");
        return ENG_EXIT_USAGE;
    }
    if (o->prompt_cache_all && o->prompt_cache && !o->compat.log_disable)
        fprintf(stderr, "faultline run: --prompt-cache-all: generated tokens' rows are not those "
                "a prompt's chunks give, so the file keeps the prompt's as without it\n");
    if (!o->sp.model_path) {
        fprintf(stderr, "faultline run: -m MODEL is required\n");
        return usage(stderr);
    }
    if (eng_constraint_load("run", &o->cons, NULL) ||
        (o->cons.schema && fl_schema_compile(o->cons.schema, &o->schema, NULL)))
        return ENG_EXIT_USAGE; /* (a schema eng_constraint_load checked compiles) */
    eng_args_finish("run", &common);
    if (!o->seed_given)
        o->samp.seed = (uint64_t)time(NULL);
    return -1;
}

enum fl_chat_format run_chat_format(struct eng_session *s, const struct run_opts *o)
{
    if (o->chat_template)
        return fl_chat_format_from_name(o->chat_template);
    return fl_chat_detect_file(eng_session_gguf(s));
}

struct fl_chat_opts run_chat_opts(const struct run_opts *o)
{
    return (struct fl_chat_opts){ .add_assistant = true, .no_thinking = o->thinking == 0,
                                  .reasoning_effort = o->reasoning_effort,
                                  .keep_reasoning = o->keep_reasoning == 1,
                                  .ds_thinking = o->ds_thinking,
                                  .think_mode = (enum fl_chat_think_mode)o->think_mode,
                                  .thinking_effort = o->thinking_effort };
}

int run_chat_render(const struct run_opts *o, enum fl_chat_format fmt,
                    const struct fl_chat_msg *msgs, size_t n, char **out)
{
    const struct fl_chat_opts co = run_chat_opts(o);
    return fl_chat_render(fmt, msgs, n, &co, out);
}

/* The prompt as token ids: raw, or rendered in the chat format (which
 * contains special-token texts, so those are parsed). */
static int prompt_ids(struct eng_session *s, const struct run_opts *o, const char *text,
                      size_t len, int32_t **ids)
{
    const struct fl_tokenizer *tok = eng_session_tokenizer(s);
    if (!o->chat)
        return eng_tokenize_prompt(tok, text, len, false, ids);
    enum fl_chat_format fmt = run_chat_format(s, o);
    if (fmt == FL_CHAT_UNKNOWN) {
        fprintf(stderr, "faultline run: no chat format known for this model (--chat-template)\n");
        return -EINVAL;
    }
    char *content = strndup(text, len), *rendered = NULL;
    struct fl_chat_msg msgs[2];
    size_t n_msgs = 0;
    if (o->system_prompt)
        msgs[n_msgs++] = (struct fl_chat_msg){ .role = "system", .content = o->system_prompt };
    msgs[n_msgs++] = (struct fl_chat_msg){ .role = "user", .content = content };
    int n = content ? run_chat_render(o, fmt, msgs, n_msgs, &rendered) : -ENOMEM;
    free(content);
    if (n < 0) {
        fprintf(stderr, "faultline run: cannot apply the chat format: %s\n", strerror(-n));
        return n;
    }
    n = eng_tokenize_prompt(tok, rendered, (size_t)n, true, ids);
    free(rendered);
    return n;
}

static void display(struct eng_session *s, const int32_t *ids, int n, bool special)
{
    char buf[256];
    for (int i = 0; i < n; i++) {
        int k = fl_token_to_piece(eng_session_tokenizer(s), ids[i], buf, sizeof(buf), false,
                                  special);
        if (k > 0 && (size_t)k <= sizeof(buf))
            fwrite(buf, 1, (size_t)k, stdout);
    }
    fflush(stdout);
}

/* --verbose-prompt: llama.cpp's listing of the prompt's tokens. */
static void list_prompt(struct eng_session *s, const char *text, size_t len, const int32_t *ids,
                        int n)
{
    char buf[256];
    fprintf(stderr, "faultline run: prompt: '%.*s'\n", (int)len, text);
    fprintf(stderr, "faultline run: number of tokens in prompt = %d\n", n);
    for (int i = 0; i < n; i++) {
        int k = fl_token_to_piece(eng_session_tokenizer(s), ids[i], buf, sizeof(buf), false, true);
        fprintf(stderr, "%6d -> '%.*s'\n", ids[i], k > 0 && (size_t)k <= sizeof(buf) ? k : 0, buf);
    }
}

/* One prompt, one answer. */
static int complete(struct eng_session *s, const struct run_opts *o, const char *text,
                    size_t len, struct fl_err *err)
{
    int32_t *ids = NULL;
    struct run_gen g;
    int n = prompt_ids(s, o, text, len, &ids), rc = n < 0 ? n : 0;
    if (!rc && n == 0)
        rc = fl_err_set(err, -EINVAL, len ? "the prompt tokenizes to nothing"
                                          : "no prompt, and the model adds no BOS to start "
                                            "from: -p TEXT or -f FILE (or -cnv)");
    if (!rc && n > eng_session_n_ctx(s))
        rc = fl_err_set(err, -EINVAL, "the prompt (%d tokens) is longer than the context (%d, -c)",
                        n, eng_session_n_ctx(s));
    struct run_cache cache = { .out = FL_OUT_NONE };
    if (!rc)
        rc = run_gen_init(&g, s, o, err);
    else
        memset(&g, 0, sizeof(g));
    if (!rc && o->prompt_cache) /* a file that cannot be used fails before the prompt shows */
        rc = run_cache_begin(&g, &cache, ids, n, err);
    if (!rc && o->chat)
        rc = run_gen_think(&g, run_chat_format(s, o), err);
    if (!rc && o->verbose_prompt)
        list_prompt(s, text, len, ids, n);
    if (!rc && o->display_prompt)
        display(s, ids, n, o->special);
    if (!rc)
        rc = o->prompt_cache ? run_cache_feed(&g, &cache, ids, n, err)
                             : run_gen_feed(&g, ids, n, err);
    run_cache_end(&cache);
    enum run_stop why = RUN_STOP_LIMIT;
    if (rc == -EINTR && cli_interrupted())
        rc = 0; /* Ctrl-C during the prompt: no answer; the statistics still stand */
    else if (!rc)
        rc = run_gen_answer(&g, o->n_gen, true, &why, err);
    printf("\n");
    fflush(stdout);
    if (!rc && why == RUN_STOP_CONTEXT && o->n_gen != -2 && !o->compat.log_disable)
        fprintf(stderr, "[context of %d tokens is full]\n", eng_session_n_ctx(s));
    if (!rc)
        run_gen_print_speed(&g);
    run_gen_free(&g);
    free(ids);
    return rc;
}

/* The conversation: asked for, or the default at a terminal with a format. */
static bool conversing(struct eng_session *s, const struct run_opts *o)
{
    if (o->chat || o->conversation == 0)
        return false;
    if (o->conversation == 1)
        return true;
    return isatty(STDIN_FILENO) && run_chat_format(s, o) != FL_CHAT_UNKNOWN;
}

static int run_main(struct run_opts *o, struct fl_err *err)
{
    size_t len = 0;
    char *file_text = NULL, *text = NULL;
    if (o->prompt || o->prompt_file) {
        const char *t = eng_prompt_text(o->prompt, o->prompt_file, &file_text, &len);
        if (!t)
            return 1;
        text = strndup(t, len);
        if (!text) {
            free(file_text);
            fl_err_set(err, -ENOMEM, "out of memory");
            return 1;
        }
        if (o->escape)
            len = eng_process_escapes(text);
        o->prompt = text;
    }
    struct eng_session_params sp = o->sp;
    struct eng_session *s = NULL;
    cli_interrupt_graceful();
    sp.interrupted = cli_interrupted;
    int status = 0, rc = eng_session_open(&sp, &s, err);
    if (!rc)
        eng_args_check_ctx("run", &o->sp, eng_session_model(s));
    if (!rc && conversing(s, o)) {
        rc = run_chat(s, o, err);
        status = rc > 0 ? rc : 0;
        rc = rc > 0 ? 0 : rc;
    } else if (!rc) { /* no prompt: from the BOS alone, as llama-completion does */
        rc = complete(s, o, text ? text : "", len, err);
    }
    if (!rc) /* also after Ctrl-C: generation stopped, the statistics stand */
        rc = eng_session_report(s, err);
    if (!rc && !status && cli_interrupted())
        status = cli_interrupt_status(cli_interrupted());
    free(text);
    free(file_text);
    eng_session_close(s);
    return rc ? 1 : status;
}

int cli_run(int argc, char **argv)
{
    struct run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) { /* help, or a usage mistake: what parse loaded goes */
        eng_constraint_free(&o.cons);
        fl_schema_free(o.schema);
        return rc;
    }
    struct fl_err err = { { 0 } };
    rc = run_main(&o, &err);
    fl_schema_free(o.schema);
    eng_constraint_free(&o.cons);
    if (rc == 1 && err.msg[0])
        fprintf(stderr, "faultline run: %s\n", err.msg);
    return rc;
}

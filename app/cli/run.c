/* run.c: `faultline run` — generate text from a prompt, streaming tokens to
 * stdout as they come; prompt and generation speed go to stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "text/chat.h"
#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "gguf/gguf.h"
#include "text/sampler.h"
#include "app/cli/session-flags.h"
#include "app/session.h"
#include "text/tokenizer.h"

struct run_opts {
    struct eng_session_params sp;
    struct fl_sampler_params samp;
    const char *prompt, *prompt_file;
    int n_gen;
    bool chat, seed_given;
};

static int usage(FILE *out)
{
    fprintf(out,
            "usage: faultline run -m MODEL (-p PROMPT | -f FILE) [-n 128] [-t T] [-c CTX] [-b BATCH]\n"
            "                     [--temp 0.8] [--top-k 40] [--top-p 0.95] [--min-p 0.05]\n"
            "                     [--repeat-penalty 1.0] [--repeat-last-n 64] [--presence-penalty 0]\n"
            "                     [--frequency-penalty 0] [--seed S] [--chat]\n"
            "Generates up to N tokens (stops early at end of generation or a full context).\n"
            "--temp 0 is greedy. --chat wraps the prompt in the model family's chat format.\n");
    eng_session_print_usage(out);
    return out == stdout ? 0 : 2;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
    *o = (struct run_opts){ .n_gen = 128 };
    eng_session_params_init(&o->sp);
    const struct eng_common_args common = { &o->sp, &o->prompt, &o->prompt_file, true };
    int taken;
    fl_sampler_defaults(&o->samp, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout);
        if ((taken = eng_arg_sampling("run", argc, argv, &i, &o->samp, &o->seed_given)) != 0)
            ok = taken > 0;
        else if (!strcmp(a, "-n"))
            ok = eng_arg_int("run", argc, argv, &i, 0, 1 << 24, &o->n_gen);
        else if (!strcmp(a, "--chat"))
            o->chat = true;
        else if ((taken = eng_arg_common("run", argc, argv, &i, &common)) != 0)
            ok = taken > 0;
        else {
            fprintf(stderr, "faultline run: unknown option '%s'\n", a);
            ok = false;
        }
        if (!ok)
            return 2;
    }
    if (!o->sp.model_path || !o->prompt == !o->prompt_file) {
        fprintf(stderr, "faultline run: -m and one of -p/-f are required\n");
        return usage(stderr);
    }
    if (!o->seed_given)
        o->samp.seed = (uint64_t)time(NULL);
    return -1;
}

/* The prompt as token ids: raw, or rendered in the family's chat format
 * (which contains special-token texts, so those are parsed). */
static int prompt_ids(struct eng_session *s, const char *text, size_t len, bool chat,
                      int32_t **ids)
{
    const struct fl_tokenizer *tok = eng_session_tokenizer(s);
    if (!chat)
        return eng_tokenize_prompt(tok, text, len, false, ids);
    enum fl_chat_format fmt = fl_chat_detect_file(eng_session_gguf(s));
    if (fmt == FL_CHAT_UNKNOWN) {
        fprintf(stderr, "faultline run: no chat format known for this model\n");
        return -EINVAL;
    }
    char *content = strndup(text, len), *rendered = NULL;
    const struct fl_chat_msg msg = { .role = "user", .content = content };
    int n = content ? fl_chat_apply(fmt, &msg, 1, true, &rendered) : -ENOMEM;
    free(content);
    if (n < 0) {
        fprintf(stderr, "faultline run: cannot apply the chat format: %s\n", strerror(-n));
        return n;
    }
    n = eng_tokenize_prompt(tok, rendered, (size_t)n, true, ids);
    free(rendered);
    return n;
}

static void print_piece(const struct fl_tokenizer *tok, int32_t id)
{
    char buf[256];
    int n = fl_token_to_piece(tok, id, buf, sizeof(buf), false, false);
    if (n > 0 && (size_t)n <= sizeof(buf))
        fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
}

/* Prompt, then sample/feed until n_gen tokens, end of generation or a full
 * context. Reports speeds on stderr. */
static int generate(struct eng_session *s, const struct run_opts *o, const int32_t *ids, int n,
                    struct fl_err *err)
{
    const struct fl_tokenizer *tok = eng_session_tokenizer(s);
    const int nv = (int)eng_session_model(s)->hp.n_vocab;
    struct fl_sampler *smp = NULL;
    float *logits = malloc(sizeof(float) * (size_t)nv);
    int rc = logits ? fl_sampler_new(&o->samp, nv, &smp) : -ENOMEM;
    if (rc)
        return fl_err_set(err, rc, "cannot set up the sampler: %s", strerror(-rc));
    for (int i = 0; i < n; i++)
        fl_sampler_accept(smp, ids[i]);
    double t0 = fl_clock_s();
    rc = eng_session_eval(s, ids, n, false, logits, err);
    double t1 = fl_clock_s(), t2 = t1;
    int made = 0;
    while (!rc && made < o->n_gen) {
        int32_t id = fl_sampler_sample(smp, logits);
        if (id < 0) {
            rc = fl_err_set(err, -EINVAL, "the logits are not finite");
            break;
        }
        if (fl_token_is_eog(tok, id))
            break;
        fl_sampler_accept(smp, id);
        print_piece(tok, id);
        made++;
        if (made == o->n_gen)
            break;
        if (eng_session_n_past(s) >= eng_session_n_ctx(s)) {
            fprintf(stderr, "\n[context of %d tokens is full]\n", eng_session_n_ctx(s));
            break;
        }
        rc = eng_session_eval(s, &id, 1, false, logits, err);
        t2 = fl_clock_s();
    }
    printf("\n");
    fflush(stdout);
    if (!rc)
        fprintf(stderr, "prompt: %d tokens in %.3f s (%.2f t/s); generation: %d tokens in %.3f s (%.2f t/s)\n",
                n, t1 - t0, n / (t1 - t0), made, t2 - t1, made > 1 ? (made - 1) / (t2 - t1) : 0.0);
    fl_sampler_free(smp);
    free(logits);
    return rc;
}

static int run_main(const struct run_opts *o, struct fl_err *err)
{
    size_t len = 0;
    char *file_text;
    const char *text = eng_prompt_text(o->prompt, o->prompt_file, &file_text, &len);
    if (!text)
        return 1;
    struct eng_session_params sp = o->sp;
    struct eng_session *s = NULL;
    int32_t *ids = NULL;
    int n = 0, rc = len ? 0 : fl_err_set(err, -EINVAL, "the prompt is empty");
    if (!rc)
        rc = eng_session_open(&sp, &s, err);
    if (!rc && (n = prompt_ids(s, text, len, o->chat, &ids)) < 0)
        rc = n;
    if (!rc && n == 0)
        rc = fl_err_set(err, -EINVAL, "the prompt tokenizes to nothing");
    if (!rc && n > eng_session_n_ctx(s))
        rc = fl_err_set(err, -EINVAL, "the prompt (%d tokens) is longer than the context (%d, -c)",
                        n, eng_session_n_ctx(s));
    if (!rc)
        rc = generate(s, o, ids, n, err);
    if (!rc)
        rc = eng_session_report(s, err);
    free(ids);
    free(file_text);
    eng_session_close(s);
    return rc ? 1 : 0;
}

int cli_run(int argc, char **argv)
{
    struct run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct fl_err err = { { 0 } };
    rc = run_main(&o, &err);
    if (rc && err.msg[0])
        fprintf(stderr, "faultline run: %s\n", err.msg);
    return rc;
}

/* engine-args.c: option parsing shared by run, eval and bench. */
#include "app/cli/engine-args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/session-flags.h"
#include "app/session.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "base/whole-file.h"

bool eng_arg_str(const char *cmd, int argc, char **argv, int *i, const char **out)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "faultline %s: option %s needs a value\n", cmd, argv[*i]);
        return false;
    }
    *out = argv[++*i];
    return true;
}

bool eng_arg_int(const char *cmd, int argc, char **argv, int *i, long lo, long hi, int *out)
{
    const char *s;
    if (!eng_arg_str(cmd, argc, argv, i, &s))
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "faultline %s: %s wants an integer in [%ld, %ld], not '%s'\n", cmd,
                argv[*i - 1], lo, hi, s);
        return false;
    }
    *out = (int)v;
    return true;
}

bool eng_arg_float(const char *cmd, int argc, char **argv, int *i, double lo, double hi,
                   float *out)
{
    const char *s;
    if (!eng_arg_str(cmd, argc, argv, i, &s))
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "faultline %s: %s wants a number in [%g, %g], not '%s'\n", cmd,
                argv[*i - 1], lo, hi, s);
        return false;
    }
    *out = (float)v;
    return true;
}

char *eng_read_file(const char *path, size_t *len)
{
    char *buf;
    int rc = fl_read_whole_file(path, (size_t)1 << 30, &buf, len);
    if (rc) {
        fprintf(stderr, "faultline: %s: %s\n", path,
                rc == -EFBIG ? "larger than 1 GiB" : strerror(-rc));
        return NULL;
    }
    return buf;
}

const char *eng_prompt_text(const char *prompt, const char *prompt_file, char **file_text,
                            size_t *len)
{
    *file_text = NULL;
    if (!prompt_file) {
        *len = strlen(prompt);
        return prompt;
    }
    *file_text = eng_read_file(prompt_file, len);
    return *file_text;
}

int eng_tokenize_prompt(const struct fl_tokenizer *tok, const char *text, size_t len,
                        bool parse_special, int32_t **out)
{
    int n = fl_tokenize_alloc(tok, text, len, true, parse_special, out);
    if (n < 0)
        fprintf(stderr, "faultline: cannot tokenize the prompt: %s\n", strerror(-n));
    return n;
}

int eng_arg_session(const char *cmd, int argc, char **argv, int *i,
                    struct eng_session_params *sp)
{
    struct fl_err err = { { 0 } };
    int rc = eng_session_parse_flag(sp, argc, argv, i, &err);
    if (rc < 0) {
        fprintf(stderr, "faultline %s: %s\n", cmd, err.msg);
        return -1;
    }
    return rc;
}

int eng_arg_common(const char *cmd, int argc, char **argv, int *i,
                   const struct eng_common_args *t)
{
    const char *a = argv[*i];
    struct eng_session_params *sp = t->sp;
    bool ok;
    if (!strcmp(a, "-m"))
        ok = eng_arg_str(cmd, argc, argv, i, &sp->model_path);
    else if (t->prompt && !strcmp(a, "-p"))
        ok = eng_arg_str(cmd, argc, argv, i, t->prompt);
    else if (t->prompt_file && !strcmp(a, "-f"))
        ok = eng_arg_str(cmd, argc, argv, i, t->prompt_file);
    else if (!strcmp(a, "-t"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1024, &sp->n_threads);
    else if (t->with_ctx && !strcmp(a, "-c"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1 << 24, &sp->n_ctx);
    else if (!strcmp(a, "-b"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1 << 20, &sp->n_batch);
    else
        return eng_arg_session(cmd, argc, argv, i, sp);
    return ok ? 1 : -1;
}

int eng_arg_sampling(const char *cmd, int argc, char **argv, int *i, struct fl_sampler_params *s,
                     bool *seed_given)
{
    const char *a = argv[*i];
    int seed;
    bool ok;
    if (!strcmp(a, "--temp"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->temperature);
    else if (!strcmp(a, "--top-k"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, 1 << 30, &s->top_k);
    else if (!strcmp(a, "--top-p"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1, &s->top_p);
    else if (!strcmp(a, "--min-p"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1, &s->min_p);
    else if (!strcmp(a, "--repeat-penalty"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->repeat_penalty);
    else if (!strcmp(a, "--repeat-last-n"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, 1 << 20, &s->penalty_last_n);
    else if (!strcmp(a, "--presence-penalty"))
        ok = eng_arg_float(cmd, argc, argv, i, -2, 2, &s->presence_penalty);
    else if (!strcmp(a, "--frequency-penalty"))
        ok = eng_arg_float(cmd, argc, argv, i, -2, 2, &s->frequency_penalty);
    else if (!strcmp(a, "--seed")) {
        ok = eng_arg_int(cmd, argc, argv, i, 0, 0x7fffffff, &seed);
        s->seed = (uint64_t)seed;
        *seed_given = true;
    } else
        return 0;
    return ok ? 1 : -1;
}

int eng_arg_requests(const char *cmd, int argc, char **argv, int *i,
                     const struct eng_request_args *t)
{
    const char *a = argv[*i];
    bool ok;
    if (!strcmp(a, "-np") || !strcmp(a, "--parallel"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, ENG_SESSION_MAX_SEQ, &t->sp->n_seq);
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        ok = eng_arg_int(cmd, argc, argv, i, -1, 1 << 24, t->max_tokens);
        if (ok && *t->max_tokens == 0) {
            fprintf(stderr, "faultline %s: -n 0 makes nothing (-1: up to the context)\n", cmd);
            ok = false;
        }
    } else if (!strcmp(a, "--chat-template"))
        ok = eng_arg_str(cmd, argc, argv, i, t->chat_template);
    else
        return eng_arg_sampling(cmd, argc, argv, i, t->samp, t->seed_given);
    return ok ? 1 : -1;
}

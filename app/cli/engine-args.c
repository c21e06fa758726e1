/* engine-args.c: option parsing shared by run, eval and bench. */
#include "app/cli/engine-args.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/cli/progress.h"
#include "app/cli/session-flags.h"
#include "api/openai.h"
#include "app/session.h"
#include "app/scheduler.h"
#include "app/speculate.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "base/json.h"
#include "base/whole-file.h"
#include "text/json-schema.h"

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
    if (!strcmp(path, "-"))
        path = "/dev/stdin"; /* llama.cpp's -f - */
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

bool eng_arg_is(const char *a, const char *short_form, const char *long_form)
{
    return (short_form && !strcmp(a, short_form)) || (long_form && !strcmp(a, long_form));
}


static bool arg_flash_attn(const char *cmd, int argc, char **argv, int *i, const char **out)
{
    static const char *const ok[] = { "on", "off", "auto", "1", "0", "true", "false" };
    if (!eng_arg_str(cmd, argc, argv, i, out))
        return false;
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++)
        if (!strcmp(*out, ok[k]))
            return true;
    fprintf(stderr, "faultline %s: %s wants on, off or auto, not '%s'\n", cmd, argv[*i - 1], *out);
    return false;
}

#define DRAFT_CPU_WHY "the draft model (-md) runs on the CPU with its weights as the default " \
                      "placement puts them (in RAM when they fit)"
#define DRAFT_REMOVED_WHY "removed in llama.cpp: --spec-draft-n-max and --spec-draft-n-min"

/* llama.cpp flags for what faultline does not do, each refused with why. */
static int arg_refused(const char *cmd, const char *a)
{
    static const struct { const char *flag, *why; } refused[] = {
        { "-ts", "faultline runs on one GPU: no tensor split across devices" },
        { "--tensor-split", "faultline runs on one GPU: no tensor split across devices" },
        { "-sm", "faultline runs on one GPU: no split mode" },
        { "--split-mode", "faultline runs on one GPU: no split mode" },
        { "-mg", "faultline runs on one GPU (the first CUDA device; CUDA_VISIBLE_DEVICES picks it)" },
        { "--main-gpu", "faultline runs on one GPU (the first CUDA device; CUDA_VISIBLE_DEVICES picks it)" },
        { "-dev", "faultline runs on one GPU (the first CUDA device; CUDA_VISIBLE_DEVICES picks it)" },
        { "--device", "faultline runs on one GPU (the first CUDA device; CUDA_VISIBLE_DEVICES picks it)" },
        { "--list-devices", "`faultline version` names the CPU features; `inspect MODEL --plan --verbose` "
                            "shows where each tensor goes (gpu when a device is found)" },
        { "-hf", "faultline reads local GGUF files only: download the file and pass -m FILE" },
        { "--hf-repo", "faultline reads local GGUF files only: download the file and pass -m FILE" },
        { "--in-prefix", "raw interactive mode is not supported; -cnv renders turns in the chat format" },
        { "--in-suffix", "raw interactive mode is not supported; -cnv renders turns in the chat format" },
        { "--lora", "LoRA adapters are not supported" },
        { "--mmproj", "multimodal projectors are not supported" },
        { "--ctx-shift", "a full context ends the generation; there is no context shift" },
        { "-nocb", "continuous batching is how the scheduler runs; it cannot be turned off" },
        { "--no-cont-batching", "continuous batching is how the scheduler runs; it cannot be turned off" },
        { "--draft", DRAFT_REMOVED_WHY },
        { "--draft-n", DRAFT_REMOVED_WHY },
        { "--draft-max", DRAFT_REMOVED_WHY },
        { "--draft-min", DRAFT_REMOVED_WHY },
        { "--draft-n-min", DRAFT_REMOVED_WHY },
        { "-ngld", DRAFT_CPU_WHY },
        { "--gpu-layers-draft", DRAFT_CPU_WHY },
        { "--n-gpu-layers-draft", DRAFT_CPU_WHY },
        { "--spec-draft-ngl", DRAFT_CPU_WHY },
        { "-devd", DRAFT_CPU_WHY },
        { "--device-draft", DRAFT_CPU_WHY },
        { "--spec-draft-device", DRAFT_CPU_WHY },
        { "-otd", DRAFT_CPU_WHY },
        { "--override-tensor-draft", DRAFT_CPU_WHY },
        { "--spec-draft-override-tensor", DRAFT_CPU_WHY },
        { "-cmoed", DRAFT_CPU_WHY },
        { "--cpu-moe-draft", DRAFT_CPU_WHY },
        { "--spec-draft-cpu-moe", DRAFT_CPU_WHY },
        { "-ncmoed", DRAFT_CPU_WHY },
        { "--n-cpu-moe-draft", DRAFT_CPU_WHY },
        { "--spec-draft-n-cpu-moe", DRAFT_CPU_WHY },
        { "--spec-draft-ncmoe", DRAFT_CPU_WHY },
        { "--spec-draft-p-split", "draft-simple drafts one line of tokens here (no draft trees)" },
        { "--draft-p-split", "draft-simple drafts one line of tokens here (no draft trees)" },
        { "-hfd", "faultline reads local GGUF files only: download the draft model and pass -md FILE" },
        { "--spec-draft-hf", "faultline reads local GGUF files only: download the draft model and "
                             "pass -md FILE" },
        { "--spec-default", "ngram-mod is not built: --spec-type ngram-simple (serve, batch, run) "
                            "drafts from the sequence itself" },
        { "--log-file", "faultline's lines go to standard error: redirect it (2> FILE)" },
        { "-sp", "special tokens' text is not part of an answer here (`faultline run -sp` "
                 "prints it)" },
        { "--special", "special tokens' text is not part of an answer here (`faultline run -sp` "
                       "prints it)" },
        { "--verbose-prompt", "`faultline run --verbose-prompt` or `faultline tokenize` list a "
                              "prompt's tokens" },
        { "--lora-init-without-apply", "LoRA adapters are not supported" },
        { "--ssl-key-file", "no TLS: put a reverse proxy (nginx, caddy) in front for HTTPS" },
        { "--ssl-cert-file", "no TLS: put a reverse proxy (nginx, caddy) in front for HTTPS" },
    };
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
        if (!strcmp(a, refused[k].flag)) {
            fprintf(stderr, "faultline %s: %s: %s\n", cmd, a, refused[k].why);
            return -1;
        }
    return 0;
}

/* llama-server switches whose meaning holds here already (or that have
 * nothing to do): taken, with a note at the end. */
static const struct {
    const char *flag, *alias;
    bool value; /* takes a value (ignored) */
    const char *note;
} noted[] = {
    { "-cb", "--cont-batching", false, "continuous batching is always on" },
    { "-kvu", "--kv-unified", false, "the KV cache is always one pool of cells the sequences share" },
    { "--no-context-shift", NULL, false, NULL }, /* so it is: no note */
    { "--metrics", NULL, false, "`faultline serve` always answers GET /metrics" },
    { "--embedding", "--embeddings", false, "embeddings are always served (/v1/embeddings, "
      "/embedding, batch lines) beside completions" },
    { "--slots", "--no-slots", false, "GET /slots is `faultline serve`'s (it takes --no-slots)" },
    { "--props", NULL, false, "GET /props is always served; POST /props (changing the settings) is not" },
    { "--no-webui", NULL, false, NULL }, /* there is none */
    { "--threads-http", NULL, true, "each connection has its own thread; the value is not used" },
    { "--cache-reuse", NULL, true, "the prompt cache reuses a common prefix's whole -b chunks, bit for bit; "
      "chunks are not shifted (the value is not used)" },
    { "-cram", "--cache-ram", true, "held prompt prefixes live in the KV cache's own cells (no "
      "separate host cache to size; the value is not used)" },
    { "-ctxcp", "--ctx-checkpoints", true, "a recurrent model's held prefix keeps one snapshot of its "
      "state (the value is not used)" },
    { "-sps", "--slot-prompt-similarity", true, "a request reads the held prefix that shares its "
      "longest start (the value is not used)" },
    { "--no-warmup", NULL, false, "faultline runs no warm-up pass at start" },
    { "--mmap", NULL, false, "the pager maps the whole file always" },
    { "-dio", "--direct-io", false, "paged experts are read with O_DIRECT already" },
    { "--swa-full", NULL, false, "a cell holds every layer, so sliding-window layers keep every "
      "position already" },
    { "-fit", "--fit", true, "placement fits the RAM and VRAM budgets itself (--ram-budget and "
      "--vram-budget auto; the value is not used)" },
    { "-dt", "--defrag-thold", true, "the KV cache is blocks of cells: nothing to defragment" },
    { "--keep", NULL, true, "a full context ends the generation (no context shift): nothing to keep" },
    { "--offline", NULL, false, NULL }, /* faultline never downloads */
    { "--no-jinja", NULL, false, NULL }, /* the built-in chat formats are always used */
    { "--perf", NULL, false, NULL }, /* the speed line is always printed */
    { "--no-perf", NULL, false, "the speed line stays (--log-disable hides it)" },
    { "--log-colors", NULL, true, NULL }, /* faultline's lines have no colours */
    { "--simple-io", NULL, false, NULL }, /* faultline's output is plain already */
    { "-lv", "--verbosity", true, "faultline has one more level of detail: -v" },
    { "--poll", NULL, true, "threads spin briefly, then sleep on a futex (the value is not used)" },
    { "-C", "--cpu-mask", true, "not applied: run faultline under taskset (-t sets the threads)" },
    { "--cpu-strict", NULL, true, "not applied: run faultline under taskset" },
    { "--prio", NULL, true, "not applied: run faultline under nice / chrt" },
};

_Static_assert(sizeof(noted) / sizeof(noted[0]) <= 64, "eng_compat.noted has a bit per entry");

/* A noted flag: 1 taken (its value skipped), 0 not one, -1 its value missing. */
static int arg_noted(const char *cmd, int argc, char **argv, int *i, struct eng_compat *c)
{
    for (size_t k = 0; k < sizeof(noted) / sizeof(noted[0]); k++)
        if (eng_arg_is(argv[*i], noted[k].flag, noted[k].alias)) {
            const char *v;
            if (noted[k].value && !eng_arg_str(cmd, argc, argv, i, &v))
                return -1;
            c->noted |= (uint64_t)1 << k;
            return 1;
        }
    return 0;
}

/* The flags of struct eng_compat. 1 taken, 0 not one, -1 bad value. */
static int arg_compat(const char *cmd, int argc, char **argv, int *i, struct eng_compat *c)
{
    const char *a = argv[*i];
    bool ok = true;
    int taken;
    if (eng_arg_is(a, "-b", "--batch-size"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1 << 20, &c->batch);
    else if (eng_arg_is(a, "-ub", "--ubatch-size"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1 << 20, &c->ubatch);
    else if (eng_arg_is(a, "-tb", "--threads-batch"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1024, &c->threads_batch);
    else if (eng_arg_is(a, "-fa", "--flash-attn"))
        ok = arg_flash_attn(cmd, argc, argv, i, &c->flash_attn);
    else if (eng_arg_is(a, "--mlock", NULL))
        c->mlock = true;
    else if (eng_arg_is(a, "--no-mmap", NULL))
        c->no_mmap = true;
    else if (eng_arg_is(a, "--log-disable", NULL))
        c->log_disable = true;
    else if (eng_arg_is(a, "--jinja", NULL))
        c->jinja = true;
    else if ((taken = arg_noted(cmd, argc, argv, i, c)) != 0)
        return taken;
    else
        return arg_refused(cmd, a);
    return ok ? 1 : -1;
}

int eng_arg_common(const char *cmd, int argc, char **argv, int *i,
                   const struct eng_common_args *t)
{
    const char *a = argv[*i];
    struct eng_session_params *sp = t->sp;
    bool ok;
    int taken;
    if (t->compat && (taken = arg_compat(cmd, argc, argv, i, t->compat)) != 0)
        return taken;
    if (eng_arg_is(a, "-m", "--model")) {
        const char *first = sp->model_path;
        ok = eng_arg_str(cmd, argc, argv, i, &sp->model_path);
        if (ok && first) {
            fprintf(stderr, "faultline %s: -m given twice ('%s', '%s'): one model per run\n", cmd,
                    first, sp->model_path);
            ok = false;
        }
    }
    else if (t->prompt && eng_arg_is(a, "-p", "--prompt"))
        ok = eng_arg_str(cmd, argc, argv, i, t->prompt);
    else if (t->prompt_file && eng_arg_is(a, "-f", "--file"))
        ok = eng_arg_str(cmd, argc, argv, i, t->prompt_file);
    else if (eng_arg_is(a, "-t", "--threads"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1024, &sp->n_threads);
    else if (t->with_ctx && eng_arg_is(a, "-c", "--ctx-size"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, ENG_SESSION_MAX_CTX, &sp->n_ctx);
    else if (eng_arg_is(a, "-b", "--batch-size") || eng_arg_is(a, "-ub", "--ubatch-size"))
        ok = eng_arg_int(cmd, argc, argv, i, 1, 1 << 20, &sp->n_batch);
    else if (eng_arg_is(a, "-v", NULL))
        sp->placement.verbose = ok = true;
    else
        return eng_arg_session(cmd, argc, argv, i, sp);
    return ok ? 1 : -1;
}

static int cpus_usable(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int eng_args_finish(const char *cmd, const struct eng_common_args *t)
{
    struct eng_session_params *sp = t->sp;
    const struct eng_compat *c = t->compat;
    sp->progress = cli_progress_stderr(c && c->log_disable);
    const int cpus = cpus_usable();
    if (sp->n_threads > cpus)
        fprintf(stderr, "faultline %s: warning: -t %d is more threads than the %d CPUs this "
                "process may use (slower, not faster)\n", cmd, sp->n_threads, cpus);
    if (!c)
        return 0;
    /* llama.cpp: a forward call takes min(n_batch, n_ubatch) tokens;
     * defaults 2048 and 512 */
    const int b = c->batch ? c->batch : 2048, ub = c->ubatch ? c->ubatch : 512;
    sp->n_batch = b < ub ? b : ub;
    if (c->log_disable)
        return 0;
    if (c->threads_batch && c->threads_batch != sp->n_threads)
        fprintf(stderr, "faultline %s: -tb %d: one pool of -t threads runs prompts and "
                "generation alike; -tb is ignored\n", cmd, c->threads_batch);
    if (c->mlock)
        fprintf(stderr, "faultline %s: --mlock: nothing to lock from the file cache: the weights "
                "live in memory the pager owns (RAM tier read up front, experts paged under "
                "--ram-budget); faultline does not lock them, so with swap on they can be swapped\n",
                cmd);
    if (c->no_mmap)
        fprintf(stderr, "faultline %s: --no-mmap: already so: faultline never maps the file; it "
                "reads the RAM tier up front and experts with O_DIRECT\n", cmd);
    if (c->jinja)
        fprintf(stderr, "faultline %s: --jinja: no Jinja engine here; chat turns are rendered in "
                "the built-in format the model's template names (--chat-template NAME for another)\n",
                cmd);
    for (size_t k = 0; k < sizeof(noted) / sizeof(noted[0]); k++)
        if (c->noted >> k & 1 && noted[k].note)
            fprintf(stderr, "faultline %s: %s: %s\n", cmd, noted[k].flag, noted[k].note);
    if (c->flash_attn && sp->placement.verbose)
        fprintf(stderr, "faultline %s: -fa %s: attention is exact either way (one fused pass "
                "with the softmax in float); the flag changes nothing\n", cmd, c->flash_attn);
    return 0;
}

void eng_args_check_ctx(const char *cmd, const struct eng_session_params *sp,
                        const struct eng_model *m)
{
    const int64_t trained = m->hp.n_ctx_train;
    const struct yarn_params *r = &m->hp.rope.p;
    /* the run's rope flags stretch the original context 1/freq_scale
     * times (Qwen3's --rope-scale 4 --yarn-orig-ctx 32768: 131072) */
    const bool stretched = (sp->rope.set || sp->rope.scaling) && r->n_dims > 0 &&
                           r->freq_scale < 1.0f && sp->n_ctx <= r->n_ctx_orig / r->freq_scale;
    if ((sp->rope.set || sp->rope.scaling) && r->n_dims > 0 && sp->placement.verbose)
        fprintf(stderr, "faultline %s: rope: base %g, scale %g, %s (original context %d)\n", cmd,
                r->freq_base, r->freq_scale, r->ext_factor != 0.0f ? "YaRN" : "no YaRN",
                r->n_ctx_orig);
    if (sp->n_ctx > 0 && trained > 0 && sp->n_ctx > trained && !stretched)
        fprintf(stderr, "faultline %s: warning: the model was trained on only %lld context "
                "tokens (%d asked with -c)\n", cmd, (long long)trained, sp->n_ctx);
}

size_t eng_process_escapes(char *s)
{
    size_t in = 0, out = 0, len = strlen(s);
    static const char from[] = "nrt'\"\\", to[] = "\n\r\t'\"\\";
    for (; in < len; in++) {
        const char *k;
        if (s[in] != '\\' || in + 1 >= len) {
            s[out++] = s[in];
        } else if ((k = strchr(from, s[in + 1])) != NULL) {
            s[out++] = to[k - from];
            in++;
        } else if (s[in + 1] == 'x' && in + 3 < len && isxdigit((unsigned char)s[in + 2]) &&
                   isxdigit((unsigned char)s[in + 3])) {
            const char hex[3] = { s[in + 2], s[in + 3], 0 };
            s[out++] = (char)strtol(hex, NULL, 16);
            in += 3;
        } else {
            s[out++] = s[in]; /* the backslash; the next character follows as typed */
        }
    }
    s[out] = '\0';
    return out;
}

/* --samplers "a;b;c" or --sampling-seq letters (text/sampler.h). */
static bool arg_sampler_order(const char *cmd, int argc, char **argv, int *i,
                              struct fl_sampler_params *s)
{
    const char *v;
    struct fl_err err = { { 0 } };
    if (!eng_arg_str(cmd, argc, argv, i, &v))
        return false;
    int rc = !strcmp(argv[*i - 1], "--samplers") ? fl_sampler_parse_order(v, s, &err)
                                                  : fl_sampler_parse_seq(v, s, &err);
    if (rc)
        fprintf(stderr, "faultline %s: %s: %s\n", cmd, argv[*i - 1], err.msg);
    return rc == 0;
}

/* --dry-sequence-breaker STRING: the first one given replaces llama.cpp's
 * defaults, "none" clears them all; escapes such as \n are processed as
 * llama.cpp does (its --escape is on by default). */
static bool arg_dry_breaker(const char *cmd, int argc, char **argv, int *i,
                            struct fl_sampler_params *s)
{
    const char *v;
    if (!eng_arg_str(cmd, argc, argv, i, &v))
        return false;
    /* breakers that are no earlier flag's value are the defaults */
    bool given = false;
    for (int j = 0; j < *i && s->n_dry_breakers > 0; j++)
        given |= argv[j] == s->dry_breakers[0];
    if (!given || !strcmp(v, "none"))
        s->n_dry_breakers = 0;
    if (!strcmp(v, "none"))
        return true;
    if (s->n_dry_breakers == FL_DRY_MAX_BREAKERS) {
        fprintf(stderr, "faultline %s: --dry-sequence-breaker: at most %d\n", cmd,
                FL_DRY_MAX_BREAKERS);
        return false;
    }
    eng_process_escapes(argv[*i]);
    if (!*argv[*i]) {
        fprintf(stderr, "faultline %s: --dry-sequence-breaker: an empty breaker\n", cmd);
        return false;
    }
    s->dry_breakers[s->n_dry_breakers++] = argv[*i];
    return true;
}

/* DRY, top-n-sigma, XTC, dynamic temperature and mirostat (llama.cpp's
 * flags and ranges). 1 taken, 0 not one of them, -1 a bad value. */
static int arg_sampler_more(const char *cmd, int argc, char **argv, int *i,
                            struct fl_sampler_params *s)
{
    const char *a = argv[*i];
    float base;
    bool ok;
    if (!strcmp(a, "--dry-multiplier"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1e6, &s->dry_multiplier);
    else if (!strcmp(a, "--dry-base")) {
        /* llama.cpp keeps its default for a base below 1 */
        ok = eng_arg_float(cmd, argc, argv, i, -1e6, 1e6, &base);
        s->dry_base = ok && base >= 1.0f ? base : s->dry_base;
    } else if (!strcmp(a, "--dry-allowed-length"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, 1 << 20, &s->dry_allowed_length);
    else if (!strcmp(a, "--dry-penalty-last-n"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, 1 << 20, &s->dry_penalty_last_n);
    else if (!strcmp(a, "--dry-sequence-breaker"))
        ok = arg_dry_breaker(cmd, argc, argv, i, s);
    else if (!strcmp(a, "--top-nsigma") || !strcmp(a, "--top-n-sigma"))
        ok = eng_arg_float(cmd, argc, argv, i, -1e6, 1e6, &s->top_n_sigma);
    else if (!strcmp(a, "--xtc-probability"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1, &s->xtc_probability);
    else if (!strcmp(a, "--xtc-threshold"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1, &s->xtc_threshold);
    else if (!strcmp(a, "--dynatemp-range"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->dynatemp_range);
    else if (!strcmp(a, "--dynatemp-exp"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->dynatemp_exponent);
    else if (!strcmp(a, "--mirostat"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, 2, &s->mirostat);
    else if (!strcmp(a, "--mirostat-lr"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->mirostat_eta);
    else if (!strcmp(a, "--mirostat-ent"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->mirostat_tau);
    else
        return 0;
    return ok ? 1 : -1;
}

int eng_arg_sampling(const char *cmd, int argc, char **argv, int *i, struct fl_sampler_params *s,
                     bool *seed_given)
{
    const char *a = argv[*i];
    int seed;
    bool ok;
    if (eng_arg_is(a, "--temp", "--temperature"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->temperature);
    else if (!strcmp(a, "--top-k"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, 1 << 30, &s->top_k);
    else if (!strcmp(a, "--top-p"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1, &s->top_p);
    else if (!strcmp(a, "--min-p"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1, &s->min_p);
    else if (eng_arg_is(a, "--typical", "--typical-p"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 1, &s->typical_p);
    else if (!strcmp(a, "--min-keep"))
        ok = eng_arg_int(cmd, argc, argv, i, 0, 1 << 20, &s->min_keep);
    else if (!strcmp(a, "--samplers") || !strcmp(a, "--sampling-seq") ||
             !strcmp(a, "--sampler-seq"))
        ok = arg_sampler_order(cmd, argc, argv, i, s);
    else if (!strcmp(a, "--repeat-penalty"))
        ok = eng_arg_float(cmd, argc, argv, i, 0, 100, &s->repeat_penalty);
    else if (!strcmp(a, "--repeat-last-n")) {
        ok = eng_arg_int(cmd, argc, argv, i, -1, 1 << 20, &s->penalty_last_n);
        if (s->penalty_last_n < 0)
            s->penalty_last_n = 1 << 20; /* llama.cpp's -1: the whole context */
    } else if (!strcmp(a, "--presence-penalty"))
        ok = eng_arg_float(cmd, argc, argv, i, -2, 2, &s->presence_penalty);
    else if (!strcmp(a, "--frequency-penalty"))
        ok = eng_arg_float(cmd, argc, argv, i, -2, 2, &s->frequency_penalty);
    else if (eng_arg_is(a, "-s", "--seed")) {
        /* llama.cpp: any 32-bit value, -1 (or 4294967295) = a random seed */
        ok = eng_arg_int(cmd, argc, argv, i, -1, 0x7fffffff, &seed);
        s->seed = (uint64_t)(seed < 0 ? 0 : seed);
        *seed_given = seed >= 0;
    } else
        return arg_sampler_more(cmd, argc, argv, i, s);
    return ok ? 1 : -1;
}

/* llama.cpp's words for on, off and auto: 1, 0, -1; -2 for another. */
static int on_off_auto(const char *v)
{
    static const char *const on[] = { "on", "enabled", "true", "1" };
    static const char *const off[] = { "off", "disabled", "false", "0" };
    for (size_t k = 0; k < 4; k++) {
        if (!strcmp(v, on[k]))
            return 1;
        if (!strcmp(v, off[k]))
            return 0;
    }
    return !strcmp(v, "auto") || !strcmp(v, "-1") ? -1 : -2;
}

/* --chat-template-kwargs JSON: an object; the built-in templates read its
 * enable_thinking, thinking and clear_thinking (booleans), thinking_mode
 * (MiniMax-M3's word), thinking_effort (Kimi K3's) and reasoning_effort (a
 * word, kept in a buffer of its own: the flags are read once), the rest is
 * for Jinja templates. */
static bool template_kwargs(const char *cmd, const char *v, struct api_reasoning_defaults *r)
{
    static char effort[64];
    json_t *o = json_loads(v, JSON_REJECT_DUPLICATES, NULL);
    const json_t *t = json_object_get(o, "enable_thinking");
    const json_t *e = json_object_get(o, "reasoning_effort");
    const json_t *c = json_object_get(o, "clear_thinking"), *ds = json_object_get(o, "thinking");
    const json_t *m = json_object_get(o, "thinking_mode");
    const json_t *k3 = json_object_get(o, "thinking_effort");
    const int mode = m ? fl_chat_think_mode_from_name(json_string_value(m)) : 0;
    const bool ok = json_is_object(o) && (!t || json_is_boolean(t)) && (!c || json_is_boolean(c)) &&
                    (!ds || json_is_boolean(ds)) && mode >= 0 &&
                    (!k3 || api_thinking_effort_ok(json_string_value(k3))) &&
                    (!e || (json_is_string(e) && json_string_length(e) < sizeof(effort)));
    if (!ok)
        fprintf(stderr, "faultline %s: --chat-template-kwargs wants a JSON object (its "
                "\"enable_thinking\", \"thinking\" and \"clear_thinking\" booleans, "
                "\"reasoning_effort\" a word, \"thinking_mode\" enabled, disabled or adaptive, "
                "\"thinking_effort\" low, high or max), not '%s'\n", cmd, v);
    if (ok && t)
        r->thinking = json_is_true(t);
    if (ok && c)
        r->keep_reasoning = json_is_false(c);
    if (ok && ds)
        r->ds_thinking = json_is_true(ds) ? 1 : -1;
    if (ok && m)
        r->think_mode = mode;
    if (ok && k3) /* one of three constant words */
        r->thinking_effort = !strcmp(json_string_value(k3), "low")    ? "low"
                             : !strcmp(json_string_value(k3), "high") ? "high" : "max";
    if (ok && e)
        r->effort = strcpy(effort, json_string_value(e));
    json_decref(o);
    return ok;
}

int eng_arg_reasoning(const char *cmd, int argc, char **argv, int *i,
                      struct api_reasoning_defaults *r)
{
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--reasoning-budget"))
        return eng_arg_int(cmd, argc, argv, i, -1, INT32_MAX, &r->budget) ? 1 : -1;
    if (!strcmp(a, "--reasoning-budget-message"))
        return eng_arg_str(cmd, argc, argv, i, &r->budget_message) ? 1 : -1;
    if (!strcmp(a, "--reasoning-effort")) { /* "default": the template's */
        if (!eng_arg_str(cmd, argc, argv, i, &r->effort))
            return -1;
        r->effort = strcmp(r->effort, "default") ? r->effort : NULL;
        return 1;
    }
    if (strcmp(a, "--reasoning-format") && strcmp(a, "-rea") && strcmp(a, "--reasoning") &&
        strcmp(a, "--chat-template-kwargs"))
        return 0;
    if (!eng_arg_str(cmd, argc, argv, i, &v))
        return -1;
    if (!strcmp(a, "--chat-template-kwargs"))
        return template_kwargs(cmd, v, r) ? 1 : -1;
    if (!strcmp(a, "--reasoning-format")) {
        const int f = api_reasoning_format_from_name(v);
        if (f < 0) {
            fprintf(stderr, "faultline %s: --reasoning-format is auto, deepseek, none or "
                    "deepseek-legacy, not '%s'\n", cmd, v);
            return -1;
        }
        r->format = (enum api_reasoning_format)f;
        return 1;
    }
    const int t = on_off_auto(v);
    if (t < -1) {
        fprintf(stderr, "faultline %s: %s is on, off or auto, not '%s'\n", cmd, a, v);
        return -1;
    }
    r->thinking = t;
    return 1;
}

int eng_arg_requests(const char *cmd, int argc, char **argv, int *i,
                     const struct eng_request_args *t)
{
    const char *a = argv[*i];
    bool ok;
    int taken;
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
    else if (!strcmp(a, "--chat-template-file"))
        return eng_arg_chat_template_file(cmd, argc, argv, i, t->chat_template);
    else if (!strcmp(a, "--cache-prompt") || !strcmp(a, "--no-cache-prompt"))
        ok = (t->sp->no_prompt_cache = a[2] == 'n', true); /* llama-server's pair */
    else if (t->reasoning && !strcmp(a, "--no-prefill-assistant")) /* llama-server's: a last */
        ok = (t->reasoning->no_prefill = true); /* assistant message closed */
    else if (t->reasoning && (taken = eng_arg_reasoning(cmd, argc, argv, i, t->reasoning)) != 0)
        return taken;
    else if (t->constraint &&
             (taken = eng_arg_constraint(cmd, argc, argv, i, t->constraint)) != 0)
        return taken;
    else
        return eng_arg_sampling(cmd, argc, argv, i, t->samp, t->seed_given);
    return ok ? 1 : -1;
}

int eng_arg_last(const char *cmd, int argc, char **argv, int *i, const struct eng_common_args *t)
{
    const int taken = eng_arg_common(cmd, argc, argv, i, t);
    if (taken == 0)
        fprintf(stderr, "faultline %s: unknown option '%s'\n", cmd, argv[*i]);
    return taken > 0 ? 1 : -1;
}

/* --spec-type's list (llama.cpp's): ngram-simple, draft-simple (with -md)
 * or none here. */
static bool spec_types(const char *cmd, const char *v, struct eng_spec_params *p)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", v);
    p->type = ENG_SPEC_NONE;
    p->draft.named = false;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const int k = eng_spec_type_parse(t);
        if (!strcmp(t, "draft-simple")) {
            p->draft.named = true;
            continue;
        }
        if (k < 0) {
            fprintf(stderr, "faultline %s: --spec-type %s: %s\n", cmd, t,
                    strncmp(t, "draft", 5) && strncmp(t, "ngram", 5)
                        ? "not a type (none, ngram-simple or draft-simple)"
                        : "not built here: ngram-simple and draft-simple (-md FILE) are");
            return false;
        }
        p->type = k > (int)p->type ? (enum eng_spec_type)k : p->type;
    }
    return true;
}

/* The draft model's flags (llama.cpp's names, old and new). */
static int arg_spec_draft(const char *cmd, int argc, char **argv, int *i,
                          struct eng_spec_draft_params *d)
{
    const char *a = argv[*i], *v;
    if (eng_arg_is(a, "-md", "--model-draft") || !strcmp(a, "--spec-draft-model"))
        return eng_arg_str(cmd, argc, argv, i, &d->model) ? 1 : -1;
    if (!strcmp(a, "--spec-draft-n-max"))
        return eng_arg_int(cmd, argc, argv, i, 1, ENG_SPEC_DRAFT_MAX, &d->n_max) ? 1 : -1;
    if (!strcmp(a, "--spec-draft-n-min"))
        return eng_arg_int(cmd, argc, argv, i, 0, ENG_SPEC_DRAFT_MAX, &d->n_min) ? 1 : -1;
    if (eng_arg_is(a, "--draft-p-min", "--spec-draft-p-min"))
        return eng_arg_float(cmd, argc, argv, i, 0, 1, &d->p_min) ? 1 : -1;
    if (eng_arg_is(a, "-td", "--threads-draft") || !strcmp(a, "--spec-draft-threads"))
        return eng_arg_int(cmd, argc, argv, i, 1, 1024, &d->n_threads) ? 1 : -1;
    const bool k = eng_arg_is(a, "-ctkd", "--cache-type-k-draft") ||
                   !strcmp(a, "--spec-draft-type-k");
    if (!k && !eng_arg_is(a, "-ctvd", "--cache-type-v-draft") && strcmp(a, "--spec-draft-type-v"))
        return 0;
    struct fl_err why;
    if (!eng_arg_str(cmd, argc, argv, i, &v))
        return -1;
    if (eng_kv_type_parse(v, k ? &d->cache_type_k : &d->cache_type_v, &why)) {
        fprintf(stderr, "faultline %s: %s: %s\n", cmd, a, why.msg);
        return -1;
    }
    return 1;
}

int eng_arg_spec(const char *cmd, int argc, char **argv, int *i, struct eng_spec_params *p)
{
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--spec-type"))
        return eng_arg_str(cmd, argc, argv, i, &v) && spec_types(cmd, v, p) ? 1 : -1;
    if (!strcmp(a, "--spec-ngram-simple-size-n"))
        return eng_arg_int(cmd, argc, argv, i, 1, 1024, &p->size_n) ? 1 : -1;
    if (!strcmp(a, "--spec-ngram-simple-size-m"))
        return eng_arg_int(cmd, argc, argv, i, 1, 1024, &p->size_m) ? 1 : -1;
    if (!strcmp(a, "--spec-ngram-simple-min-hits")) { /* llama.cpp's ngram-simple reads it not */
        int hits;
        return eng_arg_int(cmd, argc, argv, i, 1, 1 << 16, &hits) ? 1 : -1;
    }
    return arg_spec_draft(cmd, argc, argv, i, &p->draft);
}

int eng_arg_embd(const char *cmd, int argc, char **argv, int *i, int *pooling, int *normalize)
{
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--embd-normalize"))
        return eng_arg_int(cmd, argc, argv, i, -1, 64, normalize) ? 1 : -1;
    if (strcmp(a, "--pooling"))
        return 0;
    if (!eng_arg_str(cmd, argc, argv, i, &v))
        return -1;
    if ((*pooling = eng_pooling_parse(v)) < 0) {
        fprintf(stderr, "faultline %s: --pooling is none, mean, cls or last, not '%s'%s\n", cmd, v,
                strcmp(v, "rank") ? "" : " (rank needs a reranker's classifier head)");
        return -1;
    }
    return 1;
}

int eng_arg_chat_template_file(const char *cmd, int argc, char **argv, int *i, const char **name)
{
    const char *path;
    if (!eng_arg_str(cmd, argc, argv, i, &path))
        return -1;
    char *text = NULL;
    size_t len;
    const int rc = fl_read_whole_file(path, 1 << 22, &text, &len);
    const enum fl_chat_format fmt = rc ? FL_CHAT_UNKNOWN : fl_chat_detect(NULL, text);
    free(text);
    if (rc || fmt == FL_CHAT_UNKNOWN) {
        fprintf(stderr, "faultline %s: --chat-template-file %s: %s\n", cmd, path,
                rc ? strerror(-rc) : "no built-in chat format matches this template (faultline "
                "runs no Jinja: --chat-template NAME picks one)");
        return -1;
    }
    *name = fl_chat_format_name(fmt);
    return 1;
}

int eng_arg_constraint(const char *cmd, int argc, char **argv, int *i,
                       struct eng_constraint_args *c)
{
    const char *a = argv[*i];
    if (eng_arg_is(a, "-j", "--json-schema"))
        return eng_arg_str(cmd, argc, argv, i, &c->json_schema) ? 1 : -1;
    if (eng_arg_is(a, "-jf", "--json-schema-file"))
        return eng_arg_str(cmd, argc, argv, i, &c->json_schema_file) ? 1 : -1;
    if (eng_arg_is(a, "--grammar", NULL))
        return eng_arg_str(cmd, argc, argv, i, &c->grammar) ? 1 : -1;
    if (eng_arg_is(a, "--grammar-file", NULL))
        return eng_arg_str(cmd, argc, argv, i, &c->grammar_file) ? 1 : -1;
    return 0;
}

/* The schema of -j TEXT or -jf FILE, checked; 0 or -1 (said). */
static int load_schema(const char *cmd, struct eng_constraint_args *c)
{
    struct fl_err err = { "" };
    struct fl_schema *s = NULL;
    int rc = c->json_schema ? fl_json_load_bytes(c->json_schema, strlen(c->json_schema), false,
                                                 "--json-schema", &c->schema, &err)
                            : fl_json_load_file(c->json_schema_file, 1 << 24, &c->schema, &err);
    if (!rc)
        rc = fl_schema_compile(c->schema, &s, &err);
    fl_schema_free(s);
    if (rc)
        fprintf(stderr, "faultline %s: %s\n", cmd, err.msg);
    return rc ? -1 : 0;
}

/* The file and the JSON read (eng_constraint_load's work). */
static int load_constraint(const char *cmd, struct eng_constraint_args *c)
{
    const int given = !!c->json_schema + !!c->json_schema_file + !!c->grammar + !!c->grammar_file;
    if (given > 1) {
        fprintf(stderr, "faultline %s: -j, -jf, --grammar and --grammar-file each constrain the "
                "answer: give one\n", cmd);
        return -1;
    }
    if (c->json_schema || c->json_schema_file)
        return load_schema(cmd, c);
    if (c->grammar) {
        c->grammar_len = strlen(c->grammar);
        return (c->grammar_text = strdup(c->grammar)) ? 0 : -1;
    }
    const int rc = c->grammar_file ? fl_read_whole_file(c->grammar_file, 1 << 24, &c->grammar_text,
                                                        &c->grammar_len)
                                   : 0;
    if (rc)
        fprintf(stderr, "faultline %s: --grammar-file %s: %s\n", cmd, c->grammar_file,
                rc == -EFBIG ? "larger than 16 MiB" : strerror(-rc));
    return rc ? -1 : 0;
}

int eng_constraint_load(const char *cmd, struct eng_constraint_args *c,
                        struct api_constraint_defaults *defaults)
{
    const int rc = load_constraint(cmd, c);
    if (!rc && defaults)
        *defaults = (struct api_constraint_defaults){ c->schema, c->grammar_text, c->grammar_len };
    return rc;
}

void eng_constraint_free(struct eng_constraint_args *c)
{
    json_decref(c->schema);
    free(c->grammar_text);
    c->schema = NULL;
    c->grammar_text = NULL;
}

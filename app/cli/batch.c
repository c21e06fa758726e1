/* batch.c: `faultline batch` — an OpenAI Batch API file of requests run
 * through the scheduler (app/scheduler.h), -np of them at a time, each
 * result appended to the output as it finishes (app/cli/batch-files.h). A
 * rerun onto the same output skips what is done, so a crash, kill -9 or
 * Ctrl-C loses only the requests in flight. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "api/native.h"
#include "api/openai.h"
#include "api/responses.h"
#include "app/cli/batch-files.h"
#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "app/cli/session-flags.h"
#include "app/scheduler.h"
#include "gguf/gguf.h"
#include "pager/pager.h"
#include "serve/engine-request.h"
#include "text/grammar.h"
#include "text/tokenizer.h"
#include "text/tool-calls.h"

struct batch_opts {
    struct eng_session_params sp;
    struct fl_sampler_params samp;
    struct api_reasoning_defaults reasoning;
    struct eng_constraint_args cons; /* -j / --grammar: requests' default form */
    struct api_constraint_defaults constraint;
    const char *in, *out, *chat_template;
    int max_tokens;
    int pooling, embd_normalize;  /* --pooling (-1: the model's), --embd-normalize */
    struct eng_spec_params spec;  /* --spec-type ... */
    bool seed_given, quiet;
};

/* One line in flight: a request per choice ("n"). */
struct job;
struct job_choice {
    struct job *j;
    int index;
    char *echo_text;              /* echo: its prompt's text (else NULL) */
    size_t echo_len;
};
struct job {
    char *custom_id;
    int line_no;
    enum api_kind kind;
    bool responses;               /* a /v1/responses line: a response object */
    struct batch_run *run;
    struct api_answer_reader answer; /* how the answer's reasoning and calls are read */
    int n, n_choice, left;        /* choices (prompts times "n"), "n", those still running */
    bool cancelled;               /* one was: the line is lost (a rerun does it) */
    struct job_choice *refs;      /* [n]: each request's user pointer */
    json_t **done;                /* [n]: each finished choice's completion object */
    char error[640];              /* the first failure's message ("" none) */
    const char *error_code;
    bool embd;                    /* a /v1/embeddings line: an input per request, */
    bool base64;                  /* its answer's encoding, */
    int norm;                     /* its scaling (api/embeddings.h), */
    float **rows;                 /* [n] and each input's vector once done */
    int *n_tok;                   /* [n] its tokens */
};

struct batch_run {
    struct batch_opts *o;
    struct eng_session *s;
    struct eng_sched *q;
    struct batch_out out;
    enum fl_chat_format chat;
    enum eng_pooling pool;           /* embedding lines' */
    const char *model_name;
    json_t *seen;        /* custom_id -> its line, this run's input */
    int total, done, errors, skipped, in_flight, next_req;
    uint64_t gen_tokens, prompt_tokens, prompt_cached;
    double t0, t_progress;
    time_t started;
    int write_rc;
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    if (g_stop) /* a second one: at once */
        _exit(128 + sig);
    g_stop = sig;
}

static int usage(FILE *out)
{
    fprintf(out,
            "usage: faultline batch -m MODEL -i REQUESTS.jsonl -o RESULTS.jsonl [-np 4] [-c CELLS]\n"
            "                       [-b 512] [-n MAX_TOKENS] [--temp 0.8 ...] [--seed S]\n"
            "                       [--chat-template NAME] [--no-cache-prompt] [-q]\n"
            "                       [--reasoning-format FMT] [-rea on|off|auto]\n"
            "                       [--reasoning-budget N] [--reasoning-budget-message TEXT]\n"
            "                       [--reasoning-effort LEVEL] [--no-prefill-assistant]\n"
            "                       [-j SCHEMA | -jf FILE | --grammar GBNF | --grammar-file FILE]\n"
            "                       [--pooling none|mean|cls|last] [--embd-normalize 2]\n"
            "                       [--spec-type ngram-simple [--spec-ngram-simple-size-n 12]\n"
            "                        [--spec-ngram-simple-size-m 48]]\n"
            "                       [-md DRAFT_MODEL [--spec-draft-n-max 3] [--spec-draft-n-min 0]\n"
            "                        [--spec-draft-p-min 0] [-td N] [-ctkd TYPE] [-ctvd TYPE]]\n"
            "Runs OpenAI Batch API lines ({\"custom_id\", \"url\": \"/v1/chat/completions\",\n"
            "\"/v1/completions\", \"/v1/responses\" or \"/v1/embeddings\", \"body\": {...}}), -np at a\n"
            "time sharing -c KV cells (default: as serve's), and appends {\"custom_id\",\n"
            "\"response\" | \"error\"} lines as they finish. A rerun onto the same output skips\n"
            "what is done. -n and the sampling flags are the\n"
            "defaults for requests that do not say (-n -1: up to the context), -j / --grammar the\n"
            "JSON schema or GBNF grammar of lines that ask for no format, schema, grammar or\n"
            "tools of their own. Prompts that start alike (shared instructions) read the whole\n"
            "-b chunks an earlier one ran from the prompt cache: the same bits\n"
            "(--no-cache-prompt: off). -q: no progress line. A thinking model's\n"
            "reasoning is the message's reasoning_content (--reasoning-format none: left in\n"
            "content); -rea off asks Qwen3, Qwen3.5, GLM and DeepSeek V3.1 to answer without it\n"
            "(as serve's flags). Embeddings are the final norm's output pooled by --pooling\n"
            "(default: the model's pooling_type, else last) and scaled by --embd-normalize (2:\n"
            "unit length; -1: none), as llama-server's. --spec-type ngram-simple: speculative\n"
            "decoding without a draft model (llama.cpp's): when the last N tokens appeared\n"
            "before, the M after them (at most 30) are checked in the same step; the answers\n"
            "stay byte for byte the same. -md FILE: a draft model with the same vocabulary\n"
            "proposes up to --spec-draft-n-max tokens (llama.cpp's draft-simple) as serve's.\n");
    eng_session_print_usage(out);
    return out == stdout ? 0 : 2;
}

static int parse(int argc, char **argv, struct batch_opts *o)
{
    *o = (struct batch_opts){ .max_tokens = -1, .pooling = -1,
                              .embd_normalize = API_EMBD_NORM_DEFAULT,
                              .reasoning = { .format = API_REASONING_DEEPSEEK, .thinking = -1,
                                             .budget = -1 },
                              .spec = ENG_SPEC_PARAMS_DEFAULT };
    eng_session_params_init(&o->sp);
    o->sp.n_seq = 4;
    fl_sampler_defaults(&o->samp, 0);
    struct eng_compat compat = { 0 };
    const struct eng_common_args common = { &o->sp, NULL, NULL, true, &compat };
    const struct eng_request_args reqs = { &o->sp, &o->samp, &o->seed_given, &o->max_tokens,
                                           &o->chat_template, &o->reasoning, &o->cons };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int taken;
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout);
        if ((taken = eng_arg_requests("batch", argc, argv, &i, &reqs)) != 0)
            ok = taken > 0;
        else if (!strcmp(a, "-i") || !strcmp(a, "--input"))
            ok = eng_arg_str("batch", argc, argv, &i, &o->in);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            ok = eng_arg_str("batch", argc, argv, &i, &o->out);
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            o->quiet = true;
        else if ((taken = eng_arg_spec("batch", argc, argv, &i, &o->spec)) != 0)
            ok = taken > 0;
        else if ((taken = eng_arg_embd("batch", argc, argv, &i, &o->pooling,
                                       &o->embd_normalize)) != 0)
            ok = taken > 0;
        else
            ok = eng_arg_last("batch", argc, argv, &i, &common) > 0;
        if (!ok)
            return 2;
    }
    if (!o->sp.model_path || !o->in || !o->out) {
        fprintf(stderr, "faultline batch: -m, -i and -o are required\n");
        return usage(stderr);
    }
    if (eng_constraint_load("batch", &o->cons, &o->constraint))
        return 2;
    eng_args_finish("batch", &common);
    return -1;
}

/* --- results ------------------------------------------------------------------------ */

static void write_line(struct batch_run *b, json_t *v)
{
    int rc = batch_out_write(&b->out, v);
    if (rc && !b->write_rc) {
        b->write_rc = rc;
        fprintf(stderr, "faultline batch: %s: cannot append: %s\n", b->o->out, strerror(-rc));
        g_stop = SIGTERM;
    }
}

/* Unique across reruns onto one output: the run's start time and a count. */
static void request_id(struct batch_run *b, char *buf, size_t n)
{
    snprintf(buf, n, "batch_req_%llx_%d", (unsigned long long)b->started, ++b->next_req);
}

static void write_error(struct batch_run *b, const char *custom_id, int line_no, const char *code,
                        const char *msg)
{
    char rid[48];
    request_id(b, rid, sizeof(rid));
    write_line(b, api_batch_output(custom_id, line_no, rid, NULL, code, msg));
    b->errors++;
}

static void job_free(struct job *j)
{
    for (int c = 0; j->done && c < j->n; c++)
        json_decref(j->done[c]);
    for (int c = 0; j->refs && c < j->n; c++)
        free(j->refs[c].echo_text);
    for (int c = 0; j->rows && c < j->n; c++)
        free(j->rows[c]);
    free(j->rows);
    free(j->n_tok);
    free(j->done);
    free(j->refs);
    free(j->custom_id);
    free(j);
}

/* The line's output once its last choice is done: its choices in one
 * completion object, or the first failure. */
static void job_write(struct batch_run *b, struct job *j)
{
    char rid[48];
    json_t *doc = NULL;
    if (!j->error[0] && j->embd) {
        const struct api_embd_request r = { .oai = true, .base64 = j->base64, .n_in = j->n };
        doc = api_embd_answer(&r, b->model_name, (const float *const *)j->rows, NULL,
                              (int)eng_session_model(b->s)->hp.n_embd, j->n_tok);
        if (!doc) {
            snprintf(j->error, sizeof(j->error), "line %d: out of memory", j->line_no);
            j->error_code = "server_error";
        }
    } else if (!j->error[0]) { /* the choices are taken over */
        doc = api_completion_merge(j->done, j->n, j->n_choice);
        memset(j->done, 0, sizeof(*j->done) * (size_t)j->n);
        if (!doc) {
            snprintf(j->error, sizeof(j->error), "line %d: out of memory", j->line_no);
            j->error_code = "server_error";
        }
    }
    b->done++;
    if (j->error[0]) {
        write_error(b, j->custom_id, j->line_no, j->error_code, j->error);
    } else {
        request_id(b, rid, sizeof(rid));
        char cid[64];
        snprintf(cid, sizeof(cid), "%s-%s", j->kind == API_CHAT ? "chatcmpl" : "cmpl", rid + 10);
        if (!j->responses && !j->embd) /* a response object has its id, its items' from it */
            json_object_set_new(doc, "id", json_string(cid));
        write_line(b, api_batch_output(j->custom_id, j->line_no, rid, doc, NULL, NULL));
    }
}

/* A choice's completion object, or NULL with the job's error set. */
static json_t *choice_json(struct batch_run *b, const struct job_choice *ref,
                           const struct eng_req_result *r)
{
    struct job *j = ref->j;
    struct api_answer ans = { 0 };
    json_t *doc = NULL;
    if (r->finish == ENG_FINISH_ERROR) {
        snprintf(j->error, sizeof(j->error), "line %d: %s", j->line_no, r->error);
        j->error_code = "invalid_request";
    } else if (api_answer_read(&j->answer, r->text, r->len, r->finish != ENG_FINISH_LENGTH, &ans)) {
        snprintf(j->error, sizeof(j->error), "line %d: out of memory", j->line_no);
        j->error_code = "server_error";
    } else if (j->responses) {
        char rid[48], id[64];
        request_id(b, rid, sizeof(rid));
        snprintf(id, sizeof(id), "resp_%s", rid + 10);
        const struct api_response resp = {
            .id = id, .model = b->model_name, .created = (int64_t)time(NULL),
            .incomplete = r->finish == ENG_FINISH_LENGTH, .input_tokens = r->n_prompt,
            .cached_tokens = r->n_cached, .output_tokens = r->n_tokens,
        };
        doc = api_response_answer_json(&resp, &ans);
    } else {
        const struct api_completion c = {
            .kind = j->kind, .id = "", .model = b->model_name, .created = (int64_t)time(NULL),
            .text = ans.content, .len = ans.content_len, .finish_reason = eng_finish_name(r->finish),
            .prompt_tokens = r->n_prompt, .completion_tokens = r->n_tokens,
            .logprobs = r->logprobs, .n_logprobs = r->n_logprobs,
            .tok = eng_session_tokenizer(b->s), .cached_tokens = r->n_cached,
            .tools = ans.has_tools ? &ans.tools : NULL, .reasoning = ans.reasoning,
            .reasoning_len = ans.reasoning_len, .echo = ref->echo_text != NULL,
            .prompt = ref->echo_text, .prompt_len = ref->echo_len,
            .prompt_logprobs = r->prompt_logprobs,
        };
        doc = api_completion_json(&c);
    }
    api_answer_free(&ans);
    return doc;
}

/* An embedding request's pooled row, scaled as the line asks, kept for
 * the answer; or the line's error. */
static void take_embedding(struct job *j, int i, const struct eng_req_result *r)
{
    const size_t e = (size_t)r->n_embd;
    if (r->finish == ENG_FINISH_ERROR || !r->embd) {
        snprintf(j->error, sizeof(j->error), "line %d: input[%d]: %s", j->line_no, i,
                 r->error ? r->error : "the request failed");
        j->error_code = "invalid_request";
    } else if (!(j->rows[i] = malloc(sizeof(float) * e))) {
        snprintf(j->error, sizeof(j->error), "line %d: out of memory", j->line_no);
        j->error_code = "server_error";
    } else {
        api_embd_normalize(r->embd, j->rows[i], r->n_embd, j->norm);
        j->n_tok[i] = r->n_prompt;
    }
}

static void on_done(void *ctx, void *user, const struct eng_req_result *r)
{
    struct batch_run *b = ctx;
    struct job_choice *ref = user;
    struct job *j = ref->j;
    b->in_flight--;
    if (r->finish == ENG_FINISH_CANCELLED)
        j->cancelled = true;
    else {
        b->gen_tokens += (uint64_t)r->n_tokens;
        b->prompt_tokens += (uint64_t)r->n_prompt;
        b->prompt_cached += (uint64_t)r->n_cached;
        if (!j->error[0] && j->embd)
            take_embedding(j, ref->index, r);
        else if (!j->error[0])
            j->done[ref->index] = choice_json(b, ref, r);
    }
    if (--j->left > 0)
        return;
    if (!j->cancelled)
        job_write(b, j);
    job_free(j);
}

/* --- requests ------------------------------------------------------------------------- */

/* A line whose job could not be made or started: its error line. */
static void refuse_line(struct batch_run *b, const char *custom_id, int line_no, const char *why)
{
    char msg[700];
    snprintf(msg, sizeof(msg), "line %d: %s", line_no, why);
    write_error(b, custom_id, line_no, "invalid_request", msg);
    b->done++;
}

static struct job *new_job(struct batch_run *b, const struct api_batch_line *l, int line_no)
{
    const struct api_request *r = &l->req;
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    *j = (struct job){ .custom_id = strdup(l->custom_id), .line_no = line_no, .kind = r->kind,
                       .responses = l->responses, .run = b, .n = r->n_prompts * r->n,
                       .n_choice = r->n };
    api_answer_reader_init(r, b->chat, &j->answer);
    j->refs = calloc((size_t)j->n, sizeof(*j->refs));
    j->done = calloc((size_t)j->n, sizeof(*j->done));
    if (!j->custom_id || !j->refs || !j->done) {
        job_free(j);
        return NULL;
    }
    return j;
}

/* After a line's requests were submitted: when none started, the line's
 * error now; else the line ends when its last started request does (an
 * error if one did not start). */
static void end_if_none_started(struct batch_run *b, struct job *j)
{
    if (j->left)
        return;
    write_error(b, j->custom_id, j->line_no, j->error_code, j->error);
    b->done++;
    job_free(j);
}

/* Prompt p's requests, one per choice; choice c samples with seed + c
 * (the later ones read the first's prompt as it is computed). Stops at
 * the first that cannot start, its error the line's. */
static void submit_prompt(struct batch_run *b, struct api_batch_line *l, struct job *j, int p,
                          struct eng_req *req)
{
    struct api_request *r = &l->req;
    const char *why = "out of memory";
    int32_t *ids = NULL;
    /* a "suffix" fills in the middle, its parts cut as llama-server's defaults cut them */
    const struct api_infill_limits lim = { 2048, b->o->max_tokens, eng_session_n_ctx(b->s), false };
    const int n = api_request_select_prompt(r, p) ? -ENOMEM
                  : api_request_prompt_tokens(eng_session_tokenizer(b->s), b->chat, r, &lim, &ids,
                                              &why);
    const uint64_t seed = req->sampling.seed;
    struct fl_err err = { "" };
    for (int c = 0; n >= 0 && c < r->n && !j->error[0]; c++) {
        struct job_choice *ref = &j->refs[p * r->n + c];
        *ref = (struct job_choice){ j, p * r->n + c, NULL, 0 };
        ref->echo_text = r->echo ? api_prompt_text(r, eng_session_tokenizer(b->s), ids, n,
                                                   &ref->echo_len) : NULL;
        req->prompt = ids;
        req->n_prompt = n;
        req->user = ref;
        req->sampling.seed = seed + (uint64_t)c;
        if ((r->echo && !ref->echo_text) || eng_sched_submit(b->q, req, &err) < 0) {
            snprintf(j->error, sizeof(j->error), "line %d: %s", j->line_no,
                     err.msg[0] ? err.msg : "out of memory");
            j->error_code = "invalid_request";
            break;
        }
        j->left++;
        b->in_flight++;
    }
    req->sampling.seed = seed;
    if (n < 0 && !j->error[0]) {
        snprintf(j->error, sizeof(j->error), "line %d: %s%s", j->line_no,
                 r->n_prompts > 1 ? "a prompt of the list: " : "", why);
        j->error_code = "invalid_request";
    }
    free(ids);
}

/* A line's requests: for each prompt, one per choice. */
static void submit_line(struct batch_run *b, struct api_batch_line *l, int line_no)
{
    api_request_reasoning_defaults(&l->req, &b->o->reasoning);
    api_request_constraint_defaults(&l->req, &b->o->constraint);
    const struct api_request *r = &l->req;
    struct fl_err err = { "" };
    char nmsg[96];
    snprintf(nmsg, sizeof(nmsg), "n: %d choices; the batch runs %d sequences at once (-np)", r->n,
             eng_session_n_seq(b->s));
    struct job *j = NULL;
    if (r->n > eng_session_n_seq(b->s) ||
        api_request_check_vocab(&l->req, eng_session_tokenizer(b->s), &err) ||
        !(j = new_job(b, l, line_no))) {
        refuse_line(b, l->custom_id, line_no, r->n > eng_session_n_seq(b->s) ? nmsg
                                              : err.msg[0] ? err.msg : "out of memory");
        return;
    }
    struct eng_req req;
    json_t *call_schema; /* compiled at submit */
    char *call_grammar;
    srv_engine_request(r, &j->answer, eng_session_tokenizer(b->s), &b->o->samp, b->o->max_tokens,
                       eng_session_n_ctx(b->s), &req, &call_schema, &call_grammar);
    for (int p = 0; p < r->n_prompts && !j->error[0]; p++)
        submit_prompt(b, l, j, p, &req);
    json_decref(call_schema);
    free(call_grammar);
    end_if_none_started(b, j);
}

/* A /v1/embeddings line: one request per input, each its prompt alone. */
static void submit_embeddings(struct batch_run *b, struct api_batch_line *l, int line_no)
{
    const struct api_embd_request *e = &l->embd;
    struct job *j = b->pool == ENG_POOL_NONE ? NULL : calloc(1, sizeof(*j));
    if (j) {
        *j = (struct job){ .custom_id = strdup(l->custom_id), .line_no = line_no, .run = b,
                           .n = e->n_in, .n_choice = 1, .embd = true, .base64 = e->base64,
                           .norm = e->has_normalize ? e->normalize : b->o->embd_normalize };
        j->refs = calloc((size_t)j->n, sizeof(*j->refs));
        j->rows = calloc((size_t)j->n, sizeof(*j->rows));
        j->n_tok = calloc((size_t)j->n, sizeof(int));
    }
    if (!j || !j->custom_id || !j->refs || !j->rows || !j->n_tok) {
        refuse_line(b, l->custom_id, line_no, b->pool == ENG_POOL_NONE
                    ? "--pooling none gives a row per token, which an embeddings answer has no "
                      "room for: --pooling mean, cls or last" : "out of memory");
        if (j)
            job_free(j);
        return;
    }
    for (int i = 0; i < e->n_in && !j->error[0]; i++) {
        char why[160];
        int32_t *ids = NULL;
        struct fl_err err = { "" };
        const int n = srv_embd_tokens(eng_session_tokenizer(b->s), &e->in[i],
                                      eng_session_n_ctx(b->s), &ids, why, sizeof(why));
        j->refs[i] = (struct job_choice){ j, i, NULL, 0 };
        const struct eng_req req = { .prompt = ids, .n_prompt = n, .embed = true,
                                     .pooling = b->pool, .sampling = b->o->samp,
                                     .user = &j->refs[i] };
        if (n < 0 || eng_sched_submit(b->q, &req, &err) < 0) {
            snprintf(j->error, sizeof(j->error), "line %d: input[%d]: %s", line_no, i,
                     n < 0 ? why : err.msg);
            j->error_code = "invalid_request";
        } else {
            j->left++;
            b->in_flight++;
        }
        free(ids);
    }
    end_if_none_started(b, j);
}

/* One input line: skipped when done before, an error line when malformed
 * or a repeated custom_id, else submitted. */
static void take_line(struct batch_run *b, const char *line, size_t n, int line_no)
{
    struct api_batch_line l;
    struct fl_err err = { "" };
    const int rc = api_batch_line_parse(line, n, &l, &err);
    const char *id = l.custom_id;
    const json_t *first = id ? json_object_get(b->seen, id) : NULL;
    if (first && batch_out_is_done(&b->out, NULL, line_no)) {
        b->skipped++;
    } else if (first) { /* answered by line number, as the id is taken */
        char msg[300];
        snprintf(msg, sizeof(msg), "line %d: custom_id \"%.160s\" repeats line %lld", line_no, id,
                 (long long)json_integer_value(first));
        write_error(b, NULL, line_no, "duplicate_custom_id", msg);
        b->done++;
    } else if (batch_out_is_done(&b->out, id, line_no)) {
        b->skipped++;
    } else if (rc) {
        char msg[600];
        snprintf(msg, sizeof(msg), "line %d: %s", line_no, err.msg);
        write_error(b, id, line_no, "invalid_request", msg);
        b->done++;
    } else if (l.embeddings) {
        submit_embeddings(b, &l, line_no);
    } else {
        submit_line(b, &l, line_no);
    }
    if (id && !json_object_get(b->seen, id))
        json_object_set_new(b->seen, id, json_integer(line_no));
    api_batch_line_free(&l);
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return false;
    return true;
}

/* Lines that are not blank: the progress line's total. */
static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int total = 0;
    while (f && (n = getline(&line, &cap, f)) > 0)
        total += !blank(line, (size_t)n);
    free(line);
    if (f)
        fclose(f);
    return total;
}

/* --- the run ------------------------------------------------------------------------------ */

static void progress(struct batch_run *b, bool last)
{
    const double t = fl_clock_s();
    if (b->o->quiet || !isatty(STDERR_FILENO) || (!last && t - b->t_progress < 0.5))
        return;
    b->t_progress = t;
    const int finished = b->done + b->skipped;
    /* a file of embeddings generates nothing: its speed is the prompts' */
    const bool gen = b->gen_tokens > 0;
    const double el = t - b->t0;
    const double tps = el > 0 ? (double)(gen ? b->gen_tokens : b->prompt_tokens) / el : 0;
    const double eta = b->done > 0 ? el / b->done * (b->total - finished) : 0;
    fprintf(stderr, "\r[%d/%d] %d running, %.1f %stokens/s, ETA %02d:%02d%s", finished, b->total,
            b->in_flight, tps, gen ? "" : "prompt ", (int)eta / 60, (int)eta % 60, last ? "\n" : "  ");
}

static void summary(struct batch_run *b)
{
    const double el = fl_clock_s() - b->t0;
    fprintf(stderr, "batch: %d requests done (%d errors), %d done before, in %.1f s: %llu prompt "
            "tokens (%llu of them from the prompt cache) at %.2f t/s, %llu generated (%.2f t/s)",
            b->done, b->errors, b->skipped, el, (unsigned long long)b->prompt_tokens,
            (unsigned long long)b->prompt_cached, el > 0 ? (double)b->prompt_tokens / el : 0.0,
            (unsigned long long)b->gen_tokens, el > 0 ? (double)b->gen_tokens / el : 0.0);
    struct eng_sched_stats ss;
    eng_sched_get_stats(b->q, &ss);
    if (ss.drafted)
        fprintf(stderr, "; %llu draft tokens, %llu kept (%.1f %%)", (unsigned long long)ss.drafted,
                (unsigned long long)ss.accepted, 100.0 * (double)ss.accepted / (double)ss.drafted);
    struct pager *p = eng_session_pager(b->s);
    struct fl_predictor *pr = eng_session_predictor(b->s);
    if (p && pr) {
        struct pager_totals t;
        struct fl_predict_stats st;
        pager_stats_totals(p, &t);
        fl_predictor_stats(pr, &st);
        fprintf(stderr, "; experts read %.1f MiB, hit rate %.1f %%", (double)t.bytes_read / 1048576.0,
                st.routed ? 100.0 * (double)st.ready / (double)st.routed : 0.0);
    }
    fprintf(stderr, "\n");
}

/* Reads the input, keeping about two requests per sequence queued. */
static int run_lines(struct batch_run *b, FILE *in, struct fl_err *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = 0;
    int line_no = 0, rc = 0;
    bool eof = false;
    const int want = 2 * eng_session_n_seq(b->s);
    while (!rc && !g_stop) {
        while (!eof && b->in_flight < want && !g_stop) {
            if ((n = getline(&line, &cap, in)) <= 0) {
                eof = true;
                break;
            }
            line_no++;
            if (!blank(line, (size_t)n))
                take_line(b, line, (size_t)n - (line[n - 1] == '\n'), line_no);
        }
        rc = eng_sched_step(b->q, err);
        progress(b, false);
        if (rc == 0 && eof)
            break;
        rc = rc > 0 ? 0 : rc;
    }
    free(line);
    if (!rc && ferror(in))
        rc = fl_err_set(err, -EIO, "%s: cannot read it", b->o->in);
    return rc;
}

static int batch_main(struct batch_opts *o, struct batch_run *b, struct fl_err *err)
{
    const char *inputs[2] = { o->in, o->sp.model_path };
    FILE *in = fopen(o->in, "r");
    if (!in)
        return fl_err_set(err, -errno, "%s: %s", o->in, strerror(errno));
    int rc = batch_out_open(&b->out, o->out, inputs, 2, err);
    if (!rc && b->out.cut_bytes)
        fprintf(stderr, "batch: %s: cut a partial last line (%lld bytes) from an interrupted run\n",
                o->out, (long long)b->out.cut_bytes);
    if (!rc)
        rc = eng_session_open(&o->sp, &b->s, err);
    if (!rc && o->constraint.grammar) /* --grammar: its tokens are the model's */
        rc = fl_grammar_check(o->constraint.grammar, o->constraint.grammar_len,
                              eng_session_tokenizer(b->s), err);
    if (!rc) {
        b->chat = o->chat_template ? fl_chat_format_from_name(o->chat_template)
                                   : fl_chat_detect_file(eng_session_gguf(b->s));
        if (o->chat_template && b->chat == FL_CHAT_UNKNOWN)
            rc = fl_err_set(err, -EINVAL, "--chat-template %s: not a known format", o->chat_template);
    }
    const struct eng_sched_hooks hooks = { .ctx = b, .done = on_done };
    if (!rc)
        rc = eng_sched_create(b->s, &hooks, &b->q, err);
    struct fl_err e;
    const int spec = rc ? 0 : eng_sched_set_spec(b->q, &o->spec, &e);
    if (spec == -ENOTSUP && !o->quiet) /* a recurrent model: it decodes as before */
        fprintf(stderr, "faultline batch: %s\n", e.msg);
    else if (spec)
        rc = fl_err_set(err, spec, "%s", e.msg);
    if (!rc) {
        const char *slash = strrchr(o->sp.model_path, '/');
        b->model_name = slash ? slash + 1 : o->sp.model_path;
        b->pool = srv_embd_pooling(b->s, o->pooling);
        b->total = count_lines(o->in);
        b->seen = json_object();
        b->t0 = fl_clock_s();
        b->started = time(NULL);
        rc = b->seen ? run_lines(b, in, err) : fl_err_set(err, -ENOMEM, "out of memory");
        progress(b, true);
    }
    fclose(in);
    return rc;
}

int cli_batch(int argc, char **argv)
{
    struct batch_opts o;
    int st = parse(argc, argv, &o);
    if (st >= 0) {
        eng_constraint_free(&o.cons);
        return st;
    }
    if (!o.seed_given)
        o.samp.seed = (uint64_t)time(NULL);
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct batch_run b = { .o = &o, .out = { .fd = -1 } };
    struct fl_err err = { "" };
    int rc = batch_main(&o, &b, &err);
    if (b.t0 > 0) /* the work started (a refused draft model comes after the scheduler) */
        summary(&b);
    if (rc)
        fprintf(stderr, "faultline batch: %s\n", err.msg);
    else if (g_stop)
        fprintf(stderr, "faultline batch: interrupted; %d requests in flight are not written (run "
                "again with the same -o to finish)\n", b.in_flight);
    if (b.q) { /* what is in flight ends cancelled (not written): its jobs are freed */
        struct fl_err e2;
        eng_sched_cancel_all(b.q);
        eng_sched_step(b.q, &e2);
    }
    eng_sched_free(b.q);
    json_decref(b.seen);
    if (b.s && eng_session_report(b.s, &err) && !rc)
        fprintf(stderr, "faultline batch: %s\n", err.msg), rc = -EIO;
    eng_session_close(b.s);
    batch_out_close(&b.out);
    eng_constraint_free(&o.cons);
    return rc || b.write_rc ? 1 : g_stop ? 128 + g_stop : 0;
}

/* eval.c: `faultline eval` — logits and routing files made exactly as the
 * llama.cpp references were (tests/data/ref/README.md): the prompt,
 * tokenized with add_special, evaluated as one batch with logits for every
 * position, then n greedy tokens, one decode each (EOS does not stop). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "base/out-file.h"
#include "record/flref.h"
#include "app/cli/session-flags.h"
#include "app/session.h"
#include "text/tokenizer.h"
#include "model/arch.h"

/* Routing of every position, collected from the MoE layers as they run. */
struct capture {
    int n_pos, n_layer, k;       /* k = 0 until the first record */
    bool *layer_used;            /* [n_layer] */
    int32_t *ids;                /* [n_pos][n_layer][k] */
    float *w;
    bool failed;
};

static void capture_record(void *arg, int layer, const struct eng_batch *b, int k,
                           const int32_t *ids, const float *w)
{
    struct capture *c = arg;
    if (c->failed)
        return;
    if (!c->k) {
        c->k = k;
        c->ids = calloc((size_t)c->n_pos * (size_t)c->n_layer * (size_t)k, sizeof(int32_t));
        c->w = calloc((size_t)c->n_pos * (size_t)c->n_layer * (size_t)k, sizeof(float));
    }
    if (!c->ids || !c->w || k != c->k || layer < 0 || layer >= c->n_layer) {
        c->failed = true;
        return;
    }
    c->layer_used[layer] = true;
    for (int t = 0; t < b->n_tok; t++) {
        const int pos = b->pos[t];
        if (pos >= c->n_pos)
            continue;
        const size_t at = ((size_t)pos * c->n_layer + layer) * (size_t)k;
        memcpy(c->ids + at, ids + (size_t)t * k, sizeof(int32_t) * (size_t)k);
        memcpy(c->w + at, w + (size_t)t * k, sizeof(float) * (size_t)k);
    }
}

/* Compacts the capture to the layers that have experts and writes FLRT. */
static int write_routing(const char *path, const struct capture *c, struct fl_err *err)
{
    if (c->failed)
        return fl_err_set(err, -ENOMEM, "recording the routing failed");
    struct flref_routing r = { .n_pos = c->n_pos, .k = c->k };
    r.layer_idx = calloc((size_t)c->n_layer + 1, sizeof(int32_t));
    r.ids = calloc((size_t)c->n_pos * c->n_layer * c->k + 1, sizeof(int32_t));
    r.weights = calloc((size_t)c->n_pos * c->n_layer * c->k + 1, sizeof(float));
    int rc = 0;
    if (!r.layer_idx || !r.ids || !r.weights) {
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    } else {
        for (int l = 0; l < c->n_layer; l++)
            if (c->layer_used[l])
                r.layer_idx[r.n_layers++] = l;
        for (int p = 0; p < c->n_pos; p++)
            for (int j = 0; j < r.n_layers; j++) {
                const size_t from = ((size_t)p * c->n_layer + r.layer_idx[j]) * c->k;
                const size_t to = ((size_t)p * r.n_layers + j) * c->k;
                memcpy(r.ids + to, c->ids + from, sizeof(int32_t) * c->k);
                memcpy(r.weights + to, c->w + from, sizeof(float) * c->k);
            }
        rc = flref_routing_write(path, &r, err);
    }
    flref_routing_free(&r);
    return rc;
}

struct eval_opts {
    struct eng_session_params sp;
    const char *prompt, *prompt_file, *logits_out, *routing_out;
    int n_gen;
    bool all_logits;
};

static int usage(void)
{
    fprintf(stderr,
            "usage: faultline eval -m MODEL (-p PROMPT | -f FILE) --logits-out FILE\n"
            "                      [--routing-out FILE] [-n 32] [-t T] [-c CTX] [-b BATCH]\n"
            "                      [--all-logits] [--force]\n"
            "Writes FLRF logits (every prompt position, then N greedy tokens) and FLRT\n"
            "routing as tests/data/ref/README.md describes. --all-logits also stores the\n"
            "logits of the generated positions (for `faultline compare`'s near-tie check).\n"
            "Outputs appear whole when done; none may be the model or the prompt file, and\n"
            "an existing GGUF file is replaced only with --force.\n");
    eng_session_print_usage(stderr);
    return 2;
}

static int parse(int argc, char **argv, struct eval_opts *o)
{
    *o = (struct eval_opts){ .n_gen = 32 };
    eng_session_params_init(&o->sp);
    struct eng_compat compat = { 0 };
    const struct eng_common_args common = { &o->sp, &o->prompt, &o->prompt_file, true, &compat };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage() & 0;
        else if (!strcmp(a, "--logits-out"))
            ok = eng_arg_str("eval", argc, argv, &i, &o->logits_out);
        else if (!strcmp(a, "--routing-out"))
            ok = eng_arg_str("eval", argc, argv, &i, &o->routing_out);
        else if (!strcmp(a, "-n"))
            ok = eng_arg_int("eval", argc, argv, &i, 0, 1 << 20, &o->n_gen);
        else if (!strcmp(a, "--all-logits"))
            o->all_logits = true;
        else
            ok = eng_arg_last("eval", argc, argv, &i, &common) > 0;
        if (!ok)
            return 2;
    }
    if (!o->sp.model_path || (!o->prompt == !o->prompt_file) || !o->logits_out) {
        fprintf(stderr, "faultline eval: -m, one of -p/-f, and --logits-out are required\n");
        return usage();
    }
    eng_args_finish("eval", &common);
    return -1;
}

/* Prompt in one batch, then greedy decode; fills r (tokens, logits, gen). */
static int run_eval(struct eng_session *s, const int32_t *prompt, int n_prompt,
                    const struct eval_opts *o, struct flref_logits *r, struct fl_err *err)
{
    const int nv = (int)eng_session_model(s)->hp.n_vocab;
    const int n_rows = n_prompt + (o->all_logits && o->n_gen > 1 ? o->n_gen - 1 : 0);
    r->n_vocab = nv;
    r->n_tokens = n_rows;
    r->n_gen = o->n_gen;
    r->tokens = malloc(sizeof(int32_t) * (size_t)n_rows);
    r->logits = malloc(sizeof(float) * (size_t)n_rows * nv);
    r->gen = malloc(sizeof(int32_t) * (size_t)(o->n_gen + 1));
    if (!r->tokens || !r->logits || !r->gen)
        return fl_err_set(err, -ENOMEM, "out of memory");
    memcpy(r->tokens, prompt, sizeof(int32_t) * (size_t)n_prompt);
    int rc = eng_session_eval(s, prompt, n_prompt, true, r->logits, err);
    const float *last = r->logits + (size_t)(n_prompt - 1) * nv;
    float *row = malloc(sizeof(float) * (size_t)nv);
    if (!rc && !row)
        rc = fl_err_set(err, -ENOMEM, "out of memory");
    for (int j = 0; !rc && j < o->n_gen; j++) {
        r->gen[j] = flref_argmax(last, nv);
        if (j + 1 == o->n_gen)
            break;
        rc = eng_session_eval(s, &r->gen[j], 1, false, row, err);
        if (o->all_logits) {
            r->tokens[n_prompt + j] = r->gen[j];
            memcpy(r->logits + (size_t)(n_prompt + j) * nv, row, sizeof(float) * (size_t)nv);
        }
        last = row;
    }
    free(row);
    return rc;
}

static int eval_main(const struct eval_opts *o, struct fl_err *err)
{
    size_t len = 0;
    char *file_text;
    const char *text = eng_prompt_text(o->prompt, o->prompt_file, &file_text, &len);
    if (!text)
        return 1;
    if (len == 0) {
        free(file_text);
        fprintf(stderr, "faultline eval: the prompt is empty\n");
        return 1;
    }
    struct eng_session_params sp = o->sp;
    struct eng_session *s = NULL;
    int32_t *ids = NULL;
    struct flref_logits r = { 0 };
    struct capture cap = { 0 };
    struct eng_routing_sink sink = { .ctx = &cap, .record = capture_record };
    struct fl_out lo = FL_OUT_NONE, ro = FL_OUT_NONE;
    const char *inputs[] = { o->sp.model_path, o->prompt_file };
    int n = 0, rc = fl_out_begin(&lo, o->logits_out, inputs, 2, o->sp.force, err);
    if (!rc && o->routing_out)
        rc = fl_out_begin(&ro, o->routing_out, inputs, 2, o->sp.force, err);
    if (!rc)
        rc = eng_session_open(&sp, &s, err);
    if (!rc)
        eng_args_check_ctx("eval", &o->sp, eng_session_model(s));
    if (!rc && (n = eng_tokenize_prompt(eng_session_tokenizer(s), text, len, false, &ids)) < 0)
        rc = n;
    else if (!rc && n == 0)
        rc = fl_err_set(err, -EINVAL, "the prompt tokenizes to nothing");
    else if (!rc && n + (o->n_gen > 1 ? o->n_gen - 1 : 0) > eng_session_n_ctx(s))
        rc = fl_err_set(err, -EINVAL, "prompt (%d tokens) + %d generated do not fit the context of %d (-c)",
                        n, o->n_gen, eng_session_n_ctx(s));
    if (!rc && o->routing_out) {
        cap.n_pos = n + (o->n_gen > 1 ? o->n_gen - 1 : 0);
        cap.n_layer = (int)eng_session_model(s)->hp.n_layer;
        cap.layer_used = calloc((size_t)cap.n_layer, sizeof(bool));
        eng_session_set_routing(s, &sink);
    }
    if (!rc)
        rc = run_eval(s, ids, n, o, &r, err);
    if (!rc)
        rc = flref_logits_write(lo.tmp, &r, err);
    if (!rc && o->routing_out)
        rc = cap.k ? write_routing(ro.tmp, &cap, err)
                   : fl_err_set(err, -EINVAL, "the model has no MoE layers: no routing to write");
    if (!rc)
        rc = fl_out_commit(&lo, err);
    if (!rc)
        rc = fl_out_commit(&ro, err);
    fl_out_abort(&lo);
    fl_out_abort(&ro);
    if (!rc)
        rc = eng_session_report(s, err);
    if (!rc)
        fprintf(stderr, "eval: %d prompt tokens, %d generated -> %s\n", n, o->n_gen, o->logits_out);
    flref_logits_free(&r);
    free(cap.layer_used);
    free(cap.ids);
    free(cap.w);
    free(ids);
    free(file_text);
    eng_session_close(s);
    return rc ? 1 : 0;
}

int cli_eval(int argc, char **argv)
{
    struct eval_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct fl_err err = { { 0 } };
    rc = eval_main(&o, &err);
    if (rc && err.msg[0])
        fprintf(stderr, "faultline eval: %s\n", err.msg);
    return rc;
}

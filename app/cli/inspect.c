/* inspect.c: `faultline inspect MODEL [--tensors] [--json]`: what a GGUF file
 * holds, from its header alone (so it is instant on files of any size): the
 * architecture and its hyperparameters, the tokenizer, tensor bytes by type
 * and the MoE layout that decides how much the pager moves per token. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "app/cli/commands.h"
#include "app/cli/inspect-model.h"
#include "gguf/gguf-keys.h"
#include "gguf/gguf.h"
#include "backend/cuda/gpu.h"
#include "gguf/tensor-types.h"
#include "base/units.h"
#include "plan/placement.h"

#define TEXT_ARR_MAX 16 /* array elements shown in text before summarising */

static void print_str(FILE *out, const char *s, uint64_t len, uint64_t max)
{
    for (uint64_t i = 0; i < len && i < max; i++)
        fputc((unsigned char)s[i] >= 0x20 && s[i] != 0x7f ? s[i] : '?', out);
    if (len > max)
        fputs("...", out);
}

/* GGUF strings may hold anything; one line each, and not too long. */
static void print_cstr(FILE *out, const char *s)
{
    print_str(out, s, strlen(s), 96);
}

/* The shortest %g form that reads back as v (as a float when single). */
static const char *shortest(double v, bool single, char buf[32])
{
    if (!isfinite(v)) {
        snprintf(buf, 32, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return buf;
    }
    for (int prec = single ? 6 : 15; prec <= (single ? 9 : 17); prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

static void print_scalar(FILE *out, const struct gguf_value *v)
{
    char buf[32];
    int64_t i;
    if (v->type == GGUF_VT_STRING)
        print_str(out, v->str.data, v->str.len, 96);
    else if (v->type == GGUF_VT_BOOL)
        fputs(v->b ? "true" : "false", out);
    else if (v->type == GGUF_VT_FLOAT32)
        fputs(shortest(v->f32, true, buf), out);
    else if (v->type == GGUF_VT_FLOAT64)
        fputs(shortest(v->f64, false, buf), out);
    else if (v->type == GGUF_VT_UINT64)
        fprintf(out, "%" PRIu64, v->u64);
    else if (!gguf_value_int(v, &i))
        fprintf(out, "%" PRId64, i);
}

static void print_value(FILE *out, const struct gguf_value *v)
{
    if (v->type != GGUF_VT_ARRAY) {
        print_scalar(out, v);
        return;
    }
    if (v->arr.n > TEXT_ARR_MAX || v->arr.type == GGUF_VT_ARRAY) {
        fprintf(out, "[%" PRIu64 " x %s]", v->arr.n, gguf_vtype_name(v->arr.type));
        return;
    }
    fputc('[', out);
    for (uint64_t i = 0; i < v->arr.n; i++) {
        struct gguf_value e;
        inspect_arr_elem(v, i, &e);
        fputs(i ? ", " : "", out);
        print_scalar(out, &e);
    }
    fputc(']', out);
}

static void print_size(FILE *out, uint64_t bytes)
{
    char buf[48];
    fprintf(out, "%" PRIu64 " bytes (%s)", bytes, fl_format_size(bytes, buf, sizeof(buf)));
}

static void text_header(FILE *out, const struct inspect_model *m)
{
    const struct gguf_file *f = m->f;
    fprintf(out, "file:             %s\n", gguf_name(f));
    fprintf(out, "format:           GGUF v%" PRIu32 ", header %" PRIu64 " bytes, data at %" PRIu64
            ", alignment %" PRIu64 "\n", gguf_version(f), gguf_header_size(f), gguf_data_offset(f),
            gguf_alignment(f));
    fprintf(out, "file size:        ");
    print_size(out, gguf_parts_bytes(f));
    for (int i = 0; gguf_n_parts(f) > 1 && i < gguf_n_parts(f); i++) {
        fprintf(out, "\n  part %d of %d:    %s, ", i + 1, gguf_n_parts(f), gguf_part(f, i)->path);
        print_size(out, gguf_part(f, i)->size);
    }
    fprintf(out, "\narchitecture:     ");
    print_cstr(out, m->arch ? m->arch : "(none)");
    fputc('\n', out);
    if (m->model_name) {
        fprintf(out, "name:             ");
        print_cstr(out, m->model_name);
        fputc('\n', out);
    }
}

static void text_hparams(FILE *out, const struct inspect_model *m)
{
    if (!m->arch)
        return;
    fprintf(out, "hyperparameters:\n");
    size_t n = strlen(m->arch);
    for (int64_t i = 0; i < gguf_n_kv(m->f); i++) {
        const char *key = gguf_kv_key(m->f, i);
        if (strncmp(key, m->arch, n) || key[n] != '.')
            continue;
        const struct gguf_key_info *k = gguf_key_info(m->arch, key);
        fputs("  ", out);
        print_str(out, key + n + 1, strlen(key + n + 1), 64);
        fprintf(out, "%*s", (int)(strlen(key + n + 1) < 40 ? 40 - strlen(key + n + 1) : 1), "");
        print_value(out, gguf_kv_value(m->f, i));
        if (k)
            fprintf(out, "  (%s)", k->label);
        fputc('\n', out);
    }
}

static void print_opt_int(FILE *out, const char *label, int64_t v)
{
    if (v >= 0)
        fprintf(out, ", %s %" PRId64, label, v);
}

static void text_tokenizer(FILE *out, const struct inspect_model *m)
{
    const struct inspect_tokenizer *t = &m->tok;
    fprintf(out, "tokenizer:        ");
    print_cstr(out, t->model ? t->model : "(none)");
    if (t->pre) {
        fprintf(out, ", pre ");
        print_cstr(out, t->pre);
    }
    print_opt_int(out, "vocab", t->n_vocab);
    print_opt_int(out, "merges", t->n_merges);
    print_opt_int(out, "bos", t->bos);
    print_opt_int(out, "eos", t->eos);
    fputc('\n', out);
}

static void text_types(FILE *out, const struct inspect_model *m)
{
    fprintf(out, "tensors:          %" PRId64 ", ", gguf_n_tensors(m->f));
    print_size(out, m->tensor_bytes);
    fputc('\n', out);
    for (int i = 0; i < m->n_types; i++) {
        fprintf(out, "  %-8s %6" PRId64 " tensors  ", fl_type_name(m->types[i].type), m->types[i].n_tensors);
        print_size(out, m->types[i].bytes);
        fputc('\n', out);
    }
}

static void text_moe_layers(FILE *out, const struct moe_layout *l)
{
    fprintf(out, "  layer  kind   experts  bytes/expert\n");
    for (int il = 0; il < l->n_layer; il++) {
        const struct moe_layer *ly = &l->layers[il];
        if (!ly->is_moe) {
            fprintf(out, "  %5d  %s\n", il, ly->is_nextn ? "nextn (not run)" : "dense");
            continue;
        }
        fprintf(out, "  %5d  %s %7d  ", il, ly->is_nextn ? "nextn " : "moe   ", ly->n_expert);
        print_size(out, ly->bytes_per_expert);
        fputc('\n', out);
    }
}

static void text_moe(FILE *out, const struct moe_layout *l)
{
    if (!l) {
        fprintf(out, "MoE:              (a later part of a split model: the first holds the "
                "metadata)\n");
        return;
    }
    if (!l->n_moe_layers) {
        fprintf(out, "MoE:              none (dense model, %d layers)\n", l->n_layer);
        return;
    }
    fprintf(out, "MoE:              %d experts per MoE layer, top-%d per token\n", l->n_expert,
            l->n_expert_used);
    fprintf(out, "  MoE layers:            %d of %d (leading dense layers: %d", l->n_moe_layers,
            l->n_layer, l->n_leading_dense);
    if (l->n_nextn)
        fprintf(out, "; %d nextn block%s, loaded but never run", l->n_nextn, l->n_nextn > 1 ? "s" : "");
    fprintf(out, ")\n");
    fprintf(out, "  expert bytes/token:    ");
    print_size(out, l->bytes_per_token);
    fprintf(out, "\n  expert bytes total:    ");
    print_size(out, l->expert_bytes);
    fprintf(out, "\n  non-expert bytes:      ");
    print_size(out, l->non_expert_bytes);
    fputc('\n', out);
    text_moe_layers(out, l);
}

static void text_tensors(FILE *out, const struct gguf_file *f)
{
    const bool split = gguf_n_parts(f) > 1; /* offsets are in each tensor's own file */
    fprintf(out, "%-40s %-7s %-22s %12s %12s%s\n", "name", "type", "shape", "offset", "bytes",
            split ? "  part" : "");
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        char shape[128], part[16] = "";
        size_t n = strlen(t->name);
        uint64_t off;
        const int k = gguf_part_at(f, t->offset, &off);
        if (split)
            snprintf(part, sizeof(part), "  %4d", k + 1);
        inspect_format_shape(t, shape, sizeof(shape));
        print_str(out, t->name, n, 96);
        fprintf(out, "%*s %-7s %-22s %12" PRIu64 " %12" PRIu64 "%s\n", n < 40 ? (int)(40 - n) : 0, "",
                fl_type_name(t->type), shape, off, t->nbytes, part);
    }
}

static void print_text(FILE *out, const struct inspect_model *m, bool tensors)
{
    text_header(out, m);
    text_hparams(out, m);
    text_tokenizer(out, m);
    text_types(out, m);
    text_moe(out, m->moe);
    if (m->n_rs_layers) {
        fprintf(out, "linear attention: %d %s layers, recurrent state ", m->n_rs_layers,
                m->rs_kind);
        print_size(out, m->rs_bytes_per_seq);
        fprintf(out, " per sequence\n");
    }
    if (m->n_indexer_layers && m->indexer_block > 0)
        fprintf(out, "sparse attention: MiniMax's block selection in %d layers, each query reads "
                     "its top %lld blocks of %lld positions\n", m->n_indexer_layers,
                (long long)m->indexer_top_k, (long long)m->indexer_block);
    else if (m->n_indexer_layers)
        fprintf(out, "sparse attention: a lightning indexer in %d layers, each query reads its "
                     "top %lld positions\n", m->n_indexer_layers, (long long)m->indexer_top_k);
    if (tensors)
        text_tensors(out, m->f);
}

static int usage(FILE *out, int rc)
{
    fprintf(out, "usage: faultline inspect MODEL.gguf [--tensors] [--json] [--plan [--verbose] [placement flags]]\n"
                 "  --tensors  also list every tensor (name, type, shape, offset, bytes)\n"
                 "  --json     print one JSON document instead of text\n"
                 "  --plan     where each tensor would live (gpu/ram/disk) under the placement flags,\n"
                 "             the bytes per tier and whether the plan fits; --verbose names the rule\n"
                 "             that placed each tensor. Loads no weights.\n");
    placement_print_usage(out);
    return rc;
}

/* `inspect --plan`: the placement plan for this machine, from the header alone. */
static int print_plan(const char *path, const struct placement_options *o)
{
    struct gguf_file *f = NULL;
    struct placement_plan *plan = NULL;
    struct placement_host host;
    struct fl_err err = { { 0 } };
    const char *no_gpu = NULL;
    placement_host_detect(&host);
    /* the same detection the session makes, so the plan shown is the one run */
    host.have_gpu = eng_gpu_detect(&host.vram_available, &no_gpu);
    int rc = gguf_open(path, &f, &err);
    if (!rc)
        rc = placement_plan_build(f, o, &host, &plan, &err);
    if (rc) {
        fprintf(stderr, "faultline inspect: %s\n", err.msg);
        gguf_close(f);
        return 1;
    }
    placement_print(plan, f, stdout, o->verbose);
    placement_plan_free(plan);
    gguf_close(f);
    return 0;
}

int cli_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool tensors = false, json = false, plan = false;
    struct placement_options popts;
    placement_options_init(&popts);
    for (int i = 1; i < argc; i++) {
        struct fl_err perr = { { 0 } };
        int taken = placement_parse_flag(&popts, argc, argv, &i, &perr);
        if (taken < 0) {
            fprintf(stderr, "faultline inspect: %s\n", perr.msg);
            return 2; /* a command-line mistake */
        }
        if (taken)
            continue;
        if (!strcmp(argv[i], "--plan"))
            plan = true;
        else if (!strcmp(argv[i], "--tensors"))
            tensors = true;
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return usage(stdout, 0);
        else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "faultline inspect: unexpected argument '%s' (see faultline inspect --help)\n",
                    argv[i]);
            return 2;
        } else
            path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "faultline inspect: no MODEL given (see faultline inspect --help)\n");
        return 2;
    }
    if (plan)
        return print_plan(path, &popts);
    struct inspect_model m;
    struct fl_err err = { { 0 } };
    if (inspect_model_load(path, &m, &err)) {
        fprintf(stderr, "faultline inspect: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (json)
        rc = inspect_print_json(stdout, &m, tensors);
    else
        print_text(stdout, &m, tensors);
    inspect_model_free(&m);
    if (rc || fflush(stdout) || ferror(stdout)) {
        fprintf(stderr, "faultline inspect: writing the output failed\n");
        return 1;
    }
    return 0;
}

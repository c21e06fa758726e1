/* compare.c: `faultline compare REF.flrf OURS.flrf [--routing REF.flrt OURS.flrt]`
 * — how close two logits files (and optionally their expert routing) are:
 * per position max|delta|, KL(ref||ours) and top-1 agreement, the greedy
 * continuation up to the first near-tie, and every (position, layer) whose
 * expert set differs. --max-kl / --min-top1 make it a pass/fail check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/commands.h"
#include "app/cli/engine-args.h"
#include "record/flref.h"

struct cmp_opts {
    const char *ref, *ours, *ref_rt, *ours_rt;
    float max_kl, min_top1, near_tie;
    bool quiet;
};

static int usage(void)
{
    fprintf(stderr,
            "usage: faultline compare REF.flrf OURS.flrf [--routing REF.flrt OURS.flrt]\n"
            "                         [--max-kl X] [--min-top1 Y] [--near-tie 0.1] [-q]\n"
            "--max-kl: fail when the mean KL(ref||ours) over the prompt exceeds X (nats);\n"
            "--min-top1: fail when top-1 agreement is below Y (a fraction, 0..1);\n"
            "either also fails when the greedy tokens differ before a near-tie.\n");
    return 2;
}

static int parse(int argc, char **argv, struct cmp_opts *o)
{
    *o = (struct cmp_opts){ .max_kl = -1, .min_top1 = -1, .near_tie = 0.1f };
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage() & 0;
        else if (!strcmp(a, "--routing"))
            ok = eng_arg_str("compare", argc, argv, &i, &o->ref_rt) &&
                 eng_arg_str("compare", argc, argv, &i, &o->ours_rt);
        else if (!strcmp(a, "--max-kl"))
            ok = eng_arg_float("compare", argc, argv, &i, 0, 1e9, &o->max_kl);
        else if (!strcmp(a, "--min-top1"))
            ok = eng_arg_float("compare", argc, argv, &i, 0, 1, &o->min_top1);
        else if (!strcmp(a, "--near-tie"))
            ok = eng_arg_float("compare", argc, argv, &i, 0, 1e9, &o->near_tie);
        else if (!strcmp(a, "-q"))
            o->quiet = true;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "faultline compare: unknown option '%s'\n", a);
            ok = false;
        } else if (npos < 2) {
            *(npos++ ? &o->ours : &o->ref) = a;
        } else {
            fprintf(stderr, "faultline compare: unexpected argument '%s'\n", a);
            ok = false;
        }
        if (!ok)
            return 2;
    }
    return npos == 2 ? -1 : usage();
}

static void print_positions(const struct flref_logits *ref, const struct flref_logits *ours,
                            const struct flref_cmp *c)
{
    printf("pos  token   max|d|      KL(ref||ours)  top1 ref/ours\n");
    for (int p = 0; p < c->n_pos; p++) {
        const float *a = ref->logits + (size_t)p * ref->n_vocab;
        const float *b = ours->logits + (size_t)p * ours->n_vocab;
        printf("%3d  %6d  %-10.4g  %-13.3g  %d/%d%s\n", p, ref->tokens[p], c->pos_max_abs[p],
               c->pos_kl[p], flref_argmax(a, ref->n_vocab), flref_argmax(b, ours->n_vocab),
               c->pos_top1[p] ? "" : "  DIFFERENT");
    }
}

static void print_summary(const struct flref_cmp *c)
{
    printf("logits: %d positions, max|d| %.4g, mean|d| %.4g, KL mean %.3g median %.3g max %.3g, "
           "top-1 %d/%d (%.1f%%)\n",
           c->n_pos, c->max_abs, c->mean_abs, c->mean_kl, c->median_kl, c->max_kl, c->top1_agree,
           c->n_pos, 100.0 * c->top1_agree / c->n_pos);
    if (c->gen_same == c->n_gen)
        printf("greedy: %d/%d identical\n", c->gen_same, c->n_gen);
    else
        printf("greedy: identical for %d/%d, then differ %s\n", c->gen_same, c->n_gen,
               c->gen_near_tie ? "at a near-tie (accepted)" : "WITHOUT a near-tie");
}

static void print_diff(void *arg, int pos, int layer, const int32_t *a, const int32_t *b, int k)
{
    (void)arg;
    printf("routing differs: position %d layer %d: ref {", pos, layer);
    for (int i = 0; i < k; i++)
        printf("%s%d", i ? "," : "", a[i]);
    printf("} ours {");
    for (int i = 0; i < k; i++)
        printf("%s%d", i ? "," : "", b[i]);
    printf("}\n");
}

/* Routing positions past a greedy divergence had different inputs. */
static int compare_routing(const struct cmp_opts *o, const struct flref_cmp *c, int n_prompt)
{
    struct flref_routing ra = { 0 }, rb = { 0 };
    struct fl_err err = { { 0 } };
    int rc = flref_routing_read(o->ref_rt, &ra, &err);
    if (!rc)
        rc = flref_routing_read(o->ours_rt, &rb, &err);
    int n = 0;
    if (!rc) {
        const int max_pos = n_prompt + c->gen_same;
        n = flref_routing_diff(&ra, &rb, max_pos, print_diff, NULL, &err);
        if (n >= 0)
            printf("routing: %d of %d (position, layer) expert sets differ\n", n,
                   (max_pos < ra.n_pos ? max_pos : ra.n_pos) * ra.n_layers);
        rc = n < 0 ? n : 0;
    }
    if (rc)
        fprintf(stderr, "faultline compare: %s\n", err.msg);
    flref_routing_free(&ra);
    flref_routing_free(&rb);
    return rc;
}

int cli_compare(int argc, char **argv)
{
    struct cmp_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct flref_logits ref = { 0 }, ours = { 0 };
    struct flref_cmp c = { 0 };
    struct fl_err err = { { 0 } };
    rc = flref_logits_read(o.ref, &ref, &err);
    if (!rc)
        rc = flref_logits_read(o.ours, &ours, &err);
    if (!rc)
        rc = flref_compare(&ref, &ours, o.near_tie, &c, &err);
    int status = 0;
    if (rc) {
        fprintf(stderr, "faultline compare: %s\n", err.msg);
        status = 2;
    } else {
        if (!o.quiet)
            print_positions(&ref, &ours, &c);
        print_summary(&c);
        if (o.ref_rt && compare_routing(&o, &c, ref.n_tokens))
            status = 2;
        bool check = o.max_kl >= 0 || o.min_top1 >= 0;
        bool fail = (o.max_kl >= 0 && !(c.mean_kl <= o.max_kl)) ||
                    (o.min_top1 >= 0 && (double)c.top1_agree / c.n_pos < o.min_top1) ||
                    (check && !c.gen_ok);
        if (check)
            printf("%s\n", fail ? "FAIL" : "PASS");
        if (fail && !status)
            status = 1;
    }
    flref_cmp_free(&c);
    flref_logits_free(&ref);
    flref_logits_free(&ours);
    return status;
}

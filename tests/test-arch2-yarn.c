/* test-arch2-yarn.c: YaRN rope tables, llama.cpp's attention factors and the
 * SwiGLU-OAI activation, each checked against an independent double-precision
 * evaluation of the published formulas (ggml rope_yarn / llama-context.cpp /
 * ggml_swiglu_oai), and the rope settings read from the reference GGUFs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/activation.h"
#include "model/moe-route.h"
#include "model/yarn.h"
#include "tests/check.h"

static double corr_dim_d(int n_dims, int ctx, double beta, double base)
{
    return n_dims * log(ctx / (beta * 2 * M_PI)) / (2 * log(base));
}

static void test_corr_dims(void)
{
    const struct { int n; int ctx; double base; } c[] = {
        { 16, 4096, 1e4 }, { 32, 4096, 150000 }, { 128, 8192, 5e5 }, { 64, 2048, 1e4 },
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        float dims[2];
        yarn_corr_dims(c[i].n, c[i].ctx, (float)c[i].base, 32, 1, dims);
        double lo = fmax(0, floor(corr_dim_d(c[i].n, c[i].ctx, 32, c[i].base)));
        double hi = fmin(c[i].n - 1, ceil(corr_dim_d(c[i].n, c[i].ctx, 1, c[i].base)));
        CHECK(dims[0] == lo && dims[1] == hi, "corr dims n=%d: got %g..%g want %g..%g", c[i].n,
              dims[0], dims[1], lo, hi);
    }
    printf("corr dims: ok\n");
}

/* Expected (angle, magnitude) of pair i at pos, straight from the YaRN
 * definition, in double. */
static void expect_pair(const struct yarn_params *p, const float dims[2], int pos, int i,
                        double *theta, double *mag)
{
    double extrap = pos * pow(p->freq_base, -2.0 * i / p->n_dims);
    double interp = p->freq_scale * extrap;
    *theta = interp;
    *mag = p->attn_factor;
    if (p->ext_factor != 0) {
        double y = (i - dims[0]) / fmax(0.001, dims[1] - dims[0]);
        double mix = (1 - fmin(1, fmax(0, y))) * p->ext_factor;
        *theta = interp * (1 - mix) + extrap * mix;
        *mag *= 1 + 0.1 * log(1 / p->freq_scale);
    }
}

static void check_table(const char *what, const struct yarn_params *p)
{
    struct yarn_rope r;
    CHECK(yarn_rope_init(&r, p) == 0, "%s: init", what);
    const int n_pos = 300, pos0 = 1700;
    float *cs = malloc(sizeof(float) * p->n_dims * n_pos);
    int32_t pos[300];
    for (int t = 0; t < n_pos; t++)
        pos[t] = pos0 + t;
    yarn_rope_table(&r, cs, pos, n_pos);
    double worst = 0;
    for (int t = 0; t < n_pos; t++) {
        for (int i = 0; i < p->n_dims / 2; i++) {
            double th, mag;
            expect_pair(p, r.corr_dims, pos0 + t, i, &th, &mag);
            double dc = fabs(cs[t * p->n_dims + 2 * i] - mag * cos(th));
            double ds = fabs(cs[t * p->n_dims + 2 * i + 1] - mag * sin(th));
            worst = fmax(worst, fmax(dc, ds) / mag);
        }
    }
    /* float angles of ~2000 rad carry ~1e-4 absolute error (ggml's too) */
    CHECK(worst < 2e-3, "%s: table deviates by %g", what, worst);
    printf("%s: table max deviation %.2e\n", what, worst);
    free(cs);
}

static void test_tables(void)
{
    struct yarn_params plain = { 32, 4096, 1e6f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f };
    check_table("plain rope", &plain);
    struct yarn_params linear = { 32, 4096, 1e4f, 0.25f, 0.0f, 1.0f, 32.0f, 1.0f };
    check_table("linear scaling", &linear);
    struct yarn_params ds = { 16, 4096, 1e4f, 1.0f / 40, 1.0f, 0.8f, 32.0f, 1.0f };
    check_table("yarn deepseek2-like", &ds);
    struct yarn_params oss = { 32, 4096, 150000.0f, 1.0f / 32, 1.0f, 1.0f, 32.0f, 1.0f };
    check_table("yarn gpt-oss-like", &oss);
    struct yarn_params bad = { 15, 4096, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f };
    struct yarn_rope r;
    CHECK(yarn_rope_init(&r, &bad) < 0, "odd n_dims accepted");
}

static void test_factors(void)
{
    /* deepseek2: log_mul 1 (0.1 in the file, /0.1): mscale pair cancels and
     * only the rope's (1 + 0.1 ln f) compensation remains to undo. */
    double want = 1.0 / (1.0 + 0.1 * log(40.0));
    float got = yarn_context_attn_factor(40.0f, 1.0f, 1.0f, 1.0f, true);
    CHECK(fabs(got - want) < 1e-6, "ds2 attn factor %g want %g", got, want);
    /* gpt-oss: no log_mul -> get_mscale(32, 1) / (1 + 0.1 ln 32) = 1 */
    got = yarn_context_attn_factor(32.0f, 1.0f, 0.0f, 1.0f, false);
    CHECK(fabs(got - 1.0) < 1e-6, "gpt-oss attn factor %g want 1", got);
    /* deepseek2 with mscale == mscale_all_dim = 0.707 (V2-Lite style) */
    double ms = 0.1 * 0.707 * log(40.0) + 1.0;
    want = ms / ms / (1.0 + 0.1 * log(40.0));
    got = yarn_context_attn_factor(40.0f, 1.0f, 0.707f, 1.0f, true);
    CHECK(fabs(got - want) < 1e-6, "ds2 lite attn factor %g want %g", got, want);
    /* non-deepseek with log_mul: get_mscale(f,1)/get_mscale(f,lm)/(1+0.1 ln f) */
    want = (0.1 * log(16.0) + 1) / (0.1 * 0.5 * log(16.0) + 1) / (1 + 0.1 * log(16.0)) * 2.0;
    got = yarn_context_attn_factor(16.0f, 1.0f, 0.5f, 2.0f, false);
    CHECK(fabs(got - want) < 1e-6, "generic attn factor %g want %g", got, want);
    got = yarn_context_attn_factor(16.0f, 0.0f, 0.5f, 3.0f, false);
    CHECK(got == 3.0f, "no-yarn attn factor %g want 3", got);

    struct yarn_params p = { 16, 4096, 1e4f, 1.0f / 40, 1.0f, (float)(1.0 / (1.0 + 0.1 * log(40.0))),
                             32, 1 };
    double mscale = 1.0 * (1.0 + 0.1 * 1.0 * log(40.0));
    want = mscale * mscale / sqrt(48.0);
    got = yarn_deepseek2_kq_scale(&p, 1.0f, 48);
    CHECK(fabs(got - want) < 1e-6, "ds2 kq scale %g want %g", got, want);
    printf("attention factors: ok\n");
}

static void test_gguf(const char *path, const char *arch, int n_dims, float base, float scale,
                      float ext, double attn, float log_mul)
{
    struct gguf_file *f;
    struct fl_err err = { "" };
    if (gguf_open(path, &f, &err) < 0) {
        CHECK(0, "open %s: %s", path, err.msg);
        return;
    }
    struct yarn_params p;
    float lm = -1;
    int rc = yarn_from_gguf(f, arch, n_dims, NULL, &p, &lm, &err);
    CHECK(rc == 0, "%s: %s", path, err.msg);
    if (rc == 0) {
        CHECK(p.freq_base == base && fabsf(p.freq_scale - scale) < 1e-9f && p.ext_factor == ext &&
                  p.n_ctx_orig == 4096 && p.beta_fast == 32 && p.beta_slow == 1,
              "%s: base %g scale %g ext %g ctx %d", path, p.freq_base, p.freq_scale, p.ext_factor,
              p.n_ctx_orig);
        CHECK(fabs(p.attn_factor - attn) < 1e-6, "%s: attn factor %g want %g", path,
              p.attn_factor, attn);
        CHECK(fabsf(lm - log_mul) < 1e-6f, "%s: log_mul %g want %g", path, lm, log_mul);
    }
    CHECK(yarn_from_gguf(f, arch, 15, NULL, &p, NULL, &err) < 0, "%s: odd dims accepted", path);
    gguf_close(f);
    printf("%s: rope settings ok\n", path);
}

static void test_swiglu_oai(void)
{
    const float g[] = { -20, -3, -0.5f, 0, 0.25f, 2, 6.9f, 7, 7.5f, 100 };
    const float u[] = { -9, -7, -6.5f, 0, 1, -0.3f, 8, 7, 3, -100 };
    float out[10];
    eng_swiglu_oai(g, u, out, 10, 1.702f, 7.0f);
    for (int i = 0; i < 10; i++) {
        double x = fmin(g[i], 7.0), y = fmax(-7.0, fmin(u[i], 7.0));
        double want = x / (1 + exp(-1.702 * x)) * (y + 1);
        CHECK(fabs(out[i] - want) <= 1e-5 * fmax(1, fabs(want)), "swiglu_oai(%g,%g) = %g want %g",
              g[i], u[i], out[i], want);
    }
    float gate[10];
    for (int i = 0; i < 10; i++)
        gate[i] = g[i];
    eng_swiglu_oai(gate, u, gate, 10, 1.702f, 7.0f);
    for (int i = 0; i < 10; i++)
        CHECK(gate[i] == out[i], "in-place form differs at %d", i);
    printf("swiglu_oai: ok\n");
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Group masks against a sort-based evaluation of the definition. */
static void test_group_mask(void)
{
    /* 4 groups of 4: sums of the two best are 1.5, 0.3, 1.9, 1.0 -> groups 2, 0 */
    const float sel[16] = { 1.0f, 0.5f, 0.1f, 0.0f,  0.1f, 0.2f, 0.0f, 0.0f,
                            0.9f, 0.2f, 1.0f, 0.3f,  0.9f, 0.1f, 0.0f, 0.1f };
    float mask[16];
    eng_moe_group_mask(sel, 16, 4, 2, mask);
    for (int e = 0; e < 16; e++) {
        int allowed = e / 4 == 0 || e / 4 == 2;
        CHECK(allowed ? mask[e] == 0.0f : isinf(mask[e]) && mask[e] < 0, "mask[%d] = %g", e,
              mask[e]);
    }
    uint32_t s = 12345;
    for (int trial = 0; trial < 200; trial++) {
        const int groups = 2 + trial % 7, per = 2 + trial % 5, n = groups * per;
        const int used = 1 + trial % groups;
        float v[64], m[64], gs[16], sorted[16];
        for (int i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            v[i] = (float)(s >> 8) / 16777216.0f;
        }
        eng_moe_group_mask(v, n, groups, used, m);
        for (int g = 0; g < groups; g++) {
            float tmp[8];
            for (int i = 0; i < per; i++)
                tmp[i] = v[g * per + i];
            qsort(tmp, per, sizeof(float), cmp_desc);
            gs[g] = sorted[g] = tmp[0] + tmp[1];
        }
        qsort(sorted, groups, sizeof(float), cmp_desc);
        for (int e = 0; e < n; e++) {
            int allowed = gs[e / per] >= sorted[used - 1];
            CHECK(allowed == (m[e] == 0.0f), "trial %d: expert %d mask %g", trial, e, m[e]);
        }
    }
    printf("group mask: ok\n");
}

int main(void)
{
    test_corr_dims();
    test_tables();
    test_factors();
    test_gguf("tests/data/deepseek2-tiny-F16.gguf", "deepseek2", 16, 1e4f, 1.0f / 40, 1.0f,
              1.0 / (1.0 + 0.1 * log(40.0)), 1.0f);
    test_gguf("tests/data/gpt-oss-tiny-MXFP4.gguf", "gpt-oss", 32, 150000.0f, 1.0f / 32, 1.0f,
              1.0, 0.0f);
    test_gguf("tests/data/qwen3moe-tiny-F16.gguf", "qwen3moe", 32, 1e6f, 1.0f, 0.0f, 1.0, 0.0f);
    test_swiglu_oai();
    test_group_mask();
    return check_summary("test-arch2-yarn");
}

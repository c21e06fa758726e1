/* test-engine-ops: the forward-pass building blocks against values worked
 * out by hand or by plain double-precision references written here, and the
 * MoE layer's contract with an expert source (prefetch/acquire/release). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/cpu-ops.h"
#include "backend/cpu/indexer.h"
#include "backend/cpu/threadpool.h"
#include "model/kv-cache.h"
#include "model/moe-route.h"
#include "model/yarn.h"
#include "tests/check.h"

static bool near(double a, double b, double tol)
{
    return fabs(a - b) <= tol * (1.0 + fabs(b));
}

static void test_rmsnorm_softmax(void)
{
    float x[2] = { 3, 4 }, y[2], w[2] = { 2, 0.5f };
    cpu_rmsnorm(y, x, w, 2, 0.0f);
    /* mean of squares 12.5, rms 3.5355339 */
    CHECK(near(y[0], 2 * 3 / 3.5355339, 1e-6) && near(y[1], 0.5 * 4 / 3.5355339, 1e-6),
          "rmsnorm gave %g %g", y[0], y[1]);
    float s[3] = { 0, logf(3), -INFINITY };
    eng_softmax(s, 3);
    CHECK(near(s[0], 0.25, 1e-6) && near(s[1], 0.75, 1e-6) && s[2] == 0, "softmax gave %g %g %g",
          s[0], s[1], s[2]);
    float g[2] = { 0, 2 }, u[2] = { 5, 3 };
    cpu_swiglu(g, u, 2);
    CHECK(g[0] == 0 && near(g[1], 2 / (1 + exp(-2.0)) * 3, 1e-6), "swiglu gave %g %g", g[0], g[1]);
    /* LayerNorm of 1, 2, 3, 6: mean 3, variance 3.5 */
    float xl[4] = { 1, 2, 3, 6 }, yl[4], wl[4] = { 1, 2, 1, 1 }, bl[4] = { 0, 0, 1, -1 };
    cpu_layernorm(yl, xl, wl, bl, 4, 0.0f);
    const double sd = sqrt(3.5);
    CHECK(near(yl[0], -2 / sd, 1e-6) && near(yl[1], 2 * -1 / sd, 1e-6) && near(yl[2], 1, 1e-6) &&
              near(yl[3], 3 / sd - 1, 1e-6),
          "layernorm gave %g %g %g %g", yl[0], yl[1], yl[2], yl[3]);
    printf("rmsnorm, layernorm, softmax, swiglu: checked\n");
}

/* A rope table with no scaling (yarn_rope_cache at scale 1, no YaRN mix). */
static void rope_cache(float *cs, int n_dims, float base, int32_t pos)
{
    struct yarn_rope r;
    const struct yarn_params p = { .n_dims = n_dims, .n_ctx_orig = 4096, .freq_base = base,
                                   .freq_scale = 1.0f, .attn_factor = 1.0f, .beta_fast = 32.0f,
                                   .beta_slow = 1.0f };
    CHECK(yarn_rope_init(&r, &p) == 0, "rope init");
    yarn_rope_cache(&r, pos, cs);
}

static void test_rope(void)
{
    float cs[4];
    /* position 1, base 10000, 4 rotated dims: pair 0 angle 1, pair 1 angle 10000^-0.5 */
    rope_cache(cs, 4, 10000.0f, 1);
    float x[4] = { 1, 1, 0, 0 };
    cpu_rope(x, 1, 4, 4, ENG_ROPE_NEOX, cs);
    CHECK(near(x[0], cos(1.0), 1e-6) && near(x[2], sin(1.0), 1e-6) && near(x[1], cos(0.01), 1e-6) &&
              near(x[3], sin(0.01), 1e-5),
          "neox rope gave %g %g %g %g", x[0], x[1], x[2], x[3]);
    float y[6] = { 1, 0, 0, 1, 7, 8 }; /* 2 rotated pairs + 2 dims left alone */
    rope_cache(cs, 4, 10000.0f, 1);
    cpu_rope(y, 1, 6, 4, ENG_ROPE_NORM, cs);
    CHECK(near(y[0], cos(1.0), 1e-6) && near(y[1], sin(1.0), 1e-6) && near(y[2], -sin(0.01), 1e-5) &&
              near(y[3], cos(0.01), 1e-6) && y[4] == 7 && y[5] == 8,
          "norm rope gave %g %g %g %g %g %g", y[0], y[1], y[2], y[3], y[4], y[5]);
    printf("rope NORM/NEOX: checked\n");
}

static void test_routing(void)
{
    int32_t ids[2];
    float w[2];
    float l1[4] = { 1, 3, 2, 3 };
    struct eng_route r = { .n_expert = 4, .k = 2, .gating = ENG_GATING_SOFTMAX, .norm = true };
    eng_moe_route(l1, 1, &r, ids, w);
    CHECK(ids[0] == 1 && ids[1] == 3 && near(w[0], 0.5, 1e-6) && near(w[1], 0.5, 1e-6),
          "softmax top-2 of a tie gave %d %d (%g %g)", ids[0], ids[1], w[0], w[1]);
    /* sigmoid gating: the bias decides the choice, the weights stay unbiased */
    float l2[4] = { 0, 1, 2, -1 };
    const float bias[4] = { 0, 0, -5, 10 };
    const struct eng_tensor tb = { .name = "bias", .data = (const uint8_t *)bias,
                                   .type = FL_TYPE_F32, .n_dims = 1, .ne = { 4, 1, 1, 1 } };
    r = (struct eng_route){ .n_expert = 4, .k = 2, .gating = ENG_GATING_SIGMOID, .norm = false,
                            .scale = 2.5f, .sel_bias = &tb };
    eng_moe_route(l2, 1, &r, ids, w);
    const double s1 = 1 / (1 + exp(1.0)), s2 = 1 / (1 + exp(-1.0));
    CHECK(ids[0] == 3 && ids[1] == 1 && near(w[0], 2.5 * s1, 1e-6) && near(w[1], 2.5 * s2, 1e-6),
          "sigmoid+bias gave %d %d (%g %g)", ids[0], ids[1], w[0], w[1]);
    float l3[4] = { 0, 1, 2, -1 };
    r = (struct eng_route){ .n_expert = 4, .k = 2, .gating = ENG_GATING_SOFTMAX_WEIGHT };
    eng_moe_route(l3, 1, &r, ids, w);
    CHECK(ids[0] == 2 && ids[1] == 1 && near(w[0], 1 / (1 + exp(-1.0)), 1e-6),
          "softmax-weight gave %d %d (%g %g)", ids[0], ids[1], w[0], w[1]);
    printf("routing (softmax/sigmoid/softmax-weight, bias, norm, scale, ties): checked\n");
}

/* A tiny model shell: n_layer layers with the given KV row widths. */
static struct eng_model *fake_model(int n_layer, int64_t kdim, int64_t vdim)
{
    struct eng_model *m = calloc(1, sizeof(*m));
    m->hp.n_layer = n_layer;
    m->kv_k_dim = calloc((size_t)n_layer, sizeof(int64_t));
    m->kv_v_dim = calloc((size_t)n_layer, sizeof(int64_t));
    for (int l = 0; l < n_layer; l++) {
        m->kv_k_dim[l] = kdim;
        m->kv_v_dim[l] = vdim;
    }
    return m;
}

static void free_fake(struct eng_model *m)
{
    free(m->kv_k_dim);
    free(m->kv_v_dim);
    free(m);
}

static float rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float f16r(float x)
{
    return fl_f16_to_f32(fl_f32_to_f16(x));
}

/* Whether query t reads position kp under p's selection (DSA). */
static bool selected(const struct eng_attn *p, int t, int kp)
{
    if (!p->sel || p->sel->n[t] < 0)
        return true;
    for (int i = 0; i < p->sel->n[t]; i++)
        if (p->sel->pos[t * p->sel->stride + i] == kp)
            return true;
    return false;
}

/* Plain softmax attention in double over F16-rounded q, k, v. */
static void ref_attention(const float *q, const float *k, const float *v, int qpos,
                          const struct eng_attn *p, const float *sinks, int h, int64_t kdim,
                          int64_t vdim, double *out)
{
    const int kvh = h / (p->n_head / p->n_head_kv);
    double s[256], max = -INFINITY, sum = 0;
    for (int kp = 0; kp <= qpos; kp++) {
        s[kp] = -INFINITY;
        if ((p->window && qpos - kp >= p->window) || !selected(p, qpos, kp))
            continue;
        double d = 0;
        for (int64_t i = 0; i < p->dk; i++)
            d += (double)f16r(q[h * p->dk + i]) * f16r(k[kp * kdim + kvh * p->dk + i]);
        s[kp] = d * p->scale;
        max = s[kp] > max ? s[kp] : max;
    }
    if (sinks && sinks[h] > max)
        max = sinks[h];
    for (int64_t d = 0; d < p->dv; d++)
        out[d] = 0;
    for (int kp = 0; kp <= qpos; kp++) {
        const double e = exp(s[kp] - max);
        sum += e;
        for (int64_t d = 0; d < p->dv; d++)
            out[d] += e * f16r(v[kp * vdim + kvh * p->dv + d]);
    }
    if (sinks)
        sum += exp(sinks[h] - max);
    for (int64_t d = 0; d < p->dv; d++)
        out[d] /= sum;
}

static void check_attention(struct eng_ctx *c, int n_tok, int window, const float *sinks,
                            const struct eng_attn_sel *sel)
{
    enum { NH = 4, NKV = 2, DK = 32, DV = 16 };
    const int64_t kdim = NKV * DK, vdim = NKV * DV;
    unsigned seed = 7 + (unsigned)n_tok;
    float *q = malloc(sizeof(float) * n_tok * NH * DK), *k = malloc(sizeof(float) * n_tok * kdim);
    float *v = malloc(sizeof(float) * n_tok * vdim), *o = malloc(sizeof(float) * n_tok * NH * DV);
    for (int i = 0; i < n_tok * NH * DK; i++)
        q[i] = rnd(&seed);
    for (int i = 0; i < n_tok * kdim; i++)
        k[i] = rnd(&seed);
    for (int i = 0; i < n_tok * vdim; i++)
        v[i] = rnd(&seed);
    static int32_t toks[512];
    const struct eng_batch in = { .tokens = toks, .n_tok = n_tok, .pos0 = 0 };
    struct eng_batch b;
    struct fl_err err;
    eng_arena_reset(c->arena);
    CHECK(eng_batch_prepare(c, &in, &b, &err) == 0, "batch: %s", err.msg);
    eng_kv_write(c->kv, 0, b.cell, n_tok, k, v);
    const struct eng_tensor ts = { .name = "sinks", .data = (const uint8_t *)sinks,
                                   .type = FL_TYPE_F32, .n_dims = 1, .ne = { NH, 1, 1, 1 } };
    const struct eng_attn p = { .n_head = NH, .n_head_kv = NKV, .dk = DK, .dv = DV, .k_stride = DK,
                                .v_stride = DV, .scale = 0.7f, .window = window,
                                .sinks = sinks ? &ts : NULL, .sel = sel };
    cpu_attention(c, 0, &b, q, NH * DK, &p, o, NH * DV);
    double worst = 0, ref[DV];
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < NH; h++) {
            ref_attention(q + t * NH * DK, k, v, t, &p, sinks, h, kdim, vdim, ref);
            for (int d = 0; d < DV; d++) {
                const double e = fabs(o[(t * NH + h) * DV + d] - ref[d]);
                worst = e > worst ? e : worst;
            }
        }
    /* the short-batch kernel accumulates V in F16: ~1e-3 relative */
    CHECK(worst < 4e-3, "attention n_tok %d window %d sinks %d sel %d: max error %g", n_tok,
          window, sinks != NULL, sel != NULL, worst);
    printf("attention n_tok %3d window %2d sinks %d sel %d: max |error| %.2g vs double reference\n",
           n_tok, window, sinks != NULL, sel != NULL, worst);
    free(q);
    free(k);
    free(v);
    free(o);
}

static void test_attention(struct fl_pool *pool)
{
    struct eng_model *m = fake_model(1, 2 * 32, 2 * 16);
    struct eng_ctx c = { .m = m, .pool = pool, .cpu = &eng_cpu_backend, .be = &eng_cpu_backend };
    struct fl_err err;
    CHECK(eng_kv_create(m, 128, 1, FL_TYPE_F16, FL_TYPE_F16, &c.kv, &err) == 0, "kv create");
    /* one layer, K rows of 2*32 and V rows of 2*16 halves, 128 positions */
    CHECK(eng_kv_bytes(c.kv) == 128u * (2 * 32 + 2 * 16) * 2, "kv bytes %llu",
          (unsigned long long)eng_kv_bytes(c.kv));
    CHECK(eng_arena_create(&c.arena) == 0, "arena");
    const float sinks[4] = { 0.5f, -1.0f, 2.0f, 0.0f };
    check_attention(&c, 1, 0, NULL, NULL);
    check_attention(&c, 9, 0, NULL, NULL);
    check_attention(&c, 9, 4, sinks, NULL);
    check_attention(&c, 70, 0, NULL, NULL); /* the F32 (tiled) kernel */
    check_attention(&c, 70, 16, sinks, NULL);
    /* DSA's selection: from position 6 on, every third position and its own */
    static int32_t pos[70 * 32], n[70];
    for (int t = 0; t < 70; t++) {
        n[t] = t < 6 ? -1 : 0;
        for (int kp = 0; t >= 6 && kp <= t; kp++)
            if (kp % 3 == 0 || kp == t)
                pos[t * 32 + n[t]++] = kp;
    }
    const struct eng_attn_sel sel = { .pos = pos, .n = n, .stride = 32 };
    check_attention(&c, 9, 0, NULL, &sel);  /* the one-chunk kernel, skipping */
    check_attention(&c, 70, 0, sinks, &sel); /* the F32 kernel, gathering */
    eng_kv_destroy(c.kv);
    eng_arena_destroy(c.arena);
    free_fake(m);
}

/* --- the lightning indexer (DSA) ---------------------------------------------- */

/* Query t's top_k positions by a double-precision score over F16 keys, the
 * earlier position first among equals; -1 when it sees no more than top_k. */
static int ref_select(const float *q, const float *w, const float *keys, int t, int n_head,
                      int dim, int top_k, int32_t *out)
{
    if (t + 1 <= top_k)
        return -1;
    double s[64];
    bool taken[64] = { false };
    const double scale = 1.0 / sqrt((double)dim * n_head);
    for (int j = 0; j <= t; j++) {
        s[j] = 0;
        for (int h = 0; h < n_head; h++) {
            double d = 0;
            for (int i = 0; i < dim; i++)
                d += (double)q[(t * n_head + h) * dim + i] * f16r(keys[j * dim + i]);
            s[j] += (d > 0 ? d : 0) * w[t * n_head + h] * scale;
        }
    }
    for (int got = 0; got < top_k; got++) {
        int best = -1;
        for (int j = 0; j <= t; j++)
            if (!taken[j] && (best < 0 || s[j] > s[best]))
                best = j;
        taken[best] = true;
    }
    int n = 0;
    for (int j = 0; j <= t; j++)
        if (taken[j])
            out[n++] = j;
    return n;
}

/* n_tok positions of one sequence; same_keys: every key alike and every
 * product exact (queries in quarters, keys +-1), so that the scores tie
 * whatever order or fused steps a kernel sums them with: the earliest
 * top_k win. */
static void check_indexer(struct eng_ctx *c, int n_tok, bool same_keys)
{
    enum { H = 3, DIM = 16, TOP = 5 };
    unsigned seed = 11 + (unsigned)n_tok;
    static float q[64 * H * DIM], w[64 * H], k[64 * DIM], v[64 * 8];
    for (int i = 0; i < n_tok * H * DIM; i++)
        q[i] = same_keys ? floorf(rnd(&seed) * 4) / 4 : rnd(&seed);
    for (int i = 0; i < n_tok * H; i++)
        w[i] = rnd(&seed);
    for (int i = 0; i < n_tok * DIM; i++)
        k[i] = !same_keys ? rnd(&seed) : i >= DIM ? k[i % DIM] : rnd(&seed) > 0 ? 1.0f : -1.0f;
    static int32_t toks[64], pos[64 * TOP], n[64], want[TOP];
    const struct eng_batch in = { .tokens = toks, .n_tok = n_tok, .pos0 = 0 };
    struct eng_batch b;
    struct fl_err err;
    eng_arena_reset(c->arena);
    CHECK(eng_batch_prepare(c, &in, &b, &err) == 0, "batch: %s", err.msg);
    eng_kv_write(c->kv, 0, b.cell, n_tok, v, k); /* the indexer's keys are the V rows */
    const struct eng_indexer p = { .n_head = H, .head_dim = DIM, .top_k = TOP };
    const struct eng_attn_sel sel = { .pos = pos, .n = n, .stride = TOP };
    cpu_indexer(c, 0, &b, q, w, &p, &sel);
    int bad = 0;
    for (int t = 0; t < n_tok; t++) {
        const int nw = ref_select(q, w, k, t, H, DIM, TOP, want);
        bad += n[t] != nw || (nw > 0 && memcmp(pos + t * TOP, want, sizeof(int32_t) * TOP));
    }
    CHECK(bad == 0, "indexer, %d tokens%s: %d selections differ from the reference", n_tok,
          same_keys ? ", equal keys" : "", bad);
    printf("indexer %2d tokens%s: every token's top %d as the reference\n", n_tok,
           same_keys ? " (all scores tied)" : "", TOP);
}

static void test_indexer(struct fl_pool *pool)
{
    struct eng_model *m = fake_model(1, 8, 16); /* K: a latent; V: the indexer's key */
    m->kv_latent = true;
    struct eng_ctx c = { .m = m, .pool = pool, .cpu = &eng_cpu_backend, .be = &eng_cpu_backend };
    struct fl_err err;
    CHECK(eng_kv_create(m, 64, 1, FL_TYPE_F16, FL_TYPE_F16, &c.kv, &err) == 0, "kv: %s", err.msg);
    CHECK(eng_arena_create(&c.arena) == 0, "arena");
    check_indexer(&c, 4, false);  /* no more than top_k: every position */
    check_indexer(&c, 40, false);
    check_indexer(&c, 40, true);
    eng_kv_destroy(c.kv);
    eng_arena_destroy(c.arena);
    free_fake(m);
}

/* --- MoE against an expert source -------------------------------------------- */

enum { NE = 4, EMB = 8, FF = 6, NT = 5, K = 2 };

struct fake_source {
    int prefetches, prefetched[NE], n_prefetched, uses[NE];
    int acquired[NE], released[NE], order[NE], n_order;
    int fail_expert;    /* acquire of this one fails with -EIO; -1: none */
    int resident_one;   /* reported resident; -1: none */
};

static int src_prefetch(void *ctx, int layer, const int32_t *e, const int32_t *uses, int n)
{
    struct fake_source *s = ctx;
    (void)layer;
    s->prefetches++;
    s->n_prefetched = n;
    for (int i = 0; i < n; i++) {
        s->prefetched[i] = e[i];
        s->uses[i] = uses[i];
    }
    return 0;
}

static int src_acquire(void *ctx, int layer, int e)
{
    struct fake_source *s = ctx;
    (void)layer;
    if (e == s->fail_expert)
        return -EIO;
    s->acquired[e]++;
    s->order[s->n_order++] = e;
    return 0;
}

static void src_release(void *ctx, int layer, int e)
{
    struct fake_source *s = ctx;
    (void)layer;
    s->released[e]++;
}

static bool src_resident(void *ctx, int layer, int e)
{
    (void)layer;
    return e == ((struct fake_source *)ctx)->resident_one;
}

static struct eng_tensor f32_tensor(const float *data, int64_t ne0, int64_t ne1, int64_t ne2)
{
    return (struct eng_tensor){ .name = "t", .data = (const uint8_t *)data, .type = FL_TYPE_F32,
                                .n_dims = 3, .ne = { ne0, ne1, ne2, 1 } };
}

static void moe_reference(const float *x, const int32_t *ids, const float *w, const float *g,
                          const float *u, const float *d, double *out)
{
    for (int t = 0; t < NT; t++)
        for (int o = 0; o < EMB; o++) {
            double acc = 0;
            for (int j = 0; j < K; j++) {
                const int e = ids[t * K + j];
                double y = 0;
                for (int f = 0; f < FF; f++) {
                    double gv = 0, uv = 0;
                    for (int i = 0; i < EMB; i++) {
                        gv += (double)g[(e * FF + f) * EMB + i] * x[t * EMB + i];
                        uv += (double)u[(e * FF + f) * EMB + i] * x[t * EMB + i];
                    }
                    y += d[(e * EMB + o) * FF + f] * (gv / (1 + exp(-gv)) * uv);
                }
                acc += w[t * K + j] * y;
            }
            out[t * EMB + o] = acc;
        }
}

/* The CPU's MoE layer after routing (what its moe op runs once it chose). */
static int moe_ffn(struct eng_ctx *c, int layer, const float *x, const int32_t *ids,
                   const float *w, const struct eng_moe *moe, float *out, struct fl_err *err)
{
    const struct eng_batch b = { .n_tok = NT }; /* read for its size only: no routing sink */
    struct eng_expert_lists L;
    int rc = eng_moe_begin(c, layer, &b, x, ids, w, K, NE, &L, err);
    return rc ? rc : eng_cpu_moe_experts(c, layer, x, NT, &L, w, K, moe, out, err);
}

static void test_moe(struct fl_pool *pool)
{
    static float g[NE * FF * EMB], u[NE * FF * EMB], d[NE * EMB * FF], x[NT * EMB];
    unsigned seed = 99;
    for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
        g[i] = rnd(&seed);
        u[i] = rnd(&seed);
        d[i] = rnd(&seed);
    }
    for (int i = 0; i < NT * EMB; i++)
        x[i] = rnd(&seed);
    /* experts 0 and 2 used, 1 and 3 never: prefetch must name only 0 and 2 */
    const int32_t ids[NT * K] = { 0, 2, 2, 0, 0, 2, 2, 0, 2, 0 };
    const float w[NT * K] = { 0.6f, 0.4f, 0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f, 0.2f, 0.8f };
    struct eng_tensor tg = f32_tensor(g, EMB, FF, NE), tu = f32_tensor(u, EMB, FF, NE);
    struct eng_tensor td = f32_tensor(d, FF, EMB, NE);
    const struct eng_moe moe = { .gate = &tg, .up = &tu, .down = &td };
    struct fake_source fs = { .fail_expert = -1, .resident_one = 2 };
    const struct eng_expert_source src = { .ctx = &fs, .prefetch = src_prefetch, .acquire = src_acquire,
                                           .release = src_release, .resident = src_resident };
    struct eng_ctx c = { .pool = pool, .experts = &src, .cpu = &eng_cpu_backend,
                         .be = &eng_cpu_backend };
    eng_arena_create(&c.arena);
    float out[NT * EMB];
    double ref[NT * EMB];
    struct fl_err err = { { 0 } };
    int rc = moe_ffn(&c, 3, x, ids, w, &moe, out, &err);
    moe_reference(x, ids, w, g, u, d, ref);
    double worst = 0;
    for (int i = 0; i < NT * EMB; i++)
        worst = fmax(worst, fabs(out[i] - ref[i]));
    CHECK(rc == 0 && worst < 1e-4, "moe rc %d, max error %g", rc, worst);
    CHECK(fs.prefetches == 1 && fs.n_prefetched == 2 && fs.prefetched[0] == 0 && fs.prefetched[1] == 2,
          "prefetch: %d calls, %d experts", fs.prefetches, fs.n_prefetched);
    /* every one of the 5 tokens chose both: the uses a cache policy counts */
    CHECK(fs.uses[0] == 5 && fs.uses[1] == 5, "prefetch uses %d, %d (5 tokens chose each)",
          fs.uses[0], fs.uses[1]);
    CHECK(fs.acquired[0] == 1 && fs.acquired[2] == 1 && !fs.acquired[1] && !fs.acquired[3] &&
              fs.released[0] == 1 && fs.released[2] == 1,
          "acquire/release counts wrong");
    CHECK(fs.n_order == 2 && fs.order[0] == 2, "resident expert 2 not computed first");
    printf("moe: max |error| %.2g; prefetch once with {0,2}; each acquired/released once; resident first\n",
           worst);
    /* an I/O error stops the layer with that error, and nothing stays pinned */
    struct fake_source bad = { .fail_expert = 2, .resident_one = -1 };
    const struct eng_expert_source bsrc = { .ctx = &bad, .prefetch = src_prefetch, .acquire = src_acquire,
                                            .release = src_release, .resident = NULL };
    c.experts = &bsrc;
    eng_arena_reset(c.arena);
    rc = moe_ffn(&c, 3, x, ids, w, &moe, out, &err);
    CHECK(rc == -EIO && strstr(err.msg, "expert 2") && bad.acquired[0] == bad.released[0],
          "acquire failure: rc %d, msg '%s'", rc, err.msg);
    printf("moe: acquire error -> rc %d, \"%s\"\n", rc, err.msg);
    /* all four experts routed: with a 2-thread pool the layer runs whole
     * experts per thread in waves; same results, same pinning discipline */
    const int32_t ids4[NT * K] = { 0, 1, 2, 3, 3, 0, 1, 2, 2, 1 };
    struct fake_source fs4 = { .fail_expert = -1, .resident_one = 3 };
    const struct eng_expert_source src4 = { .ctx = &fs4, .prefetch = src_prefetch, .acquire = src_acquire,
                                            .release = src_release, .resident = src_resident };
    c.experts = &src4;
    eng_arena_reset(c.arena);
    rc = moe_ffn(&c, 1, x, ids4, w, &moe, out, &err);
    moe_reference(x, ids4, w, g, u, d, ref);
    worst = 0;
    for (int i = 0; i < NT * EMB; i++)
        worst = fmax(worst, fabs(out[i] - ref[i]));
    bool once = true;
    for (int e = 0; e < NE; e++)
        once = once && fs4.acquired[e] == 1 && fs4.released[e] == 1;
    CHECK(rc == 0 && worst < 1e-4 && once && fs4.order[0] == 3 && fs4.n_prefetched == 4,
          "moe with 4 experts: rc %d, error %g, once %d", rc, worst, once);
    struct fake_source bad4 = { .fail_expert = 2, .resident_one = -1 };
    const struct eng_expert_source bsrc4 = { .ctx = &bad4, .prefetch = src_prefetch, .acquire = src_acquire,
                                            .release = src_release, .resident = NULL };
    c.experts = &bsrc4;
    eng_arena_reset(c.arena);
    rc = moe_ffn(&c, 1, x, ids4, w, &moe, out, &err);
    bool balanced = true;
    for (int e = 0; e < NE; e++)
        balanced = balanced && bad4.acquired[e] == bad4.released[e];
    CHECK(rc == -EIO && balanced, "4-expert acquire failure: rc %d, balanced %d", rc, balanced);
    printf("moe, 4 experts (%s): max |error| %.2g, each acquired/released once, failure leaves "
           "nothing pinned\n", fl_pool_size(pool) > 1 ? "expert-parallel waves" : "serial", worst);
    eng_arena_destroy(c.arena);
}

int main(void)
{
    fl_types_init();
    struct fl_pool *pool = fl_pool_create(2);
    test_rmsnorm_softmax();
    test_rope();
    test_routing();
    test_attention(pool);
    test_indexer(pool);
    test_indexer(NULL);
    test_moe(pool);
    test_moe(NULL);
    fl_pool_destroy(pool);
    return check_summary("test-engine-ops");
}

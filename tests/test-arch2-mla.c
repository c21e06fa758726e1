/* test-arch2-mla.c: the absorbed MLA block (model/mla.h) against a plain
 * double-precision evaluation of the same layer in its decompressed form:
 * per head k_nope = k_b^T c and v = v_b c for every cached latent c, full
 * softmax attention over [q_nope | q_pe] . [k_nope | k_pe], then wo. The two
 * agree only if the absorption, the cache layout (latent | rope key, V read
 * from K), the rope (YaRN, NORM pairs), both norms and the per-head slicing
 * of k_b/v_b are right. Prefill then single-token decode, with and without a
 * q LoRA. The engine's activations are F16-rounded (F16 weights and cache),
 * so agreement is to ~1e-3 relative; a wrong piece gives errors of order 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "model/mla.h"
#include "backend/cpu/cpu-backend.h"
#include "model/kv-cache.h"
#include "tests/check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double gauss(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((rng >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

/* A weight tensor with its values as the engine sees them (F16-rounded for
 * F16 tensors) kept in double for the reference. */
struct wt {
    struct eng_tensor t;
    double *v;
};

static void make(struct wt *w, const char *name, uint32_t type, int64_t a, int64_t b, int64_t c,
                 double sd, double mean)
{
    const int64_t n = a * b * c;
    w->v = malloc(sizeof(double) * n);
    void *data = malloc(type == FL_TYPE_F16 ? 2 * n : 4 * n);
    for (int64_t i = 0; i < n; i++) {
        float f = (float)(mean + sd * gauss());
        if (type == FL_TYPE_F16) {
            ((fl_f16 *)data)[i] = fl_f32_to_f16(f);
            w->v[i] = fl_f16_to_f32(((fl_f16 *)data)[i]);
        } else {
            ((float *)data)[i] = f;
            w->v[i] = f;
        }
    }
    w->t = (struct eng_tensor){ .name = name, .data = data, .type = type,
                                .n_dims = c > 1 ? 3 : (b > 1 ? 2 : 1), .ne = { a, b, c, 1 } };
}

static void unmake(struct wt *w)
{
    free((void *)w->t.data);
    free(w->v);
}

/* y[o] = sum_i W[o][i] x[i] in double. */
static void mv(const double *w, const double *x, int n_in, int n_out, double *y)
{
    for (int o = 0; o < n_out; o++) {
        double s = 0;
        for (int i = 0; i < n_in; i++)
            s += w[(int64_t)o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void rms(double *x, const double *w, int n, double eps)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    double k = 1 / sqrt(s / n + eps);
    for (int i = 0; i < n; i++)
        x[i] = x[i] * k * w[i];
}

/* YaRN rope of n values, NORM pairing, straight from the definition. */
static void rope(double *x, int n, int pos, const struct yarn_rope *r)
{
    const struct yarn_params *p = &r->p;
    for (int i = 0; i < n / 2; i++) {
        double extrap = pos * pow(p->freq_base, -2.0 * i / n), interp = p->freq_scale * extrap;
        double y = (i - r->corr_dims[0]) / fmax(0.001, r->corr_dims[1] - r->corr_dims[0]);
        double mix = (1 - fmin(1, fmax(0, y))) * p->ext_factor;
        double th = interp * (1 - mix) + extrap * mix;
        double mag = p->attn_factor * (p->ext_factor != 0 ? 1 + 0.1 * log(1 / p->freq_scale) : 1);
        double a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = mag * (a * cos(th) - b * sin(th));
        x[2 * i + 1] = mag * (a * sin(th) + b * cos(th));
    }
}

struct layer {
    struct mla_dims d;
    struct wt q_a, q_a_norm, q_b, q, kv_a, kv_a_norm, k_b, v_b, o;
    struct mla_tensors t;
};

static void build(struct layer *L, int q_lora)
{
    struct mla_dims d = { .n_embd = 64, .n_head = 4, .q_lora = q_lora, .kv_lora = 32,
                          .qk_nope = 16, .qk_rope = 8, .v_head = 16, .eps = 1e-6f };
    const int hk = d.qk_nope + d.qk_rope, nq = d.n_head * hk;
    memset(L, 0, sizeof(*L));
    L->d = d;
    if (q_lora) {
        make(&L->q_a, "q_a", FL_TYPE_F16, d.n_embd, q_lora, 1, 1 / sqrt(d.n_embd), 0);
        make(&L->q_a_norm, "q_a_norm", FL_TYPE_F32, q_lora, 1, 1, 0.05, 1);
        make(&L->q_b, "q_b", FL_TYPE_F16, q_lora, nq, 1, 1 / sqrt(q_lora), 0);
        L->t.q_a = &L->q_a.t, L->t.q_a_norm = &L->q_a_norm.t, L->t.q_b = &L->q_b.t;
    } else {
        make(&L->q, "q", FL_TYPE_F16, d.n_embd, nq, 1, 1 / sqrt(d.n_embd), 0);
        L->t.q = &L->q.t;
    }
    make(&L->kv_a, "kv_a", FL_TYPE_F16, d.n_embd, d.kv_lora + d.qk_rope, 1, 1 / sqrt(d.n_embd), 0);
    make(&L->kv_a_norm, "kv_a_norm", FL_TYPE_F32, d.kv_lora, 1, 1, 0.05, 1);
    /* larger k_b so the softmax is far from uniform */
    make(&L->k_b, "k_b", FL_TYPE_F16, d.qk_nope, d.kv_lora, d.n_head, 2 / sqrt(d.qk_nope), 0);
    make(&L->v_b, "v_b", FL_TYPE_F16, d.kv_lora, d.v_head, d.n_head, 1 / sqrt(d.kv_lora), 0);
    make(&L->o, "o", FL_TYPE_F16, d.n_head * d.v_head, d.n_embd, 1, 1 / sqrt(d.n_head * d.v_head), 0);
    L->t.kv_a = &L->kv_a.t, L->t.kv_a_norm = &L->kv_a_norm.t, L->t.k_b = &L->k_b.t;
    L->t.v_b = &L->v_b.t, L->t.o = &L->o.t;
}

static void destroy(struct layer *L)
{
    struct wt *w[] = { &L->q_a, &L->q_a_norm, &L->q_b, &L->q };
    for (int i = 0; i < 4; i++)
        if (w[i]->v)
            unmake(w[i]);
    unmake(&L->kv_a), unmake(&L->kv_a_norm), unmake(&L->k_b), unmake(&L->v_b), unmake(&L->o);
}

/* Reference output of token t given all tokens' inputs x[0..t]. */
static void reference(const struct layer *L, const struct yarn_rope *r, float scale,
                      const float *x, int t, double *out)
{
    const struct mla_dims *d = &L->d;
    const int hk = d->qk_nope + d->qk_rope, row = d->kv_lora + d->qk_rope;
    double xin[64], qa[64], q[256], c[16][48], kv[48], o[64], k_nope[16], v[16];
    double p[16], att[16][16];
    for (int s = 0; s <= t; s++) {
        for (int i = 0; i < d->n_embd; i++)
            xin[i] = x[s * d->n_embd + i];
        mv(L->kv_a.v, xin, d->n_embd, row, kv);
        rms(kv, L->kv_a_norm.v, d->kv_lora, d->eps);
        rope(kv + d->kv_lora, d->qk_rope, s, r);
        memcpy(c[s], kv, sizeof(double) * row);
    }
    for (int i = 0; i < d->n_embd; i++)
        xin[i] = x[t * d->n_embd + i];
    if (d->q_lora) {
        mv(L->q_a.v, xin, d->n_embd, d->q_lora, qa);
        rms(qa, L->q_a_norm.v, d->q_lora, d->eps);
        mv(L->q_b.v, qa, d->q_lora, d->n_head * hk, q);
    } else {
        mv(L->q.v, xin, d->n_embd, d->n_head * hk, q);
    }
    for (int h = 0; h < d->n_head; h++) {
        double *qh = q + h * hk, mx = -INFINITY, sum = 0;
        rope(qh + d->qk_nope, d->qk_rope, t, r);
        const double *kb = L->k_b.v + (int64_t)h * d->kv_lora * d->qk_nope;
        const double *vb = L->v_b.v + (int64_t)h * d->v_head * d->kv_lora;
        for (int s = 0; s <= t; s++) {
            for (int e = 0; e < d->qk_nope; e++) {
                k_nope[e] = 0;
                for (int l = 0; l < d->kv_lora; l++)
                    k_nope[e] += kb[l * d->qk_nope + e] * c[s][l];
            }
            double sc = 0;
            for (int e = 0; e < d->qk_nope; e++)
                sc += qh[e] * k_nope[e];
            for (int e = 0; e < d->qk_rope; e++)
                sc += qh[d->qk_nope + e] * c[s][d->kv_lora + e];
            p[s] = sc * scale;
            mx = fmax(mx, p[s]);
            mv(vb, c[s], d->kv_lora, d->v_head, v);
            memcpy(att[s], v, sizeof(v));
        }
        for (int s = 0; s <= t; s++)
            sum += (p[s] = exp(p[s] - mx));
        for (int j = 0; j < d->v_head; j++) {
            o[h * d->v_head + j] = 0;
            for (int s = 0; s <= t; s++)
                o[h * d->v_head + j] += p[s] / sum * att[s][j];
        }
    }
    mv(L->o.v, o, d->n_head * d->v_head, d->n_embd, out);
}

static double compare(const float *got, const double *want, int n, double *scale_out)
{
    double worst = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs(got[i] - want[i]));
        mag = fmax(mag, fabs(want[i]));
    }
    *scale_out = mag;
    return worst / mag;
}

static void run_case(int q_lora)
{
    struct layer L;
    build(&L, q_lora);
    const int n_tok = 8, n_prefill = 6, e = L.d.n_embd;
    int64_t kdim = mla_cache_row(&L.d), vdim = 0;
    struct eng_model m = { 0 };
    m.hp.n_layer = 1, m.hp.n_embd = e, m.kv_k_dim = &kdim, m.kv_v_dim = &vdim;
    struct fl_err err = { "" };
    struct eng_kv *kv;
    struct eng_arena *arena;
    CHECK(eng_kv_create(&m, 16, 1, FL_TYPE_F16, FL_TYPE_F16, &kv, &err) == 0, "kv: %s", err.msg);
    CHECK(eng_arena_create(&arena) == 0, "arena");
    struct eng_ctx c = { .m = &m, .pool = NULL, .n_threads = 1, .kv = kv, .arena = arena,
                         .cpu = &eng_cpu_backend, .be = &eng_cpu_backend };

    struct yarn_params yp = { 8, 4096, 1e4f, 1.0f / 40, 1.0f, 0.8f, 32.0f, 1.0f };
    struct yarn_rope r;
    yarn_rope_init(&r, &yp);
    const float scale = 1.3f / sqrtf((float)(L.d.qk_nope + L.d.qk_rope));

    float *x = malloc(sizeof(float) * n_tok * e), *out = malloc(sizeof(float) * n_tok * e);
    for (int i = 0; i < n_tok * e; i++)
        x[i] = (float)gauss();
    eng_arena_reset(arena);
    int32_t toks[8] = { 0 };
    struct eng_batch b;
    const struct eng_batch prefill = { .tokens = toks, .n_tok = n_prefill, .pos0 = 0 };
    CHECK(eng_batch_prepare(&c, &prefill, &b, &err) == 0, "batch: %s", err.msg);
    mla_attention(&c, 0, &L.d, &L.t, &r, scale, NULL, x, &b, out);
    for (int t = n_prefill; t < n_tok; t++) { /* decode, one token at a time */
        const struct eng_batch step = { .tokens = toks, .n_tok = 1, .pos0 = t };
        eng_arena_reset(arena);
        CHECK(eng_batch_prepare(&c, &step, &b, &err) == 0, "batch: %s", err.msg);
        mla_attention(&c, 0, &L.d, &L.t, &r, scale, NULL, x + t * e, &b, out + t * e);
    }
    double worst = 0, mag = 0;
    for (int t = 0; t < n_tok; t++) {
        double want[64], m1;
        reference(&L, &r, scale, x, t, want);
        double rel = compare(out + t * e, want, e, &m1);
        worst = fmax(worst, rel);
        mag = fmax(mag, m1);
    }
    printf("q_lora %d: max relative deviation %.2e (output magnitude %.2f)\n", q_lora, worst, mag);
    CHECK(worst < 1e-2, "q_lora %d: absorbed MLA differs from the reference by %g", q_lora, worst);
    CHECK(mag > 0.1, "degenerate output");
    free(x), free(out);
    eng_arena_destroy(arena);
    eng_kv_destroy(kv);
    destroy(&L);
}

int main(void)
{
    fl_types_init();
    run_case(32);
    run_case(0);
    return check_summary("test-arch2-mla");
}

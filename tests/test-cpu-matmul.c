/* test-cpu-matmul: fl_matmul and friends against a naive reference, at
 * every SIMD level this CPU has.
 *
 * Reference: W and the quantized activations both dequantized with the
 * types module's to_float, dotted in double. The matmul must agree within
 * 2e-6 * sum|w*x| per output (float accumulation order differs), and
 * within a loose bound of the dot with the unquantized x (the activation
 * quantization error). Exact checks: y is bit-identical for 1, 2 and 3
 * threads; fl_matmul_rows (gathered, scattered, reused activations) gives
 * the same bits as fl_matmul for the same token, wherever it lands in the
 * batch; decode (n_tok = 1) agrees with that token's row of a prefill
 * within tolerance (it may use another kernel). (Q4_1/Q5_1, without
 * SIMD kernels here, only get a looser bound: see check_type.) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/threadpool.h"
#include "gguf/tensor-types.h"
#include "tests/check.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void)
{
    return (uint32_t)(check_xorshift64(&g_rng) >> 16);
}

static float gauss(void)
{
    float u = ((float)rnd() + 1.0f) / 4294967296.0f, v = (float)rnd() / 4294967296.0f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* Weights: N(0, 1/n_in) floats quantized by the types module where it has a
 * quantizer (MXFP4 via its from_float too). */
static void *make_weights(uint32_t t, int64_t n_in, int64_t n_out)
{
    const size_t rs = fl_row_size(t, n_in);
    char *w = malloc(rs * (size_t)n_out);
    float *row = malloc((size_t)n_in * sizeof(float));
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++)
            row[i] = gauss() / sqrtf((float)n_in);
        fl_type_traits(t)->from_float(row, w + (size_t)o * rs, n_in);
    }
    free(row);
    return w;
}

struct pools {
    struct fl_pool *p[4]; /* index = threads (p[1] = NULL: caller only) */
};

static void check_type(const struct pools *pl, uint32_t t, int64_t n_in, int64_t n_out)
{
    static const int64_t k_ntok[] = { 1, 2, 3, 5, 17, 64 };
    const struct fl_type_traits *tr = fl_type_traits(t);
    const uint32_t at = (uint32_t)fl_act_type(t);
    const size_t rs = fl_row_size(t, n_in);
    void *w = make_weights(t, n_in, n_out);
    float *wf = malloc((size_t)(n_in * n_out) * sizeof(float));
    for (int64_t o = 0; o < n_out; o++)
        tr->to_float((char *)w + (size_t)o * rs, wf + o * n_in, n_in);
    const int64_t max_tok = 64;
    float *x = malloc((size_t)(max_tok * n_in) * sizeof(float));
    for (int64_t i = 0; i < max_tok * n_in; i++)
        x[i] = gauss();
    void *scratch = malloc(fl_matmul_scratch_size(t, n_in, max_tok) + 1);
    float *y[4], *xd = malloc((size_t)n_in * sizeof(float));
    for (int i = 1; i <= 3; i++)
        y[i] = malloc((size_t)(max_tok * n_out) * sizeof(float));
    float *y1 = malloc((size_t)n_out * sizeof(float));
    double worst = 0.0, worst_q = 0.0;
    for (size_t ki = 0; ki < sizeof(k_ntok) / sizeof(k_ntok[0]); ki++) {
        const int64_t nt = k_ntok[ki];
        for (int th = 1; th <= 3; th++)
            CHECK(fl_matmul(pl->p[th], w, t, n_in, n_out, x, nt, y[th], scratch) == 0, "matmul rc");
        CHECK(memcmp(y[1], y[2], (size_t)(nt * n_out) * 4) == 0 &&
                  memcmp(y[1], y[3], (size_t)(nt * n_out) * 4) == 0,
              "%s n_tok=%lld: y differs between 1, 2 and 3 threads", tr->name, (long long)nt);
        /* reference, from the activations the matmul itself used */
        struct fl_qact xq;
        CHECK(fl_quantize_act(NULL, t, x, n_in, nt, n_in, scratch, &xq) == 0, "quantize rc");
        for (int64_t tk = 0; tk < nt; tk++) {
            const char *xr = (const char *)xq.data + (size_t)tk * xq.row_stride;
            if (at == FL_TYPE_F32)
                memcpy(xd, xr, (size_t)n_in * 4);
            else
                fl_type_traits(at)->to_float(xr, xd, n_in);
            for (int64_t o = 0; o < n_out; o++) {
                double dot = 0, mag = 0, dotx = 0, magx = 0;
                for (int64_t i = 0; i < n_in; i++) {
                    dot += (double)wf[o * n_in + i] * xd[i];
                    mag += fabs((double)wf[o * n_in + i] * xd[i]);
                    dotx += (double)wf[o * n_in + i] * x[tk * n_in + i];
                    magx += fabs((double)wf[o * n_in + i] * x[tk * n_in + i]);
                }
                const double e = fabs(y[1][tk * n_out + o] - dot) / (mag + 1e-30);
                const double eq = fabs(y[1][tk * n_out + o] - dotx) / (magx + 1e-30);
                worst = e > worst ? e : worst;
                worst_q = eq > worst_q ? eq : worst_q;
            }
        }
    }
    /* Q8_1 carries d * sum(q) as an F16 (ggml's format) for the Q4_1/Q5_1
     * min term: that rounding is ~2^-11 of the min's contribution. */
    const double tol = at == FL_TYPE_Q8_1 ? 2e-3 : 2e-6;
    CHECK(worst <= tol, "%s: relative error %.3g vs dequantized reference", tr->name, worst);
    /* activation quantization costs at most ~1/127 per value (F16: 2^-11) */
    CHECK(worst_q <= 0.02, "%s: relative error %.3g vs unquantized x", tr->name, worst_q);

    /* decode of token 5 (a one-token call, maybe another kernel) agrees with
     * row 5 of the 17-token prefill */
    fl_matmul(pl->p[2], w, t, n_in, n_out, x, 17, y[1], scratch);
    fl_matmul(pl->p[2], w, t, n_in, n_out, x + 5 * n_in, 1, y1, scratch);
    double dec = 0;
    for (int64_t o = 0; o < n_out; o++) {
        const double e = fabs(y1[o] - y[1][5 * n_out + o]) / (fabs(y[1][5 * n_out + o]) + 1e-3);
        dec = e > dec ? e : dec;
    }
    CHECK(dec < 1e-3, "%s: decode and prefill differ by %.3g for the same token", tr->name, dec);

    /* gather/scatter: tokens 16, 3, 3, 9 of the 17, into slots 2*j+1 */
    struct fl_qact xq;
    fl_quantize_act(pl->p[3], t, x, n_in, 17, n_in, scratch, &xq);
    const int32_t rows[4] = { 16, 3, 3, 9 }, out_rows[4] = { 1, 3, 5, 7 };
    float *ys = calloc((size_t)(8 * n_out), sizeof(float));
    CHECK(fl_matmul_rows(pl->p[3], w, t, n_out, &xq, rows, 4, ys, n_out, out_rows) == 0, "rows rc");
    int same = 1;
    for (int j = 0; j < 4; j++)
        same &= memcmp(ys + out_rows[j] * n_out, y[1] + rows[j] * n_out, (size_t)n_out * 4) == 0;
    CHECK(same, "%s: fl_matmul_rows differs from fl_matmul", tr->name);
    CHECK(ys[0] == 0.0f && ys[2 * n_out] == 0.0f, "%s: fl_matmul_rows wrote outside its slots",
          tr->name);
    /* bad input is refused, not crashed on */
    const int32_t bad[1] = { 17 };
    CHECK(fl_matmul_rows(NULL, w, t, n_out, &xq, bad, 1, ys, n_out, NULL) == -EINVAL,
          "%s: out-of-range row accepted", tr->name);
    printf("    %-6s n_in %5lld n_out %3lld: max rel err %.2g (vs unquantized x %.2g)\n", tr->name,
           (long long)n_in, (long long)n_out, worst, worst_q);
    free(ys);
    free(w);
    free(wf);
    free(x);
    free(xd);
    free(scratch);
    free(y1);
    for (int i = 1; i <= 3; i++)
        free(y[i]);
}

static void check_errors(void)
{
    float x[64] = { 0 }, y[4];
    char w[1024] = { 0 }, scratch[1024];
    CHECK(fl_matmul(NULL, w, 999, 64, 1, x, 1, y, scratch) == -EINVAL, "unknown type accepted");
    CHECK(fl_matmul(NULL, w, FL_TYPE_Q4_K, 64, 1, x, 1, y, scratch) == -EINVAL,
          "n_in not a multiple of 256 accepted for Q4_K");
    CHECK(fl_matmul(NULL, w, FL_TYPE_Q8_K, 256, 1, x, 1, y, scratch) == -EINVAL,
          "activation-only type accepted as weights");
    struct fl_qact xq;
    CHECK(fl_quantize_act(NULL, FL_TYPE_Q8_0, x, 64, 1, 64, scratch, &xq) == 0, "quantize");
    CHECK(fl_matmul_q(NULL, w, FL_TYPE_Q4_K, 1, &xq, y, 1) == -EINVAL, "activation type mismatch");
    CHECK(fl_matmul_scratch_size(FL_TYPE_F32, 64, 3) == 0, "F32 needs no scratch");
    CHECK(fl_matmul_scratch_size(FL_TYPE_Q4_K, 512, 3) == 3 * 2 * sizeof(struct fl_block_q8_K),
          "Q4_K scratch size");
}

/* fl_matmul_batch: a decode step's products (one token, as the MoE layer
 * issues them: experts of mixed types, a repacked Q4_K matrix where this
 * CPU repacks, an empty product, scattered outputs) and a prefill-sized
 * batch give exactly the bits of one fl_matmul_rows call each, at 1-3
 * threads; a bad task fails the whole batch with nothing written. */
static void check_batch(const struct pools *pl)
{
    enum { NT = 6, N_TOK = 5 };
    static const struct { uint32_t t; int64_t n_in, n_out; } sh[NT] = {
        { FL_TYPE_Q4_K, 512, 48 }, { FL_TYPE_Q4_K, 512, 40 }, { FL_TYPE_Q8_0, 512, 37 },
        { FL_TYPE_Q6_K, 512, 24 }, { FL_TYPE_Q4_K, 512, 0 },  { FL_TYPE_Q4_K, 512, 64 },
    };
    void *w[NT];
    uint32_t wt[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = make_weights(sh[i].t, sh[i].n_in, sh[i].n_out > 0 ? sh[i].n_out : 1);
        wt[i] = sh[i].t;
    }
    /* the last one repacked, as a resident expert is on AVX-512 */
    const int lt = fl_repack_layout(FL_TYPE_Q4_K, 512, 64);
    if (lt >= 0) {
        void *r = aligned_alloc(64, fl_repack_size((uint32_t)lt, 512, 64));
        CHECK(fl_repack(FL_TYPE_Q4_K, w[5], r, 512, 64) == 0, "repack");
        free(w[5]);
        w[5] = r;
        wt[5] = (uint32_t)lt;
    }
    float x[N_TOK * 512];
    for (int i = 0; i < N_TOK * 512; i++)
        x[i] = gauss();
    char *s8 = malloc(fl_matmul_scratch_size(FL_TYPE_Q8_0, 512, N_TOK));
    char *sk = malloc(fl_matmul_scratch_size(FL_TYPE_Q4_K, 512, N_TOK));
    struct fl_qact q8, qk;
    CHECK(fl_quantize_act(NULL, FL_TYPE_Q8_0, x, 512, N_TOK, 512, s8, &q8) == 0 &&
              fl_quantize_act(NULL, FL_TYPE_Q4_K, x, 512, N_TOK, 512, sk, &qk) == 0,
          "quantize");
    const int32_t tok3[1] = { 3 }, all[N_TOK] = { 4, 0, 2, 1, 3 }, slot[N_TOK] = { 1, 3, 0, 4, 2 };
    for (int n_rows = 1; n_rows <= N_TOK; n_rows += N_TOK - 1) {
        const int32_t *rows = n_rows == 1 ? tok3 : all;
        struct fl_matmul_task t[NT];
        float ref[NT][N_TOK * 64], out[NT][N_TOK * 64];
        for (int i = 0; i < NT; i++) {
            t[i] = (struct fl_matmul_task){ w[i], wt[i], sh[i].n_out,
                                            sh[i].t == FL_TYPE_Q8_0 ? &q8 : &qk, rows, n_rows,
                                            out[i], 64, i == 1 ? slot : NULL };
            memset(ref[i], 0, sizeof(ref[i]));
            CHECK(fl_matmul_rows(NULL, w[i], wt[i], sh[i].n_out, t[i].xq, rows, n_rows, ref[i],
                                 64, t[i].out_rows) == 0, "rows %d", i);
        }
        for (int nth = 1; nth <= 3; nth++) {
            memset(out, 0, sizeof(out));
            CHECK(fl_matmul_batch(pl->p[nth], t, NT) == 0, "batch");
            CHECK(memcmp(out, ref, sizeof(out)) == 0,
                  "batch of %d products, %d token(s), %d thread(s): not fl_matmul_rows' bits", NT,
                  n_rows, nth);
        }
        struct fl_matmul_task bad[2] = { t[0], t[2] };
        bad[1].xq = &qk; /* Q8_0 weights against Q8_K activations */
        memset(out, 0, sizeof(out));
        CHECK(fl_matmul_batch(pl->p[2], bad, 2) == -EINVAL && out[0][0] == 0.0f,
              "a bad task must fail the batch before anything runs");
    }
    CHECK(fl_matmul_batch(NULL, NULL, 0) == 0 && fl_matmul_batch(NULL, NULL, 1) == -EINVAL,
          "empty / NULL batch");
    printf("  fl_matmul_batch = fl_matmul_rows bit for bit (%s), 1-3 threads\n",
           lt >= 0 ? "incl. a repacked Q4_K" : "no repacked layout on this CPU");
    for (int i = 0; i < NT; i++)
        free(w[i]);
    free(s8);
    free(sk);
}

int main(void)
{
    static const struct { uint32_t t; int64_t n_in, n_out; } cases[] = {
        { FL_TYPE_Q8_0, 96, 37 },  { FL_TYPE_Q8_0, 512, 7 },   { FL_TYPE_Q4_0, 160, 33 },
        { FL_TYPE_IQ4_NL, 128, 9 }, { FL_TYPE_MXFP4, 224, 13 }, { FL_TYPE_Q4_K, 512, 37 },
        { FL_TYPE_Q4_K, 256, 1 },  { FL_TYPE_Q5_K, 768, 11 },  { FL_TYPE_Q6_K, 256, 23 },
        { FL_TYPE_F16, 100, 19 },  { FL_TYPE_BF16, 72, 5 },    { FL_TYPE_F32, 67, 21 },
        { FL_TYPE_Q4_1, 64, 5 },   { FL_TYPE_Q5_0, 64, 5 },
    };
    struct pools pl = { { NULL, NULL, fl_pool_create(2), fl_pool_create(3) } };
    if (!pl.p[2] || !pl.p[3]) {
        printf("cannot create thread pools\n");
        return 1;
    }
    static const char *const levels[] = { "scalar", "avx2", "avx512" };
    fl_types_init();
    const char *top = fl_cpu_features();
    int n_levels = strncmp(top, "avx512", 6) == 0 ? 3 : strncmp(top, "avx2", 4) == 0 ? 2 : 1;
    for (int lv = 0; lv < n_levels; lv++) {
        setenv("FL_CPU_FEATURES", levels[lv], 1);
        fl_types_init();
        printf("  level %s\n", fl_cpu_features());
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            check_type(&pl, cases[i].t, cases[i].n_in, cases[i].n_out);
    }
    check_errors();
    unsetenv("FL_CPU_FEATURES");
    fl_types_init();
    check_batch(&pl);
    fl_pool_destroy(pl.p[2]);
    fl_pool_destroy(pl.p[3]);
    return check_summary("test-cpu-matmul");
}

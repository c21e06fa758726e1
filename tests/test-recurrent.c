/* test-recurrent: Gated DeltaNet's ops and state (backend/cpu/recurrent.h,
 * model/kv-cache.h): the conv and the delta rule against double-precision
 * references written here from the formulas (not ggml's transposed
 * layout), the state carried between batches bit for bit, a sequence's
 * numbers the same alone and beside another, and the rules a recurrent
 * cache keeps (restart at 0 zeroes it, a gap is refused, truncation). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu-backend.h"
#include "backend/cpu/recurrent.h"
#include "backend/cpu/threadpool.h"
#include "model/kv-cache.h"
#include "tests/check.h"
#include "tests/delta-net-ref.h"


static struct eng_tensor f32_tensor(const float *data, int64_t ne0, int64_t ne1)
{
    return (struct eng_tensor){ .name = "t", .data = (const uint8_t *)data, .type = FL_TYPE_F32,
                                .n_dims = ne1 > 1 ? 2 : 1, .ne = { ne0, ne1, 1, 1 } };
}

/* One recurrent layer, no KV rows. */
static struct eng_model *fake_model(void)
{
    struct eng_model *m = calloc(1, sizeof(*m));
    m->hp.n_layer = 1;
    m->kv_k_dim = calloc(1, sizeof(int64_t));
    m->kv_v_dim = calloc(1, sizeof(int64_t));
    m->rs_conv_dim = calloc(1, sizeof(int64_t));
    m->rs_ssm_dim = calloc(1, sizeof(int64_t));
    m->rs_conv_dim[0] = (DN_CONV - 1) * DN_W;
    m->rs_ssm_dim[0] = DN_NV * DN_D * DN_D;
    return m;
}

static void free_fake(struct eng_model *m)
{
    free(m->kv_k_dim);
    free(m->kv_v_dim);
    free(m->rs_conv_dim);
    free(m->rs_ssm_dim);
    free(m);
}

struct rig {
    struct eng_model *m;
    struct eng_ctx c;
    struct dn_inputs in[2];
    struct eng_tensor conv, dt, a;
    bool grouped; /* qwen3next's key-head sharing */
};

/* Spans (seq, pos0, n) of one batch; tokens of sequence s from in[s]. */
static void run_batch(struct rig *r, const struct eng_span *sp, int n_spans, float *out)
{
    struct fl_err err;
    int n = 0;
    for (int i = 0; i < n_spans; i++)
        n += sp[i].n_tok;
    int32_t tok[2 * DN_NTOK] = { 0 };
    const struct eng_batch in = { .tokens = tok, .n_tok = n, .spans = sp, .n_spans = n_spans };
    struct eng_batch b;
    eng_arena_reset(r->c.arena);
    CHECK(eng_batch_prepare(&r->c, &in, &b, &err) == 0, "prepare: %s", err.msg);
    float *x = eng_scratch_f32(&r->c, n * DN_W), *al = eng_scratch_f32(&r->c, n * DN_NV);
    float *be = eng_scratch_f32(&r->c, n * DN_NV), *cv = eng_scratch_f32(&r->c, n * DN_W);
    for (int t = 0; t < n; t++) {
        const struct dn_inputs *src = &r->in[b.seq[t]];
        memcpy(x + t * DN_W, src->x[b.pos[t]], sizeof(float) * DN_W);
        memcpy(al + t * DN_NV, src->alpha[b.pos[t]], sizeof(float) * DN_NV);
        memcpy(be + t * DN_NV, src->beta[b.pos[t]], sizeof(float) * DN_NV);
    }
    cpu_ssm_conv(&r->c, 0, &b, x, &r->conv, 0, cv);
    const struct eng_delta_net p = { .n_k_head = DN_NK, .n_v_head = DN_NV, .d_state = DN_D,
                                     .k_grouped = r->grouped,
                                     .dt_bias = &r->dt, .a = &r->a, .eps = 1e-6f };
    cpu_delta_net(&r->c, 0, &b, cv, al, be, &p, out);
}

static void rig_open(struct rig *r, struct fl_pool *pool)
{
    struct fl_err err;
    memset(r, 0, sizeof(*r));
    r->m = fake_model();
    dn_make_inputs(&r->in[0], 1);
    dn_make_inputs(&r->in[1], 2);
    /* both sequences share the weights (sequence 0's) */
    memcpy(r->in[1].conv_w, r->in[0].conv_w, sizeof(r->in[0].conv_w));
    memcpy(r->in[1].dt, r->in[0].dt, sizeof(r->in[0].dt));
    memcpy(r->in[1].a, r->in[0].a, sizeof(r->in[0].a));
    r->conv = f32_tensor(r->in[0].conv_w, DN_CONV, DN_W);
    r->dt = f32_tensor(r->in[0].dt, DN_NV, 1);
    r->a = f32_tensor(r->in[0].a, DN_NV, 1);
    r->c = (struct eng_ctx){ .m = r->m, .pool = pool, .cpu = &eng_cpu_backend,
                             .be = &eng_cpu_backend };
    CHECK(eng_kv_create(r->m, 64, 2, FL_TYPE_F16, FL_TYPE_F16, &r->c.kv, &err) == 0, "kv create: %s", err.msg);
    CHECK(eng_arena_create(&r->c.arena) == 0, "arena");
}

static void rig_close(struct rig *r)
{
    eng_kv_destroy(r->c.kv);
    eng_arena_destroy(r->c.arena);
    free_fake(r->m);
}

/* Alone in one batch, against the reference; in 3 + 4 tokens over two
 * batches, and beside sequence 1 (staggered), bit for bit the same. */
static void test_delta_net(struct fl_pool *pool, bool grouped)
{
    struct rig r;
    rig_open(&r, pool);
    r.grouped = grouped;
    static double ref[DN_NTOK][DN_NV * DN_D];
    float whole[DN_NTOK * DN_NV * DN_D], split[DN_NTOK * DN_NV * DN_D], mixed[2 * DN_NTOK * DN_NV * DN_D];
    dn_reference(&r.in[0], grouped, ref);
    run_batch(&r, (const struct eng_span[]){ { 0, 0, DN_NTOK, true, false, false, 0 } }, 1, whole);
    double worst = 0;
    for (int t = 0; t < DN_NTOK; t++)
        for (int i = 0; i < DN_NV * DN_D; i++)
            worst = fmax(worst, fabs(whole[t * DN_NV * DN_D + i] - ref[t][i]));
    CHECK(worst < 1e-5, "delta rule vs the double reference: max |diff| %g", worst);
    run_batch(&r, (const struct eng_span[]){ { 0, 0, 3, true, false, false, 0 } }, 1, split);
    run_batch(&r, (const struct eng_span[]){ { 0, 3, DN_NTOK - 3, true, false, false, 0 } }, 1, split + 3 * DN_NV * DN_D);
    CHECK(!memcmp(whole, split, sizeof(whole)), "3 + 4 tokens over two batches differ");
    /* sequence 1 alone, then both: sequence 0 from the start beside 1's prefix */
    float one[DN_NTOK * DN_NV * DN_D];
    run_batch(&r, (const struct eng_span[]){ { 1, 0, DN_NTOK, true, false, false, 0 } }, 1, one);
    run_batch(&r, (const struct eng_span[]){ { 1, 0, 2, true, false, false, 0 }, { 0, 0, 4, true, false, false, 0 } }, 2, mixed);
    run_batch(&r, (const struct eng_span[]){ { 0, 4, 3, true, false, false, 0 }, { 1, 2, 5, true, false, false, 0 } }, 2,
              mixed + 6 * DN_NV * DN_D);
    const size_t row = sizeof(float) * DN_NV * DN_D;
    CHECK(!memcmp(mixed + 2 * DN_NV * DN_D, whole, 4 * row) && !memcmp(mixed + 6 * DN_NV * DN_D, whole + 4 * DN_NV * DN_D, 3 * row),
          "sequence 0 beside sequence 1 differs from alone");
    CHECK(!memcmp(mixed, one, 2 * row) && !memcmp(mixed + 9 * DN_NV * DN_D, one + 2 * DN_NV * DN_D, 5 * row),
          "sequence 1 beside sequence 0 differs from alone");
    printf("delta rule (key heads %s): max |diff| %.2g vs double; split and batched runs "
           "bit-identical\n", grouped ? "grouped" : "tiled", worst);
    rig_close(&r);
}

/* Kimi Delta Attention's form: a decay per key channel (alpha and dt_bias
 * per channel), against the double reference, whole and over two batches. */
static void test_per_channel(struct fl_pool *pool)
{
    struct rig r;
    struct fl_err err;
    rig_open(&r, pool);
    static float alpha[DN_NTOK][DN_NV * DN_D], dt[DN_NV * DN_D];
    static double g[DN_NTOK][DN_NV][DN_D], ref[DN_NTOK][DN_NV * DN_D];
    for (int i = 0; i < DN_NV * DN_D; i++)
        dt[i] = r.in[0].dt[i / DN_D] + 0.4f * sinf((float)i);
    for (int t = 0; t < DN_NTOK; t++)
        for (int i = 0; i < DN_NV * DN_D; i++) {
            alpha[t][i] = r.in[0].alpha[t][i / DN_D] + 0.7f * cosf((float)(3 * i + t));
            g[t][i / DN_D][i % DN_D] = log1p(exp((double)alpha[t][i] + dt[i])) * r.in[0].a[i / DN_D];
        }
    dn_reference_decay(&r.in[0], false, g, ref);
    const struct eng_tensor dt_t = f32_tensor(dt, DN_NV * DN_D, 1);
    const struct eng_delta_net p = { .n_k_head = DN_NK, .n_v_head = DN_NV, .d_state = DN_D,
                                     .per_channel = true, .dt_bias = &dt_t, .a = &r.a,
                                     .eps = 1e-6f };
    float whole[DN_NTOK * DN_NV * DN_D], split[DN_NTOK * DN_NV * DN_D];
    const int cuts[2][2] = { { 0, DN_NTOK }, { 0, 3 } };
    for (int run = 0; run < 2; run++)
        for (int t0 = 0; t0 < DN_NTOK; t0 = cuts[run][1]) {
            const int n = t0 ? DN_NTOK - t0 : cuts[run][1];
            const struct eng_span sp = { 0, t0, n, true, false, false, 0 };
            int32_t tok[DN_NTOK] = { 0 };
            const struct eng_batch in = { .tokens = tok, .n_tok = n, .spans = &sp, .n_spans = 1 };
            struct eng_batch b;
            eng_arena_reset(r.c.arena);
            CHECK(eng_batch_prepare(&r.c, &in, &b, &err) == 0, "prepare: %s", err.msg);
            float *cv = eng_scratch_f32(&r.c, n * DN_W), *be = eng_scratch_f32(&r.c, n * DN_NV);
            for (int t = 0; t < n; t++)
                memcpy(be + t * DN_NV, r.in[0].beta[t0 + t], sizeof(float) * DN_NV);
            cpu_ssm_conv(&r.c, 0, &b, r.in[0].x[t0], &r.conv, 0, cv);
            float *out = (run ? split : whole) + t0 * DN_NV * DN_D;
            cpu_delta_net(&r.c, 0, &b, cv, alpha[t0], be, &p, out);
            if (t0 + n >= DN_NTOK)
                break;
        }
    double worst = 0;
    for (int t = 0; t < DN_NTOK; t++)
        for (int i = 0; i < DN_NV * DN_D; i++)
            worst = fmax(worst, fabs(whole[t * DN_NV * DN_D + i] - ref[t][i]));
    CHECK(worst < 1e-5, "per-channel decay vs the double reference: max |diff| %g", worst);
    CHECK(!memcmp(whole, split, sizeof(whole)), "per-channel: 3 + 4 tokens over two batches differ");
    printf("delta rule, decay per key channel: max |diff| %.2g vs double; split runs "
           "bit-identical\n", worst);
    rig_close(&r);
}

/* The conv of two halves of the channels, each from its own offset in the
 * state, is the conv of the whole: outputs and kept windows bit for bit. */
static void test_conv_offsets(struct fl_pool *pool)
{
    enum { HALF = DN_W / 2 };
    struct rig r;
    struct fl_err err;
    rig_open(&r, pool);
    const struct eng_tensor lo = f32_tensor(r.in[0].conv_w, DN_CONV, HALF);
    const struct eng_tensor hi = f32_tensor(r.in[0].conv_w + HALF * DN_CONV, DN_CONV, HALF);
    static float xs[2][DN_NTOK][HALF], whole[DN_NTOK * DN_W], halves[2][DN_NTOK * HALF];
    static float keep[(DN_CONV - 1) * DN_W];
    for (int t = 0; t < DN_NTOK; t++)
        for (int i = 0; i < DN_W; i++)
            xs[i / HALF][t][i % HALF] = r.in[0].x[t][i];
    for (int run = 0; run < 2; run++) {
        const struct eng_span sp = { run, 0, DN_NTOK, true, false, false, 0 };
        int32_t tok[DN_NTOK] = { 0 };
        const struct eng_batch in = { .tokens = tok, .n_tok = DN_NTOK, .spans = &sp, .n_spans = 1 };
        struct eng_batch b;
        eng_arena_reset(r.c.arena);
        CHECK(eng_batch_prepare(&r.c, &in, &b, &err) == 0, "prepare: %s", err.msg);
        if (!run) {
            cpu_ssm_conv(&r.c, 0, &b, r.in[0].x[0], &r.conv, 0, whole);
            memcpy(keep, eng_kv_rs_conv(r.c.kv, 0, 0), sizeof(keep));
        } else {
            cpu_ssm_conv(&r.c, 0, &b, xs[0][0], &lo, 0, halves[0]);
            cpu_ssm_conv(&r.c, 0, &b, xs[1][0], &hi, (DN_CONV - 1) * HALF, halves[1]);
        }
    }
    bool same = !memcmp(keep, eng_kv_rs_conv(r.c.kv, 0, 1), sizeof(keep));
    for (int t = 0; t < DN_NTOK; t++)
        for (int i = 0; i < DN_W; i++)
            same &= whole[t * DN_W + i] == halves[i / HALF][t * HALF + i % HALF];
    CHECK(same, "the conv in two halves at state offsets differs from the whole");
    printf("conv windows at state offsets: the same bits as one conv\n");
    rig_close(&r);
}

/* Restarting at 0 zeroes the state; a batch that skips or repeats
 * positions is refused with one line; truncating to 0 allows a restart. */
static void test_state_rules(void)
{
    struct rig r;
    struct fl_err err;
    rig_open(&r, NULL);
    float a[DN_NTOK * DN_NV * DN_D], b[DN_NTOK * DN_NV * DN_D];
    run_batch(&r, (const struct eng_span[]){ { 0, 0, DN_NTOK, true, false, false, 0 } }, 1, a);
    run_batch(&r, (const struct eng_span[]){ { 0, 0, DN_NTOK, true, false, false, 0 } }, 1, b);
    CHECK(!memcmp(a, b, sizeof(a)), "a restart at position 0 did not start from zeros");
    CHECK(eng_kv_rs_check(r.c.kv, 0, DN_NTOK, &err) == 0, "continuing at the end refused");
    int rc = eng_kv_rs_check(r.c.kv, 0, 3, &err);
    CHECK(rc == -EINVAL && strstr(err.msg, "covers 7") && !strchr(err.msg, '\n'),
          "going back to 3: rc %d \"%s\"", rc, err.msg);
    rc = eng_kv_rs_check(r.c.kv, 1, 2, &err);
    CHECK(rc == -EINVAL, "a fresh sequence continuing at 2: rc %d", rc);
    eng_kv_seq_truncate(r.c.kv, 0, 3);
    CHECK(eng_kv_rs_check(r.c.kv, 0, 3, &err) == -EINVAL,
          "a state cut back to 3 positions accepted as covering them");
    eng_kv_seq_truncate(r.c.kv, 0, 0);
    CHECK(eng_kv_rs_check(r.c.kv, 0, 0, &err) == 0, "restart after freeing refused");
    CHECK(eng_kv_recurrent(r.c.kv) &&
          eng_kv_rs_bytes(r.c.kv) == 2u * sizeof(float) * ((DN_CONV - 1) * DN_W + DN_NV * DN_D * DN_D),
          "state bytes %llu", (unsigned long long)eng_kv_rs_bytes(r.c.kv));
    printf("state rules: restart zeroes, gaps refused (%s), truncation checked\n", err.msg);
    rig_close(&r);
}

static void test_sigmoid_gate(void)
{
    float y[4] = { 1, 2, 3, 4 }, g[4] = { 0, 100, -100, 0 }, r[2] = { 0, 100 };
    cpu_sigmoid_gate(NULL, y, g, 2, 2, false);
    CHECK(y[0] == 0.5f && y[1] == 2 && y[2] == 0 && y[3] == 2, "per element: %g %g %g %g", y[0],
          y[1], y[2], y[3]);
    cpu_sigmoid_gate(NULL, y, r, 2, 2, true);
    CHECK(y[0] == 0.25f && y[1] == 1 && y[2] == 0 && y[3] == 2, "per row: %g %g %g %g", y[0],
          y[1], y[2], y[3]);
    printf("sigmoid gates: checked\n");
}

int main(void)
{
    fl_types_init();
    struct fl_pool *pool = fl_pool_create(2);
    test_delta_net(pool, false);
    test_delta_net(pool, true);
    test_per_channel(pool);
    test_conv_offsets(pool);
    test_state_rules();
    test_sigmoid_gate();
    fl_pool_destroy(pool);
    return check_summary("test-recurrent");
}

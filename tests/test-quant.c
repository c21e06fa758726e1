/* test-quant.c: the tensor formats against ggml's own numbers.
 *
 * - every tests/data/ref/quant/<TYPE>.bin (FLQV: ggml blocks and the floats
 *   ggml dequantizes them to) dequantizes bit for bit;
 * - for the quantizable types, re-quantizing those floats gives ggml's blocks;
 * - half/bfloat16 conversions against round-to-nearest-even done in double;
 * - Q8_0/Q8_1/Q8_K quantization element by element against ggml's rules
 *   (restated here), including the ties where its two Q8_0 paths differ;
 * - quantize -> dequantize error on random data, per type;
 * - vec_dot_ref against a double-precision dot of the dequantized rows. */
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/tensor-types.h"
#include "tests/check.h"

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* --- FLQV files -------------------------------------------------------------- */

struct flqv {
    char name[17];
    int32_t type, n_blocks, block_bytes, per_block;
    uint8_t *blocks;
    float *values;
    void *buf;
};

static int flqv_read(const char *path, struct flqv *v)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size);
    const bool ok = buf && fread(buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok || size < 40 || memcmp(buf, "FLQV", 4) != 0) {
        free(buf);
        return -EINVAL;
    }
    memset(v, 0, sizeof(*v));
    memcpy(v->name, buf + 8, 16);
    memcpy(&v->type, buf + 24, 4);
    memcpy(&v->n_blocks, buf + 28, 4);
    memcpy(&v->block_bytes, buf + 32, 4);
    memcpy(&v->per_block, buf + 36, 4);
    if (v->n_blocks <= 0 || v->n_blocks > (1 << 20) || v->block_bytes <= 0 || v->block_bytes > 4096 ||
        v->per_block <= 0 || v->per_block > 4096) {
        free(buf);
        return -EINVAL;
    }
    const long want = 40 + (long)v->n_blocks * v->block_bytes + 4L * v->n_blocks * v->per_block;
    if (want != size) {
        free(buf);
        return -EINVAL;
    }
    v->blocks = buf + 40;
    v->values = malloc(4UL * v->n_blocks * v->per_block); /* aligned copy */
    memcpy(v->values, buf + 40 + (long)v->n_blocks * v->block_bytes, 4UL * v->n_blocks * v->per_block);
    v->buf = buf;
    return 0;
}

static const struct { const char *name; bool requant; } k_flqv[] = {
    {"F16", true}, {"BF16", true}, {"Q4_0", true}, {"Q4_1", true},
    {"Q5_0", true}, {"Q5_1", true}, {"Q8_0", true}, {"MXFP4", true},
    {"Q2_K", false}, {"Q3_K", false}, {"Q4_K", false}, {"Q5_K", false},
    {"Q6_K", false}, {"IQ4_NL", false}, {"IQ4_XS", false},
};

static void test_flqv_one(const char *dir, const char *tname, bool requant)
{
    char path[512];
    struct flqv v;
    snprintf(path, sizeof(path), "%s/tests/data/ref/quant/%s.bin", dir, tname);
    int rc = flqv_read(path, &v);
    CHECK(rc == 0, "%s: cannot read (%d)", path, rc);
    if (rc)
        return;
    const struct fl_type_traits *t = fl_type_traits((uint32_t)v.type);
    CHECK(t != NULL, "%s: type id %d unknown", tname, v.type);
    if (!t)
        goto out;
    CHECK(strcmp(t->name, v.name) == 0 && strcmp(t->name, tname) == 0, "%s: name %s / %s", tname, t->name, v.name);
    CHECK(fl_type_by_name(v.name) == v.type, "%s: by name", tname);
    CHECK((int)t->type_size == v.block_bytes && t->blck_size == v.per_block, "%s: block shape %zu/%d vs %d/%d",
          tname, t->type_size, t->blck_size, v.block_bytes, v.per_block);
    const int64_t n = (int64_t)v.n_blocks * v.per_block;
    CHECK(fl_row_size((uint32_t)v.type, n) == (size_t)v.n_blocks * (size_t)v.block_bytes, "%s: row size", tname);
    float *out = malloc((size_t)n * sizeof(float));
    t->to_float(v.blocks, out, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (f2u(out[i]) != f2u(v.values[i]) && !(isnan(out[i]) && isnan(v.values[i]))) {
            if (bad++ < 3)
                printf("  %s value %lld: got %a want %a\n", tname, (long long)i, out[i], v.values[i]);
        }
    CHECK(bad == 0, "%s: %lld of %lld values differ from ggml", tname, (long long)bad, (long long)n);
    printf("ok   %-7s dequantizes %lld values bit-exactly\n", tname, (long long)n);

    /* The files of the quantizable types hold quantizer output (the others
     * hold random bytes): re-quantizing what those blocks dequantize to must
     * give ggml's blocks back. */
    if (requant)
        CHECK(t->from_float != NULL, "%s: no quantizer", tname);
    if (requant && t->from_float) {
        const size_t bytes = (size_t)v.n_blocks * (size_t)v.block_bytes;
        uint8_t *q = calloc(1, bytes);
        t->from_float(v.values, q, n);
        int64_t bad_blocks = 0;
        for (int b = 0; b < v.n_blocks; b++)
            if (memcmp(q + (size_t)b * v.block_bytes, v.blocks + (size_t)b * v.block_bytes, (size_t)v.block_bytes))
                bad_blocks++;
        CHECK(bad_blocks == 0, "%s: %lld of %d re-quantized blocks differ", tname, (long long)bad_blocks, v.n_blocks);
        printf("ok   %-7s re-quantizes to ggml's %d blocks byte for byte\n", tname, v.n_blocks);
        free(q);
    }
    free(out);
out:
    free(v.values);
    free(v.buf);
}

static void test_flqv(const char *dir)
{
    for (size_t i = 0; i < sizeof(k_flqv) / sizeof(k_flqv[0]); i++)
        test_flqv_one(dir, k_flqv[i].name, k_flqv[i].requant);
}

/* --- random numbers (xorshift: the same data on every run) ----------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    return check_xorshift64(&g_rng);
}

static float unif(void) { return (float)(rnd() >> 40) / 16777216.0f; }

static float gauss(void)
{
    const float u = unif() + 1e-7f, v = unif();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static float *random_row(int n, float scale, float offset)
{
    float *x = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        x[i] = gauss() * scale + offset;
    return x;
}

/* --- table ------------------------------------------------------------------ */

static void test_table(void)
{
    static const struct { uint32_t type; const char *name; int blck; size_t size; uint32_t vdt; } want[] = {
        {FL_TYPE_F32, "F32", 1, 4, FL_TYPE_F32},
        {FL_TYPE_F16, "F16", 1, 2, FL_TYPE_F16},
        {FL_TYPE_BF16, "BF16", 1, 2, FL_TYPE_BF16},
        {FL_TYPE_Q4_0, "Q4_0", 32, 18, FL_TYPE_Q8_0},
        {FL_TYPE_Q4_1, "Q4_1", 32, 20, FL_TYPE_Q8_1},
        {FL_TYPE_Q5_0, "Q5_0", 32, 22, FL_TYPE_Q8_0},
        {FL_TYPE_Q5_1, "Q5_1", 32, 24, FL_TYPE_Q8_1},
        {FL_TYPE_Q8_0, "Q8_0", 32, 34, FL_TYPE_Q8_0},
        {FL_TYPE_Q8_1, "Q8_1", 32, 36, FL_TYPE_Q8_1},
        {FL_TYPE_Q2_K, "Q2_K", 256, 84, FL_TYPE_Q8_K},
        {FL_TYPE_Q3_K, "Q3_K", 256, 110, FL_TYPE_Q8_K},
        {FL_TYPE_Q4_K, "Q4_K", 256, 144, FL_TYPE_Q8_K},
        {FL_TYPE_Q5_K, "Q5_K", 256, 176, FL_TYPE_Q8_K},
        {FL_TYPE_Q6_K, "Q6_K", 256, 210, FL_TYPE_Q8_K},
        {FL_TYPE_Q8_K, "Q8_K", 256, 292, FL_TYPE_Q8_K},
        {FL_TYPE_IQ4_NL, "IQ4_NL", 32, 18, FL_TYPE_Q8_0},
        {FL_TYPE_IQ4_XS, "IQ4_XS", 256, 136, FL_TYPE_Q8_K},
        {FL_TYPE_MXFP4, "MXFP4", 32, 17, FL_TYPE_Q8_0},
    };
    int known = 0;
    for (uint32_t id = 0; id < FL_TYPE_COUNT + 5; id++)
        known += fl_type_traits(id) != NULL && !fl_type_traits(id)->is_layout;
    /* the one in-memory layout: known to the table, not by name */
    const struct fl_type_traits *r8 = fl_type_traits(FL_TYPE_Q4_K_R8);
    CHECK(r8 && r8->is_layout && !r8->to_float && !r8->vec_dot_ref &&
              fl_row_size(FL_TYPE_Q4_K_R8, 512) * 8 == 2 * sizeof(struct fl_block_q4_K_r8) &&
              fl_type_by_name("Q4_K_R8") == -1 && FL_TYPE_Q4_K_R8 >= FL_TYPE_FILE_COUNT,
          "Q4_K_R8 traits");
    CHECK(known == (int)(sizeof(want) / sizeof(want[0])), "%d known types", known);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct fl_type_traits *t = fl_type_traits(want[i].type);
        CHECK(t != NULL, "type %u missing", want[i].type);
        if (!t)
            continue;
        CHECK(strcmp(t->name, want[i].name) == 0 && strcmp(fl_type_name(want[i].type), want[i].name) == 0,
              "type %u name %s", want[i].type, t->name);
        CHECK(t->blck_size == want[i].blck && t->type_size == want[i].size, "%s shape", want[i].name);
        CHECK(t->vec_dot_type == want[i].vdt, "%s vec_dot_type %d", want[i].name, t->vec_dot_type);
        CHECK(t->is_quantized == (want[i].blck > 1), "%s is_quantized", want[i].name);
        CHECK(t->to_float != NULL, "%s to_float", want[i].name);
        const bool act_only = want[i].type == FL_TYPE_Q8_1 || want[i].type == FL_TYPE_Q8_K;
        CHECK(act_only ? !t->vec_dot_ref : t->vec_dot_ref && t->vec_dot == t->vec_dot_ref,
              "%s vec_dot", want[i].name);
        CHECK(fl_row_size(want[i].type, 4 * want[i].blck) == 4 * want[i].size, "%s row size", want[i].name);
        CHECK(fl_type_from_float_act(t->vec_dot_type) != NULL, "%s: no activation quantizer", want[i].name);
        char lower[16];
        for (size_t k = 0; k <= strlen(want[i].name); k++)
            lower[k] = (char)(want[i].name[k] >= 'A' && want[i].name[k] <= 'Z' ? want[i].name[k] + 32 : want[i].name[k]);
        CHECK(fl_type_by_name(want[i].name) == (int)want[i].type && fl_type_by_name(lower) == (int)want[i].type,
              "by name %s", lower);
    }
    CHECK(fl_type_traits(4) == NULL && fl_type_traits(FL_TYPE_COUNT) == NULL && fl_type_traits(UINT32_MAX) == NULL,
          "unknown ids");
    CHECK(strcmp(fl_type_name(5), "?") == 0 && fl_row_size(5, 32) == 0, "unknown name/size");
    CHECK(fl_type_by_name("Q4_K_M") == -1 && fl_type_by_name("") == -1 && fl_type_by_name(NULL) == -1, "bad names");
    for (uint32_t id = 0; id < FL_TYPE_COUNT; id++) {
        const struct fl_type_traits *t = fl_type_traits(id);
        if (t && t->from_float)
            CHECK(fl_type_from_float_act(id) != NULL, "act %s", t->name);
    }
    printf("ok   traits table: %d types, shapes, vec_dot_types, names\n", known);
}

static void dummy_dot(int n, float *s, const void *x, const void *y)
{
    (void)n, (void)x, (void)y;
    *s = 42.0f;
}

static void test_set_vec_dot(void)
{
    const struct fl_type_traits *t = fl_type_traits(FL_TYPE_Q4_K);
    fl_type_set_vec_dot(FL_TYPE_Q4_K, dummy_dot);
    CHECK(t->vec_dot == dummy_dot && t->vec_dot_ref != dummy_dot, "set_vec_dot did not install");
    fl_type_set_vec_dot(FL_TYPE_Q4_K, NULL);
    CHECK(t->vec_dot == t->vec_dot_ref, "set_vec_dot(NULL) did not restore the reference");
    fl_type_set_vec_dot(FL_TYPE_Q8_K, dummy_dot); /* no kernel there: ignored */
    fl_type_set_vec_dot(77, dummy_dot);
    CHECK(fl_type_traits(FL_TYPE_Q8_K)->vec_dot == NULL, "set_vec_dot on Q8_K");
    printf("ok   fl_type_set_vec_dot installs and restores kernels\n");
}

/* --- half and bfloat16 -------------------------------------------------------- */

/* |f| rounded to `mant` significant bits, ties to even, in double (exact):
 * the reference the bit-level converters are held to. */
static double round_sig(double a, int mant, int min_exp)
{
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    e -= 1;
    if (e < min_exp)
        e = min_exp; /* subnormals: fixed spacing */
    const double ulp = ldexp(1.0, e - mant);
    return nearbyint(a / ulp) * ulp;
}

static void check_f16(float f, int *bad)
{
    const fl_f16 h = fl_f32_to_f16(f);
    const float back = fl_f16_to_f32(h);
    if (isnan(f)) {
        if ((h & 0x7fff) != 0x7e00 || !isnan(back) || (h >> 15) != (f2u(f) >> 31))
            (*bad)++;
        return;
    }
    double want = round_sig(fabs((double)f), 10, -14);
    if (want >= 65520.0 || isinf(f))
        want = INFINITY;
    else if (want > 65504.0)
        want = 65504.0 * 2; /* cannot happen: a value below 65520 rounds to <= 65504 */
    const double got = fabs((double)back);
    if (got != want || signbit(back) != signbit(f))
        (*bad)++;
}

static void check_bf16(float f, int *bad)
{
    const float back = fl_bf16_to_f32(fl_f32_to_bf16(f));
    if (isnan(f)) {
        if (!isnan(back) || !(fl_f32_to_bf16(f) & 0x40))
            (*bad)++;
        return;
    }
    const double want = isinf(f) ? INFINITY : round_sig(fabs((double)f), 7, -126);
    const double want2 = want > 0x1.fep127 ? INFINITY : want;
    if (fabs((double)back) != want2 || signbit(back) != signbit(f))
        (*bad)++;
}

static void test_halves(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every half survives the round trip */
        const float f = fl_f16_to_f32((fl_f16)h);
        const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan ? !isnan(f) : fl_f32_to_f16(f) != h)
            bad++;
        if (!nan && (h & 0x7c00) == 0 && fabsf(f) != (float)(h & 0x3ff) * 0x1p-24f)
            bad++; /* subnormals are mant * 2^-24 */
    }
    CHECK(bad == 0, "%d halves do not round-trip", bad);
    bad = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 65521) { /* a stride through all floats */
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, 4);
        check_f16(f, &bad);
        check_bf16(f, &bad);
    }
    /* ties and edges: exact halfway points round to even */
    const float edges[] = {65504.0f, 65519.99f, 65520.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                           0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f, 0x1.ffcp-15f, 1.0f + 0x1p-8f,
                           1.0f + 3 * 0x1p-8f, 0x1.fffffep127f, NAN, -NAN, INFINITY, -0.0f,
                           0x1.8p-24f, 0x1.4p-23f, 0x1.cp-23f, 0x1.ffep-15f, 0x1.0p-149f};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        check_f16(edges[i], &bad);
        check_bf16(edges[i], &bad);
        check_f16(-edges[i], &bad);
        check_bf16(-edges[i], &bad);
    }
    CHECK(bad == 0, "%d float -> half/bf16 conversions are not round-to-nearest-even", bad);
    CHECK(fl_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00 && fl_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02,
          "half ties to even");
    CHECK(fl_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80 && fl_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82,
          "bf16 ties to even");
    printf("ok   half/bf16: every half round-trips, float -> half/bf16 is RNE (NaN quiet)\n");
}

/* --- Q8 activation formats, element by element ------------------------------- */

static float amax_of(const float *x, int n)
{
    float amax = 0;
    for (int j = 0; j < n; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    return amax;
}

/* Q8_0 as ggml's reference (ref = true: id = 1/d, round half away from zero)
 * or as llama.cpp's x86 path (id = 127/amax, round half to even). */
static int check_q8_0_block(const float *x, const struct fl_block_q8_0 *b, bool ref)
{
    const float amax = amax_of(x, 32), d = amax / 127.0f;
    const float id = ref ? (d != 0 ? 1.0f / d : 0) : (amax != 0 ? 127.0f / amax : 0);
    int bad = b->d != fl_f32_to_f16(d);
    for (int j = 0; j < 32; j++) {
        const float v = x[j] * id;
        bad += b->qs[j] != (int8_t)(ref ? roundf(v) : rintf(v));
    }
    return bad;
}

static int check_q8_K_block(const float *x, const struct fl_block_q8_K *b)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 256; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax == 0) {
        int bad = b->d != 0;
        for (int j = 0; j < 256; j++)
            bad += b->qs[j] != 0;
        return bad;
    }
    const float iscale = -127.0f / max;
    int bad = f2u(b->d) != f2u(1 / iscale);
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int l = 0; l < 16; l++) {
            const float r = rintf(iscale * x[16 * g + l]);
            const int q = r > 127 ? 127 : (int)r;
            bad += b->qs[16 * g + l] != q;
            sum += q;
        }
        bad += b->bsums[g] != sum;
    }
    return bad;
}

static void test_q8_activations(void)
{
    const int n = 256 * 64;
    float *x = random_row(n, 1.0f, 0.0f);
    for (int i = 0; i < n; i++) { /* blocks of many scales, some with exact halves */
        x[i] *= expf((float)((i / 256) % 16) - 8.0f);
        if ((i / 256) % 5 == 4) /* amax 127 makes id exactly 1: exact halves are ties */
            x[i] = i % 32 == 0 ? 127.0f : (float)((int)(rnd() % 255) - 127) * 0.5f;
    }
    memset(x, 0, 256 * sizeof(float)); /* an all-zero block */
    struct fl_block_q8_0 *q0 = malloc(fl_row_size(FL_TYPE_Q8_0, n));
    struct fl_block_q8_K *qk = malloc(fl_row_size(FL_TYPE_Q8_K, n));
    struct fl_block_q8_1 *q1 = malloc(fl_row_size(FL_TYPE_Q8_1, n));
    int bad_ref = 0, bad_act = 0, bad_k = 0, bad_1 = 0, differ = 0;
    fl_type_traits(FL_TYPE_Q8_0)->from_float(x, q0, n);
    for (int b = 0; b < n / 32; b++)
        bad_ref += check_q8_0_block(x + 32 * b, &q0[b], true);
    fl_type_from_float_act(FL_TYPE_Q8_0)(x, q0, n);
    for (int b = 0; b < n / 32; b++) {
        bad_act += check_q8_0_block(x + 32 * b, &q0[b], false);
        differ += check_q8_0_block(x + 32 * b, &q0[b], true) != 0;
    }
    fl_type_traits(FL_TYPE_Q8_K)->from_float(x, qk, n);
    CHECK(fl_type_from_float_act(FL_TYPE_Q8_K) == fl_type_traits(FL_TYPE_Q8_K)->from_float, "Q8_K act");
    for (int b = 0; b < n / 256; b++)
        bad_k += check_q8_K_block(x + 256 * b, &qk[b]);
    for (int pass = 0; pass < 2; pass++) { /* Q8_1: Q8_0's quants plus s = fp16(d * sum) */
        (pass ? fl_type_from_float_act(FL_TYPE_Q8_1) : fl_type_traits(FL_TYPE_Q8_1)->from_float)(x, q1, n);
        for (int b = 0; b < n / 32; b++) {
            struct fl_block_q8_0 as0 = {.d = q1[b].d};
            memcpy(as0.qs, q1[b].qs, 32);
            int sum = 0;
            for (int j = 0; j < 32; j++)
                sum += q1[b].qs[j];
            bad_1 += check_q8_0_block(x + 32 * b, &as0, pass == 0);
            bad_1 += q1[b].s != fl_f32_to_f16((float)sum * (amax_of(x + 32 * b, 32) / 127.0f));
        }
    }
    CHECK(bad_ref == 0, "Q8_0 from_float: %d values break ggml's reference rule", bad_ref);
    CHECK(bad_act == 0, "Q8_0 activations: %d values break llama.cpp's x86 rule", bad_act);
    CHECK(differ > 0, "no block where the two Q8_0 rules differ: the test data lost its ties");
    CHECK(bad_k == 0, "Q8_K: %d values/bsums break ggml's rule", bad_k);
    CHECK(bad_1 == 0, "Q8_1: %d values break ggml's rule", bad_1);

    /* the tie that separates the two Q8_0 rules: amax 127 gives d = id = 1 */
    float t[32] = {127.0f, 2.5f, -2.5f, 3.5f, 0.5f, -0.5f};
    struct fl_block_q8_0 r, a;
    fl_type_traits(FL_TYPE_Q8_0)->from_float(t, &r, 32);
    fl_type_from_float_act(FL_TYPE_Q8_0)(t, &a, 32);
    CHECK(r.qs[1] == 3 && r.qs[2] == -3 && r.qs[3] == 4 && r.qs[4] == 1 && r.qs[5] == -1, "Q8_0 ref ties away");
    CHECK(a.qs[1] == 2 && a.qs[2] == -2 && a.qs[3] == 4 && a.qs[4] == 0 && a.qs[5] == 0, "Q8_0 act ties even");
    float tk[256] = {-127.0f, 2.5f, 3.5f, -2.5f, 127.0f};
    struct fl_block_q8_K k;
    fl_type_traits(FL_TYPE_Q8_K)->from_float(tk, &k, 256);
    CHECK(k.d == 1.0f && k.qs[0] == -127 && k.qs[1] == 2 && k.qs[2] == 4 && k.qs[3] == -2 && k.qs[4] == 127,
          "Q8_K: the first extreme sets the sign, ties go to even");
    printf("ok   Q8_0 (both rules, %d blocks differ), Q8_1, Q8_K quantize element by element as ggml\n", differ);
    free(x), free(q0), free(qk), free(q1);
}

/* --- quantize -> dequantize error on random data ------------------------------ */

/* Relative RMS error of a round trip through type, over rows of N(off, 1)
 * values at several magnitudes. */
static double roundtrip_error(uint32_t type, int n, float offset, float scale)
{
    const struct fl_type_traits *t = fl_type_traits(type);
    float *x = random_row(n, scale, offset * scale), *y = malloc((size_t)n * sizeof(float));
    void *q = malloc(fl_row_size(type, n));
    t->from_float(x, q, n);
    t->to_float(q, y, n);
    double err = 0, ref = 0;
    for (int i = 0; i < n; i++) {
        err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        ref += (double)x[i] * x[i];
    }
    free(x), free(y), free(q);
    return sqrt(err / ref);
}

static void test_roundtrip_errors(void)
{
    /* Bounds from the formats' step sizes on Gaussian data (e.g. Q4_0: 16
     * levels over the block's absmax ~2.1 sigma gives ~0.08), with headroom;
     * offset data uses the asymmetric formats' min. */
    static const struct { uint32_t type; double bound, bound_off; } want[] = {
        {FL_TYPE_F16, 3e-4, 3e-4},    {FL_TYPE_BF16, 2.5e-3, 2.5e-3},
        {FL_TYPE_Q8_0, 0.008, 0.008}, {FL_TYPE_Q8_1, 0.008, 0.008},
        {FL_TYPE_Q8_K, 0.01, 0.01},   {FL_TYPE_Q5_0, 0.05, 0.05},
        {FL_TYPE_Q5_1, 0.05, 0.02},   {FL_TYPE_Q4_0, 0.1, 0.1},
        {FL_TYPE_Q4_1, 0.1, 0.04},    {FL_TYPE_Q6_K, 0.025, 0.025},
        {FL_TYPE_Q5_K, 0.045, 0.03},  {FL_TYPE_Q4_K, 0.09, 0.06},
        {FL_TYPE_IQ4_NL, 0.09, 0.09}, {FL_TYPE_MXFP4, 0.16, 0.16},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *name = fl_type_name(want[i].type);
        double worst = 0, worst_off = 0;
        /* realistic magnitudes: far below 2^-8 the f16 block scales of the
         * K-quants go subnormal and lose precision (as in ggml) */
        for (int s = -6; s <= 12; s += 6) {
            const float scale = ldexpf(1.0f, s);
            const double e = roundtrip_error(want[i].type, 4096, 0.0f, scale);
            const double eo = roundtrip_error(want[i].type, 4096, 3.0f, scale);
            worst = e > worst ? e : worst;
            worst_off = eo > worst_off ? eo : worst_off;
        }
        CHECK(worst < want[i].bound && worst > 0, "%s: relative RMS error %.4g (bound %.3g)", name, worst, want[i].bound);
        CHECK(worst_off < want[i].bound_off, "%s: offset data error %.4g (bound %.3g)", name, worst_off,
              want[i].bound_off);
        printf("ok   %-7s quantize->dequantize relative RMS error %.4f (offset data %.4f)\n", name, worst, worst_off);
    }
    /* degenerate blocks: all zero and constant rows must stay finite and exact-ish */
    for (uint32_t id = 0; id < FL_TYPE_COUNT; id++) {
        const struct fl_type_traits *t = fl_type_traits(id);
        if (!t || !t->from_float)
            continue;
        float x[512], y[512];
        uint8_t q[4096];
        for (int c = 0; c < 2; c++) {
            for (int i = 0; i < 512; i++)
                x[i] = c ? 0.75f : 0.0f;
            t->from_float(x, q, 512);
            t->to_float(q, y, 512);
            int bad = 0;
            for (int i = 0; i < 512; i++)
                bad += !(fabsf(y[i] - x[i]) <= 0.2f * fabsf(x[i]));
            CHECK(bad == 0, "%s: %s row does not come back (%d values, e.g. %g)", t->name, c ? "constant" : "zero",
                  bad, y[0]);
        }
    }
    printf("ok   zero and constant rows survive every quantizer\n");

    /* Rows made of exactly representable values (table entries times a
     * power of two) must come back exactly from the lookup-table formats. */
    const uint32_t luts[] = {FL_TYPE_IQ4_NL, FL_TYPE_MXFP4};
    for (int k = 0; k < 2; k++) {
        const int8_t *lut = luts[k] == FL_TYPE_IQ4_NL ? fl_iq4nl_values : fl_mxfp4_values;
        float x[256], y[256];
        uint8_t q[256];
        for (int i = 0; i < 256; i++) {
            const int idx = i % 32 == 0 ? (luts[k] == FL_TYPE_IQ4_NL ? 0 : 7) : (int)(rnd() % 16);
            x[i] = ldexpf((float)lut[idx], -4 - (i / 32));
        }
        fl_type_traits(luts[k])->from_float(x, q, 256);
        fl_type_traits(luts[k])->to_float(q, y, 256);
        int bad = 0;
        for (int i = 0; i < 256; i++)
            bad += x[i] != y[i];
        CHECK(bad == 0, "%s: %d representable values not reproduced", fl_type_name(luts[k]), bad);
    }
    printf("ok   IQ4_NL and MXFP4 reproduce exactly representable rows\n");
}

/* --- vec_dot_ref against the dequantized dot product ------------------------- */

/* A weight row of type: quantized from random floats where faultline can
 * quantize; otherwise random bytes with the f16 super-block scales set to
 * sane positive values (the layouts of Q2_K, Q3_K and IQ4_XS). */
static void *weight_row(uint32_t type, int n)
{
    const struct fl_type_traits *t = fl_type_traits(type);
    const size_t size = fl_row_size(type, n);
    uint8_t *q = malloc(size);
    if (t->from_float) {
        float *x = random_row(n, 0.05f, type == FL_TYPE_Q4_1 || type == FL_TYPE_Q5_1 ? 0.02f : 0.0f);
        t->from_float(x, q, n);
        free(x);
        return q;
    }
    for (size_t i = 0; i < size; i++)
        q[i] = (uint8_t)rnd();
    for (size_t b = 0; b < size / t->type_size; b++) {
        uint8_t *blk = q + b * t->type_size;
        const fl_f16 d = fl_f32_to_f16(ldexpf(1.0f + unif(), -(int)(rnd() % 10) - 4));
        const fl_f16 dmin = fl_f32_to_f16(ldexpf(1.0f + unif(), -(int)(rnd() % 10) - 4));
        if (type == FL_TYPE_Q2_K) {
            memcpy(blk + offsetof(struct fl_block_q2_K, d), &d, 2);
            memcpy(blk + offsetof(struct fl_block_q2_K, dmin), &dmin, 2);
        } else if (type == FL_TYPE_Q3_K) {
            memcpy(blk + offsetof(struct fl_block_q3_K, d), &d, 2);
        } else if (type == FL_TYPE_IQ4_XS) {
            memcpy(blk + offsetof(struct fl_block_iq4_xs, d), &d, 2);
        }
    }
    return q;
}

/* Q8_1 carries s = fp16(d * sum(q)), which ggml's Q4_1/Q5_1 kernels use for
 * the min term instead of the exact d * sum: the dequantized dot differs by
 * sum over blocks of m * (s - d*sum(q)). */
static double q8_1_s_correction(uint32_t type, const void *x, const void *y, int n)
{
    if (type != FL_TYPE_Q4_1 && type != FL_TYPE_Q5_1)
        return 0;
    const struct fl_block_q8_1 *yb = y;
    double c = 0;
    for (int b = 0; b < n / 32; b++) {
        fl_f16 m;
        const size_t bs = fl_type_traits(type)->type_size;
        memcpy(&m, (const uint8_t *)x + b * bs + 2, 2); /* d then m in both */
        int sum = 0;
        for (int j = 0; j < 32; j++)
            sum += yb[b].qs[j];
        c += (double)fl_f16_to_f32(m) * ((double)fl_f16_to_f32(yb[b].s) - (double)fl_f16_to_f32(yb[b].d) * sum);
    }
    return c;
}

static void test_vec_dot_one(uint32_t type, int n, int *bad, double *worst)
{
    const struct fl_type_traits *t = fl_type_traits(type);
    const struct fl_type_traits *yt = fl_type_traits(t->vec_dot_type);
    void *x = weight_row(type, n);
    float *a = random_row(n, 1.0f, 0.1f);
    void *y = malloc(fl_row_size(t->vec_dot_type, n));
    fl_type_from_float_act(t->vec_dot_type)(a, y, n);
    float *xd = malloc((size_t)n * sizeof(float)), *yd = malloc((size_t)n * sizeof(float));
    t->to_float(x, xd, n);
    yt->to_float(y, yd, n);
    double want = q8_1_s_correction(type, x, y, n), mag = 0;
    for (int i = 0; i < n; i++) {
        want += (double)xd[i] * yd[i];
        mag += fabs((double)xd[i] * yd[i]);
    }
    float got = NAN;
    t->vec_dot_ref(n, &got, x, y);
    /* integer dots inside blocks, one float rounding per block product and
     * per accumulation: well under 1e-5 of the magnitude */
    const double rel = fabs(got - want) / (mag + 1e-30);
    if (!(rel < 1e-5)) {
        if ((*bad)++ < 3)
            printf("  %s n=%d: vec_dot_ref %.9g, dequantized dot %.9g\n", t->name, n, got, want);
    }
    *worst = rel > *worst ? rel : *worst;
    free(x), free(a), free(y), free(xd), free(yd);
}

static void test_vec_dot(void)
{
    static const int lengths[] = {256, 512, 2048, 4096, 32, 96, 1056};
    for (uint32_t id = 0; id < FL_TYPE_COUNT; id++) {
        const struct fl_type_traits *t = fl_type_traits(id);
        if (!t || !t->vec_dot_ref)
            continue;
        int bad = 0, runs = 0;
        double worst = 0;
        for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
            if (lengths[l] % t->blck_size || fl_type_traits(t->vec_dot_type)->blck_size > lengths[l])
                continue;
            for (int rep = 0; rep < 8; rep++, runs++)
                test_vec_dot_one(id, lengths[l], &bad, &worst);
        }
        CHECK(bad == 0, "%s: vec_dot_ref off the dequantized dot in %d of %d rows", t->name, bad, runs);
        printf("ok   %-7s vec_dot_ref = dequantized dot (%d rows, worst relative error %.2g)\n", t->name, runs, worst);
    }
}

int main(void)
{
    const char *dir = getenv("FL_SOURCE_DIR");
    if (!dir)
        dir = ".";
    test_table();
    test_set_vec_dot();
    test_flqv(dir);
    test_halves();
    test_q8_activations();
    test_roundtrip_errors();
    test_vec_dot();
    return check_summary("test-quant");
}

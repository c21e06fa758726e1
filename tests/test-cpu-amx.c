/* test-cpu-amx: the AMX int8 kernels give the AVX-512 VNNI kernels' exact
 * bits (Q4_K in the file layout and repacked as Q4_K_R8; Q8_0, Q4_0, IQ4_NL
 * and MXFP4), for every tile
 * shape (1..16 rows, 1..64 tokens), activations at one stride or gathered,
 * rows of extreme quants and scales against activations at +-127; and
 * fl_matmul / fl_matmul_rows, which send products of many tokens to them,
 * give the same bits as the VNNI kernels. FL_CPU_FEATURES=avx512 turns AMX
 * off. Exit 77 (skipped) on a CPU without AMX or where the OS refuses it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/repack.h"
#include "gguf/tensor-types.h"
#include "tests/check.h"

enum { NROW = 40, NTOK = 70 };

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void) { return (uint32_t)(check_xorshift64(&g_rng) >> 16); }

/* aligned_alloc wants a size that is a multiple of the alignment */
static void *alloc64(size_t n) { return aligned_alloc(64, (n + 63) & ~(size_t)63); }

/* Q4_K rows: random bytes, super-block scales 2^-12..2^-8 (mins signed as
 * they come); row 3 all 0xff (quants 15, scales and mins 63). */
static void q4k_rows(char *w, size_t rs, int n)
{
    for (int r = 0; r < NROW; r++) {
        struct fl_block_q4_K *b = (struct fl_block_q4_K *)(w + (size_t)r * rs);
        for (size_t i = 0; i < rs; i++)
            ((unsigned char *)b)[i] = r == 3 ? 0xff : (unsigned char)rnd();
        for (int i = 0; i < n / FL_QK_K; i++) {
            b[i].d = fl_f32_to_f16((float)(1 + rnd() % 16) / 4096.0f);
            b[i].dmin = fl_f32_to_f16((float)(1 + rnd() % 16) / 8192.0f);
        }
    }
}

/* NTOK activation rows (Q8_K); rows 0 and 1 at +127 and -127. */
static void q8k_rows(const struct fl_cpu_kernels *k, char *xa, size_t as, int n)
{
    float *x = malloc((size_t)n * sizeof(float));
    for (int c = 0; c < NTOK; c++) {
        for (int i = 0; i < n; i++)
            x[i] = c == 0 ? 1.0f : c == 1 ? -1.0f : (float)((int)(rnd() % 2001) - 1000) / 997.0f;
        k->quant[FL_TYPE_Q8_K](x, xa + (size_t)c * as, n);
    }
    free(x);
}

/* One kernel (file rows or repacked groups) on every shape against ref. */
static int tile_shapes(const struct fl_cpu_kernels *k, uint32_t t, const char *w, size_t ws,
                       int n, const char *xa, size_t as, float ref[NTOK][NROW], int step_r)
{
    static const int k_nc[] = { 1, 2, 7, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64 };
    int bad = 0;
    const void *xs[FL_TILE_MAX_C];
    float out[FL_TILE_MAX_C][FL_TILE_MAX_R], *ys[FL_TILE_MAX_C];
    for (int nr = step_r; nr <= k->amx_r[t]; nr += step_r)
        for (size_t ci = 0; ci < sizeof(k_nc) / sizeof(k_nc[0]); ci++)
            for (int gathered = 0; gathered < 2; gathered++) {
                const int nc = k_nc[ci], r0 = t == FL_TYPE_Q4_K_R8 ? 8 * (nr % 3 == 0) : nr % 5;
                int tok[FL_TILE_MAX_C];
                for (int c = 0; c < nc; c++) { /* gathered: tokens out of order */
                    tok[c] = gathered ? (c * 37 + 5) % NTOK : c + 2;
                    xs[c] = xa + (size_t)tok[c] * as;
                    ys[c] = out[c];
                }
                k->amx[t](n, nr, w + (size_t)r0 * ws, ws, nc, xs, NULL, ys);
                for (int c = 0; c < nc; c++)
                    for (int r = 0; r < nr; r++)
                        bad += memcmp(&out[c][r], &ref[tok[c]][r0 + r], 4) != 0;
            }
    return bad;
}

static void test_q4_K(const struct fl_cpu_kernels *amx, const struct fl_cpu_kernels *vnni)
{
    static const int k_lens[] = { 256, 768, 2304, 4096 };
    for (int li = 0; li < 4; li++) {
        const int n = k_lens[li];
        const size_t rs = fl_row_size(FL_TYPE_Q4_K, n), rs8 = fl_row_size(FL_TYPE_Q4_K_R8, n);
        const size_t as = fl_row_size(FL_TYPE_Q8_K, n);
        char *w = malloc(rs * NROW), *w8 = alloc64(rs8 * NROW), *xa = malloc(as * NTOK);
        float(*ref)[NROW] = malloc(sizeof(float[NTOK][NROW]));
        q4k_rows(w, rs, n);
        q8k_rows(vnni, xa, as, n);
        CHECK(fl_repack(FL_TYPE_Q4_K, w, w8, n, NROW) == 0, "repack n=%d", n);
        for (int c = 0; c < NTOK; c++)
            for (int r = 0; r < NROW; r++)
                vnni->vec_dot[FL_TYPE_Q4_K](n, &ref[c][r], w + (size_t)r * rs, xa + (size_t)c * as);
        const int bad = tile_shapes(amx, FL_TYPE_Q4_K, w, rs, n, xa, as, ref, 1);
        const int bad8 = tile_shapes(amx, FL_TYPE_Q4_K_R8, w8, rs8, n, xa, as, ref, 8);
        CHECK(bad == 0 && bad8 == 0, "n=%d: %d (file rows) and %d (Q4_K_R8) outputs differ "
              "from the VNNI kernel", n, bad, bad8);
        printf("  Q4_K n=%-5d amx = vnni bit for bit, file rows and Q4_K_R8: %s\n", n,
               bad || bad8 ? "no" : "yes");
        free(w);
        free(w8);
        free(xa);
        free(ref);
    }
}

/* Rows of a Q8_0-activation type: random bytes (row 3 all 0x80, row 4 all
 * 0xff, row 5 all 0x77: the quants at their extremes) with the scale of
 * every block set to 2^-12..2^-8 (MXFP4: exponents 2^-9..2^0). */
static void q8_family_rows(uint32_t t, char *w, size_t rs, int n)
{
    const size_t bs = fl_type_traits(t)->type_size;
    for (int r = 0; r < NROW; r++) {
        unsigned char *row = (unsigned char *)w + (size_t)r * rs;
        for (size_t i = 0; i < rs; i++)
            row[i] = r == 3 ? 0x80 : r == 4 ? 0xff : r == 5 ? 0x77 : (unsigned char)rnd();
        for (int b = 0; b < n / 32; b++) {
            unsigned char *blk = row + (size_t)b * bs;
            if (t == FL_TYPE_MXFP4) {
                blk[0] = (unsigned char)(118 + rnd() % 10);
            } else {
                const fl_f16 d = fl_f32_to_f16((float)(1 + rnd() % 16) / 4096.0f);
                memcpy(blk, &d, sizeof(d));
            }
        }
    }
}

/* Q8_0, Q4_0, IQ4_NL, MXFP4 against Q8_0 activations with rows at +-127. */
static void test_q8_family(const struct fl_cpu_kernels *amx, const struct fl_cpu_kernels *vnni,
                           uint32_t t)
{
    static const int k_lens[] = { 32, 96, 1024, 4096 };
    for (int li = 0; li < 4; li++) {
        const int n = k_lens[li];
        const size_t rs = fl_row_size(t, n), as = fl_row_size(FL_TYPE_Q8_0, n);
        char *w = malloc(rs * NROW), *xa = malloc(as * NTOK);
        float(*ref)[NROW] = malloc(sizeof(float[NTOK][NROW]));
        float *x = malloc((size_t)n * sizeof(float));
        q8_family_rows(t, w, rs, n);
        for (int c = 0; c < NTOK; c++) {
            for (int i = 0; i < n; i++)
                x[i] = c == 0 ? 1.0f : c == 1 ? -1.0f : (float)((int)(rnd() % 2001) - 1000) / 997.0f;
            vnni->quant[FL_TYPE_Q8_0](x, xa + (size_t)c * as, n);
        }
        for (int c = 0; c < NTOK; c++)
            for (int r = 0; r < NROW; r++)
                vnni->vec_dot[t](n, &ref[c][r], w + (size_t)r * rs, xa + (size_t)c * as);
        const int bad = tile_shapes(amx, t, w, rs, n, xa, as, ref, 1);
        CHECK(bad == 0, "%s n=%d: %d outputs differ from the VNNI kernel", fl_type_name(t), n, bad);
        printf("  %-6s n=%-5d amx = vnni bit for bit: %s\n", fl_type_name(t), n, bad ? "no" : "yes");
        free(w);
        free(xa);
        free(ref);
        free(x);
    }
}

/* fl_matmul (many tokens: AMX) and fl_matmul_rows (gathered) against the
 * VNNI vec_dot, on the file rows and on the repacked layout. */
static void test_matmul(const struct fl_cpu_kernels *vnni)
{
    const int n = 768;
    const size_t rs = fl_row_size(FL_TYPE_Q4_K, n), rs8 = fl_row_size(FL_TYPE_Q4_K_R8, n);
    char *w = malloc(rs * NROW), *w8 = alloc64(rs8 * NROW);
    float *x = malloc(sizeof(float) * (size_t)n * NTOK), *y = malloc(sizeof(float) * NROW * NTOK);
    float *ref = malloc(sizeof(float) * NROW * NTOK);
    void *scratch = malloc(fl_matmul_scratch_size(FL_TYPE_Q4_K, n, NTOK));
    q4k_rows(w, rs, n);
    CHECK(fl_repack(FL_TYPE_Q4_K, w, w8, n, NROW) == 0, "repack");
    for (int i = 0; i < n * NTOK; i++)
        x[i] = (float)((int)(rnd() % 2001) - 1000) / 731.0f;
    struct fl_qact xq;
    CHECK(fl_quantize_act(NULL, FL_TYPE_Q4_K, x, n, NTOK, n, scratch, &xq) == 0, "quantize");
    for (int c = 0; c < NTOK; c++)
        for (int r = 0; r < NROW; r++)
            vnni->vec_dot[FL_TYPE_Q4_K](n, &ref[c * NROW + r], w + (size_t)r * rs,
                                        (const char *)xq.data + (size_t)c * xq.row_stride);
    int32_t rows[NTOK];
    for (int i = 0; i < NTOK; i++)
        rows[i] = (i * 29 + 3) % NTOK;
    for (int lay = 0; lay < 2; lay++) {
        const void *wm = lay ? (const void *)w8 : w;
        const uint32_t tm = lay ? FL_TYPE_Q4_K_R8 : FL_TYPE_Q4_K;
        int bad = 0;
        CHECK(fl_matmul_q(NULL, wm, tm, NROW, &xq, y, NROW) == 0, "matmul");
        bad += memcmp(y, ref, sizeof(float) * NROW * NTOK) != 0;
        CHECK(fl_matmul_rows(NULL, wm, tm, NROW, &xq, rows, NTOK, y, NROW, NULL) == 0, "rows");
        for (int i = 0; i < NTOK; i++)
            bad += memcmp(y + i * NROW, ref + rows[i] * NROW, sizeof(float) * NROW) != 0;
        CHECK(bad == 0, "%s: fl_matmul with AMX differs from the VNNI kernel (%d)",
              lay ? "Q4_K_R8" : "Q4_K", bad);
    }
    printf("  fl_matmul / fl_matmul_rows (70 tokens, AMX) = VNNI vec_dot: %s\n",
           failures ? "no" : "yes");
    free(w);
    free(w8);
    free(x);
    free(y);
    free(ref);
    free(scratch);
}

int main(void)
{
    fl_types_init();
    printf("test-cpu-amx: %s\n", fl_cpu_features());
    if (fl_cpu_level() < FL_CPU_AMX) {
        printf("test-cpu-amx: skipped (no AMX int8 on this CPU, or the OS refused tile data)\n");
        return 77;
    }
    CHECK(strncmp(fl_cpu_features(), "amx", 3) == 0, "features: %s", fl_cpu_features());
    struct fl_cpu_kernels amx, vnni;
    fl_cpu_kernels_for(FL_CPU_AMX, &amx);
    fl_cpu_kernels_for(FL_CPU_AVX512, &vnni);
    CHECK(amx.amx[FL_TYPE_Q4_K] && amx.amx[FL_TYPE_Q4_K_R8] && amx.amx[FL_TYPE_Q8_0] &&
              !vnni.amx[FL_TYPE_Q4_K],
          "kernel tables");
    test_q4_K(&amx, &vnni);
    static const uint32_t q8_types[] = { FL_TYPE_Q8_0, FL_TYPE_Q4_0, FL_TYPE_IQ4_NL, FL_TYPE_MXFP4 };
    for (size_t i = 0; i < sizeof(q8_types) / sizeof(q8_types[0]); i++) {
        CHECK(amx.amx[q8_types[i]] != NULL, "no AMX kernel for %s", fl_type_name(q8_types[i]));
        if (amx.amx[q8_types[i]])
            test_q8_family(&amx, &vnni, q8_types[i]);
    }
    test_matmul(&vnni);
    setenv("FL_CPU_FEATURES", "avx512", 1);
    fl_types_init();
    CHECK(fl_cpu_level() == FL_CPU_AVX512 && !fl_cpu_kernels()->amx[FL_TYPE_Q4_K],
          "FL_CPU_FEATURES=avx512 leaves AMX on");
    unsetenv("FL_CPU_FEATURES");
    fl_types_init();
    CHECK(fl_cpu_level() == FL_CPU_AMX, "AMX not back after FL_CPU_FEATURES");
    return check_summary("test-cpu-amx");
}

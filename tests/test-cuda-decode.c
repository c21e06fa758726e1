/* test-cuda-decode.c: the GPU kernels' block decoders (cuda-quant.cu), run
 * on the host, against gguf/tensor-types.h's to_float: every value must
 * be bit-identical, for every type the kernels take. Needs no device: this
 * is what checks the block layouts on machines without a GPU. Also checks
 * that cuBLAS, which is loaded lazily, can be found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda-impl.h"
#include "gguf/tensor-types.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

int main(void)
{
    const uint32_t types[] = {FL_TYPE_F32, FL_TYPE_F16, FL_TYPE_Q8_0, FL_TYPE_MXFP4,
                              FL_TYPE_Q4_K, FL_TYPE_Q5_K, FL_TYPE_Q6_K};
    enum { N = 4096, ROWS = 16 };
    float *x = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * N);
    float *got = malloc(sizeof(float) * N);
    void *q = malloc(N * 4);
    int failures = 0;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        const struct fl_type_traits *tr = fl_type_traits(types[i]);
        int64_t bad = 0, first = -1;
        for (int r = 0; r < ROWS; r++) {
            /* magnitudes from 1e-3 to 1e2 across rows and within a row */
            const float scale = (float)(1e-3 * (1 << (r % 17)));
            for (int j = 0; j < N; j++)
                x[j] = frand() * scale * (1.0f + (float)(j % 37));
            if (r == ROWS - 1)
                memset(x, 0, sizeof(float) * 512); /* all-zero blocks */
            tr->from_float(x, q, N);
            tr->to_float(q, ref, N);
            if (flc_host_decode_row(q, types[i], N, got)) {
                printf("FAIL %s: no decoder\n", tr->name);
                failures++;
                break;
            }
            for (int j = 0; j < N; j++)
                if (memcmp(&got[j], &ref[j], sizeof(float))) {
                    if (first < 0)
                        first = (int64_t)r * N + j;
                    bad++;
                }
        }
        printf("%-6s %d rows of %d: %lld values differ from to_float\n", tr->name, ROWS, N,
               (long long)bad);
        if (bad) {
            const int j = (int)(first % N);
            printf("FAIL %s: first at row %lld value %d\n", tr->name, (long long)(first / N), j);
            failures++;
        }
    }
    /* cuBLAS is dlopen'ed on first use: it must be findable where we built */
    struct fl_err err = {{0}};
    if (flc_blas_load(&err)) {
        printf("FAIL: %s\n", err.msg);
        failures++;
    } else {
        printf("cuBLAS loads (%s)\n", flc_blas.status_string(CUBLAS_STATUS_SUCCESS));
    }
    if (flc_host_decode_row(q, FL_TYPE_Q2_K, 256, got) != -1) {
        printf("FAIL: Q2_K decoded\n");
        failures++;
    }
    free(x), free(ref), free(got), free(q);
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("all passed\n");
    return 0;
}

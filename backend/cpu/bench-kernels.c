/* bench-kernels: GFLOP/s of fl_matmul per weight type, for a decode shape
 * (one token) and a prefill shape (many tokens), to compare with llama.cpp
 * (test-backend-ops -o MUL_MAT -b CPU perf, same m/n/k).
 *
 *   bench-kernels [-t threads] [-k n_in] [-m n_out] [-p prefill_tokens]
 *                 [-T type,type,...] [-s seconds]
 *
 * Q4_K_R8 is Q4_K repacked as resident weights are (AVX-512 VNNI hosts).
 * On a CPU with AMX the first line after the features is the tiles' own
 * peak (register-resident, one thread), the ceiling of the AMX products
 * (FL_CPU_FEATURES=avx512 runs the same products on VNNI).
 *
 * Weights: one row quantized from random floats by the types module,
 * copied to every row (the kernels' speed does not depend on the values). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/threadpool.h"
#include "gguf/tensor-types.h"

struct opts {
    int threads;
    int64_t n_in, n_out, n_prefill;
    double seconds;
    const char *types;
};

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .threads = 2, .n_in = 4096, .n_out = 4096, .n_prefill = 256,
                        .seconds = 0.5,
                        .types = "Q4_0,Q8_0,Q4_K,Q5_K,Q6_K,IQ4_NL,MXFP4,F16,BF16,F32" };
    for (int i = 1; i < argc; i++) {
        int64_t v;
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val) {
            fprintf(stderr, "bench-kernels: %s needs a value (or unknown option)\n", a);
            return -1;
        }
        i++;
        if (strcmp(a, "-t") == 0 && parse_int(val, 1, 1024, &v) == 0)
            o->threads = (int)v;
        else if (strcmp(a, "-k") == 0 && parse_int(val, 256, 1 << 20, &v) == 0 && v % 256 == 0)
            o->n_in = v;
        else if (strcmp(a, "-m") == 0 && parse_int(val, 1, 1 << 20, &v) == 0)
            o->n_out = v;
        else if (strcmp(a, "-p") == 0 && parse_int(val, 2, 1 << 16, &v) == 0)
            o->n_prefill = v;
        else if (strcmp(a, "-s") == 0 && parse_int(val, 1, 60000, &v) == 0)
            o->seconds = (double)v / 1000.0;
        else if (strcmp(a, "-T") == 0)
            o->types = val;
        else {
            fprintf(stderr, "bench-kernels: bad option %s %s (usage: -t threads, -k n_in "
                            "(multiple of 256), -m n_out, -p prefill tokens, -T types, -s ms)\n",
                    a, val);
            return -1;
        }
    }
    return 0;
}

/* Types the types module cannot quantize (Q2_K, Q3_K, IQ4_XS): random
 * bytes with the f16 super-block scales set to 2^-10, so the float steps
 * see ordinary numbers (no subnormals, infinities or NaNs). */
static void random_blocks(uint32_t t, void *w, int64_t n_in)
{
    const struct fl_type_traits *tr = fl_type_traits(t);
    unsigned char *p = w;
    for (size_t i = 0; i < fl_row_size(t, n_in); i++)
        p[i] = (unsigned char)(rand() >> 7);
    const fl_f16 d = fl_f32_to_f16(0x1p-10f);
    for (int64_t b = 0; b < n_in / tr->blck_size; b++) {
        switch (t) {
        case FL_TYPE_Q2_K:
            ((struct fl_block_q2_K *)w)[b].d = ((struct fl_block_q2_K *)w)[b].dmin = d;
            break;
        case FL_TYPE_Q3_K: ((struct fl_block_q3_K *)w)[b].d = d; break;
        case FL_TYPE_IQ4_XS: ((struct fl_block_iq4_xs *)w)[b].d = d; break;
        default: break;
        }
    }
}

static void *make_weights(uint32_t t, int64_t n_in, int64_t n_out);

/* Q4_K_R8: Q4_K rows repacked as a model's resident weights are. */
static void *make_repacked(int64_t n_in, int64_t n_out)
{
    void *w = make_weights(FL_TYPE_Q4_K, n_in, n_out);
    void *r = w && fl_repack_layout(FL_TYPE_Q4_K, n_in, n_out) == FL_TYPE_Q4_K_R8
                  ? aligned_alloc(64, (fl_repack_size(FL_TYPE_Q4_K_R8, n_in, n_out) + 63) & ~(size_t)63)
                  : NULL;
    if (r && fl_repack(FL_TYPE_Q4_K, w, r, n_in, n_out) < 0) {
        free(r);
        r = NULL;
    }
    free(w);
    return r;
}

static void *make_weights(uint32_t t, int64_t n_in, int64_t n_out)
{
    if (t == FL_TYPE_Q4_K_R8)
        return make_repacked(n_in, n_out);
    const size_t rs = fl_row_size(t, n_in);
    char *w = malloc(rs * (size_t)n_out);
    float *row = malloc((size_t)n_in * sizeof(float));
    if (!w || !row) {
        free(w);
        free(row);
        return NULL;
    }
    srand(1);
    for (int64_t i = 0; i < n_in; i++)
        row[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    if (fl_type_traits(t)->from_float)
        fl_type_traits(t)->from_float(row, w, n_in);
    else
        random_blocks(t, w, n_in);
    for (int64_t o = 1; o < n_out; o++)
        memcpy(w + (size_t)o * rs, w, rs);
    free(row);
    return w;
}

/* Runs the matmul repeatedly for about o->seconds; returns wall seconds
 * per call and, in *cpu, process CPU seconds per call (on a shared machine
 * flops per CPU second is the steadier measure of a kernel). */
static double time_matmul(struct fl_pool *pool, const struct opts *o, uint32_t t, const void *w,
                          const float *x, int64_t n_tok, float *y, void *scratch, double *cpu)
{
    fl_matmul(pool, w, t, o->n_in, o->n_out, x, n_tok, y, scratch); /* warm up */
    int reps = 0;
    const double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    double t1;
    do {
        fl_matmul(pool, w, t, o->n_in, o->n_out, x, n_tok, y, scratch);
        reps++;
        t1 = now();
    } while (t1 - t0 < o->seconds);
    *cpu = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
    return (t1 - t0) / reps;
}

static int bench_type(struct fl_pool *pool, const struct opts *o, uint32_t t)
{
    void *w = make_weights(t, o->n_in, o->n_out);
    float *x = malloc((size_t)(o->n_prefill * o->n_in) * sizeof(float));
    float *y = malloc((size_t)(o->n_prefill * o->n_out) * sizeof(float));
    void *scratch = malloc(fl_matmul_scratch_size(t, o->n_in, o->n_prefill) + 1);
    int rc = w && x && y && scratch ? 0 : -ENOMEM;
    for (int64_t i = 0; rc == 0 && i < o->n_prefill * o->n_in; i++)
        x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    const int64_t shapes[2] = { 1, o->n_prefill };
    for (int s = 0; rc == 0 && s < 2; s++) {
        double cpu;
        const double sec = time_matmul(pool, o, t, w, x, shapes[s], y, scratch, &cpu);
        const double flops = 2.0 * (double)o->n_in * (double)o->n_out * (double)shapes[s];
        const double bytes = (double)fl_row_size(t, o->n_in) * (double)o->n_out;
        printf("%-7s %-7s m=%-6lld n=%-5lld k=%-6lld %9.3f ms %8.1f GFLOP/s %6.1f GB/s weights"
               " | %7.1f GFLOP per CPU-second\n",
               fl_type_name(t), s == 0 ? "decode" : "prefill", (long long)o->n_out,
               (long long)shapes[s], (long long)o->n_in, sec * 1e3, flops / sec * 1e-9,
               bytes / sec * 1e-9, flops / cpu * 1e-9);
    }
    free(w);
    free(x);
    free(y);
    free(scratch);
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_opts(argc, argv, &o) < 0)
        return 2;
    fl_types_init();
    struct fl_pool *pool = fl_pool_create(o.threads);
    if (!pool) {
        fprintf(stderr, "bench-kernels: cannot start %d threads: %s\n", o.threads, strerror(errno));
        return 1;
    }
    printf("bench-kernels: %s, %d threads\n", fl_cpu_features(), o.threads);
    const double amx_peak = fl_amx_peak_macs(o.seconds);
    if (amx_peak > 0) /* one thread's tiles, no loads: the ceiling of any AMX product */
        printf("AMX int8 peak (tdpbusd on register tiles, 1 thread): %.1f GOP per CPU-second\n",
               2 * amx_peak * 1e-9);
    char *list = strdup(o.types);
    int rc = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && rc == 0;
         name = strtok_r(NULL, ",", &save)) {
        const int t = strcasecmp(name, "Q4_K_R8") == 0 ? FL_TYPE_Q4_K_R8 : fl_type_by_name(name);
        if (t < 0 || fl_act_type((uint32_t)t) < 0 ||
            (!fl_type_traits((uint32_t)t)->from_float && t != FL_TYPE_Q2_K && t != FL_TYPE_Q4_K_R8 &&
             t != FL_TYPE_Q3_K && t != FL_TYPE_IQ4_XS) ||
            o.n_in % fl_type_traits((uint32_t)t)->blck_size != 0) {
            fprintf(stderr, "bench-kernels: cannot benchmark type '%s'\n", name);
            rc = 2;
            break;
        }
        if (bench_type(pool, &o, (uint32_t)t) < 0) {
            fprintf(stderr, "bench-kernels: out of memory\n");
            rc = 1;
        }
    }
    free(list);
    fl_pool_destroy(pool);
    return rc;
}

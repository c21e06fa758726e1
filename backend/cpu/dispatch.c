/* dispatch.c: CPU feature detection, the scalar kernel set, and installing
 * the chosen level's kernels (fl_types_init). */
#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/cpu.h"

static struct fl_cpu_kernels g_kernels;
static enum fl_cpu_level g_level;
static char g_features[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_inited; /* fl_types_init ran: the lazy path skips it */

/* The portable set: no tile kernels (matmul then calls vec_dot per
 * output), the types module's scalar vec_dots and activation quantizers
 * (llama.cpp's x86 rounding for Q8_0/Q8_1, see fl_type_from_float_act). */
void fl_cpu_kernels_scalar(struct fl_cpu_kernels *k)
{
    memset(k, 0, sizeof(*k));
    k->name = "scalar";
    for (uint32_t t = 0; t < FL_TYPE_COUNT; t++) {
        const struct fl_type_traits *tr = fl_type_traits(t);
        k->vec_dot[t] = k->row_dot[t] = tr ? tr->vec_dot_ref : NULL;
        k->tile_r[t] = k->tile_c[t] = 1;
    }
    for (uint32_t t = 0; t < FL_TYPE_COUNT; t++)
        if (fl_type_traits(t))
            k->quant[t] = fl_type_from_float_act(t);
    /* an interleaved layout has no per-row vec_dot: a kernel of 8 rows */
    k->tile[FL_TYPE_Q4_K_R8] = k->tile1[FL_TYPE_Q4_K_R8] = fl_tile_q4_K_r8_scalar;
    k->tile_r[FL_TYPE_Q4_K_R8] = k->tile1_r[FL_TYPE_Q4_K_R8] = 8;
    k->tile_c[FL_TYPE_Q4_K_R8] = 8;
}

/* F16C straight from CPUID (leaf 1, ecx bit 29): clang's
 * __builtin_cpu_supports does not know it. The OS side (saved YMM state) is
 * what the avx2 check already covers. */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* AMX int8 tiles (CPUID leaf 7: edx bits 24 tile, 25 int8) that Linux
 * lets this process use: tile data is a dynamically enabled state, asked
 * for once per process (arch_prctl ARCH_REQ_XCOMP_PERM, feature 18);
 * without it the first tile instruction raises SIGILL. */
#define FL_ARCH_REQ_XCOMP_PERM 0x1023
#define FL_XFEATURE_XTILEDATA 18
static int cpu_has_amx(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25));
}

static int amx_permitted(void)
{
#ifdef SYS_arch_prctl
    return syscall(SYS_arch_prctl, FL_ARCH_REQ_XCOMP_PERM, FL_XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

static enum fl_cpu_level detect_level(void)
{
    __builtin_cpu_init();
    enum fl_cpu_level lv = FL_CPU_SCALAR;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        lv = FL_CPU_AVX2;
    if (lv == FL_CPU_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni"))
        lv = FL_CPU_AVX512;
    /* FL_CPU_FEATURES only lowers the level (scalar, avx2, avx512 = no
     * AMX); an unknown value is ignored (fl_cpu_features() shows what is
     * in use). The permission is not asked for when AMX is capped off. */
    const char *cap = getenv("FL_CPU_FEATURES");
    if (cap && strcasecmp(cap, "scalar") == 0)
        lv = FL_CPU_SCALAR;
    else if (cap && strcasecmp(cap, "avx2") == 0 && lv > FL_CPU_AVX2)
        lv = FL_CPU_AVX2;
    else if (lv == FL_CPU_AVX512 && !(cap && strcasecmp(cap, "avx512") == 0) &&
             __builtin_cpu_supports("avx512vbmi") && cpu_has_amx() && amx_permitted())
        lv = FL_CPU_AMX;
    return lv;
}

void fl_cpu_kernels_for(enum fl_cpu_level level, struct fl_cpu_kernels *k)
{
    fl_cpu_kernels_scalar(k);
    fl_attn_kernels_scalar(&k->attn);
    if (level >= FL_CPU_AVX2) {
        fl_cpu_kernels_avx2(k);
        fl_attn_kernels_avx2(&k->attn);
    }
    if (level >= FL_CPU_AVX512) {
        fl_cpu_kernels_avx512(k);
        fl_attn_kernels_avx512(&k->attn);
    }
    if (level >= FL_CPU_AMX)
        fl_cpu_kernels_amx(k);
}

static void describe(void)
{
    static const char *const names[] = { "avx2", "fma", "f16c", "avx512f", "avx512bw",
                                         "avx512vl", "avx512vnni", "avx512bf16", "amx-int8" };
    const int has[] = { __builtin_cpu_supports("avx2"), __builtin_cpu_supports("fma"),
                        has_f16c(), __builtin_cpu_supports("avx512f"),
                        __builtin_cpu_supports("avx512bw"), __builtin_cpu_supports("avx512vl"),
                        __builtin_cpu_supports("avx512vnni"),
                        __builtin_cpu_supports("avx512bf16"), cpu_has_amx() };
    size_t off = (size_t)snprintf(g_features, sizeof(g_features), "%s (cpu:", g_kernels.name);
    for (size_t i = 0; i < sizeof(has) / sizeof(has[0]) && off < sizeof(g_features); i++)
        if (has[i])
            off += (size_t)snprintf(g_features + off, sizeof(g_features) - off, " %s", names[i]);
    if (off < sizeof(g_features))
        snprintf(g_features + off, sizeof(g_features) - off, ")");
}

void fl_types_init(void)
{
    g_level = detect_level();
    fl_cpu_kernels_for(g_level, &g_kernels);
    for (uint32_t t = 0; t < FL_TYPE_COUNT; t++)
        if (fl_type_traits(t))
            fl_type_set_vec_dot(t, g_kernels.vec_dot[t]);
    describe();
    atomic_store(&g_inited, 1);
}

static void init_once(void)
{
    if (!atomic_load(&g_inited))
        fl_types_init();
}

const struct fl_cpu_kernels *fl_cpu_kernels(void)
{
    pthread_once(&g_once, init_once);
    return &g_kernels;
}

enum fl_cpu_level fl_cpu_level(void)
{
    pthread_once(&g_once, init_once);
    return g_level;
}

const char *fl_cpu_features(void)
{
    pthread_once(&g_once, init_once);
    return g_features;
}

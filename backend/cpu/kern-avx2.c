/* kern-avx2.c: the x86 kernels for AVX2 + FMA + F16C CPUs (Haswell on). */
#define FL_TGT __attribute__((target("avx2,fma,f16c")))
#define FL_SFX(name) name##_avx2
#define FL_VNNI 0
/* 16 ymm registers: tiles of 8 accumulators plus operands. */
#define FL_QR 2
#define FL_QC 4
#define FL_KR 2
#define FL_KC 4
#define FL_FR 2
#define FL_FC 4
#include "backend/cpu/kern-x86.inc"

/* Q4_K tiles of 8 rows x 4 tokens (16 ymm registers) */
#define T8_KC 4
#include "backend/cpu/kern-q4k-transposed.inc"

void fl_cpu_kernels_avx2(struct fl_cpu_kernels *k)
{
    install_avx2(k);
    install_q4k_avx2(k);
    k->name = "avx2";
}

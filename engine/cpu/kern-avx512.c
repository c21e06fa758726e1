/* kern-avx512.c: the x86 kernels for AVX-512 CPUs with VNNI. They stay on
 * 256-bit vectors (no frequency licence drop, same lane layout as AVX2) and
 * use AVX-512's 32 registers for larger tiles and VNNI for the integer dot
 * products, which give the same int32 lanes as AVX2's maddubs/madd. */
#define FL_TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define FL_SFX(name) name##_avx512
#define FL_VNNI 1
#define FL_QR 4
#define FL_QC 4
#define FL_KR 2
#define FL_KC 4
#define FL_FR 4
#define FL_FC 4
#include "engine/cpu/kern-x86.inc"

void fl_cpu_kernels_avx512(struct fl_cpu_kernels *k)
{
    install_avx512(k);
    k->name = "avx512";
}

/* cpu.h: what the CPU backend detected and chose. */
#ifndef FL_CPU_H
#define FL_CPU_H

/* Detects the CPU's SIMD level, caps it by FL_CPU_FEATURES=scalar|avx2|avx512
 * and installs the fastest kernels of that level: every type's vec_dot in
 * the traits table (gguf/tensor-types.h), the matmul and attention kernels
 * (backend/cpu/cpu-impl.h). Call it once at startup, before other threads
 * use the kernels (matmul calls it on first use otherwise); calling it again
 * re-reads FL_CPU_FEATURES (tests). */
void fl_types_init(void);

/* One line for `faultline version` and bench output, e.g.
 * "avx512 (cpu: avx2 fma f16c avx512f avx512bw avx512vl avx512vnni avx512bf16)":
 * the level in use, then what the CPU has. Calls fl_types_init if needed. */
const char *fl_cpu_features(void);

#endif

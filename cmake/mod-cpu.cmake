# backend/cpu/: the CPU backend — SIMD dispatch, kernels, thread pool,
# matrix multiplication, repacked layouts, and the backend interface's ops
# over them (cpu-backend.c: row ops, attention, the experts of a MoE layer;
# recurrent.c: Gated DeltaNet's conv and recurrence; scratch-bound.c: what
# a pass's host scratch may take, for the memory check at start).
fl_module(cpu
  SOURCES backend/cpu/dispatch.c backend/cpu/kern-avx2.c backend/cpu/kern-avx512.c backend/cpu/kern-amx.c
          backend/cpu/threadpool.c backend/cpu/matmul.c backend/cpu/repack.c
          backend/cpu/cpu-backend.c backend/cpu/cpu-ops.c backend/cpu/indexer.c backend/cpu/msa.c backend/cpu/attention.c backend/cpu/attn-kernels.c
          backend/cpu/cpu-moe.c backend/cpu/model-repack.c backend/cpu/recurrent.c
          backend/cpu/scratch-bound.c
  DEPS model gguf base)
# Every multiply-add in the kernels is written out: with contraction the
# compiler could fuse a product and a sum differently in each ISA's copy of
# a kernel, and the row-transposed kernels reproduce the scalar reference's
# rounding exactly.
set_source_files_properties(backend/cpu/kern-avx2.c backend/cpu/kern-avx512.c backend/cpu/kern-amx.c backend/cpu/repack.c
  backend/cpu/attn-kernels.c PROPERTIES COMPILE_OPTIONS -ffp-contract=off)

fl_test(test-cpu-kernels SOURCES tests/test-cpu-kernels.c MODULES cpu TIMEOUT 120)
fl_test(test-cpu-matmul SOURCES tests/test-cpu-matmul.c MODULES cpu TIMEOUT 120)
fl_test(test-cpu-amx SOURCES tests/test-cpu-amx.c MODULES cpu TIMEOUT 120)
fl_test(test-cpu-pool SOURCES tests/test-cpu-pool.c MODULES cpu TIMEOUT 60)

# Micro-benchmark (not a test): GFLOP/s of fl_matmul per type, decode and prefill.
fl_executable(bench-kernels SOURCES backend/cpu/bench-kernels.c MODULES cpu)

# The CPU forward pass: model + ops + architectures (module `model`), the
# session the CLI drives and the FLRF/FLRT files (module `engine`), and the
# run/eval/bench/compare commands (module `cli-engine`).
fl_module(model
  SOURCES engine/model.c engine/model-repack.c engine/arch.c engine/arch-llama.c engine/arch-qwen3moe.c
          engine/ops.c engine/norm.c engine/attention.c engine/kv-cache.c engine/moe.c
  # arch2: the deepseek2/gpt-oss entries of the registry; gpu: eng_matmul's and
  # eng_moe_ffn's GPU halves (engine/gpu-offload.h, a "no device" stub without CUDA)
  DEPS gguf types cpu arch2 gpu hostmem)

# FLRF/FLRT files (reference logits and routing): outside input, fuzzed on its own.
fl_module(flref SOURCES engine/flref.c DEPS wholefile)

fl_module(engine SOURCES engine/session.c engine/calibrate.c
  DEPS model tokenizer pager placement numa flref wholefile)

fl_module(cli-engine
  SOURCES engine/cli/engine-args.c engine/cli/eval.c engine/cli/compare.c engine/cli/run.c
          engine/cli/bench.c
  DEPS engine sampler chat cpu)

fl_test(test-reference SOURCES tests/test-reference.c MODULES cli-engine TIMEOUT 300)
fl_test(test-engine-ops SOURCES tests/test-engine-ops.c MODULES model)
fl_test(test-engine-session SOURCES tests/test-engine-session.c MODULES cli-engine TIMEOUT 120)
# --calibrate: counts against the test's own routing sink, and the CLI's misuse errors.
fl_test(test-calibrate SOURCES tests/test-calibrate.c MODULES engine TIMEOUT 120)
add_dependencies(test-calibrate faultline)

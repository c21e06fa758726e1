# Where each layer's routed experts live in a GGUF file (pager, benchmarks, inspect).
fl_module(moelayout SOURCES engine/moe-layout.c DEPS gguf types)

# `faultline inspect`: a GGUF file's header, hyperparameters and MoE layout.
fl_module(inspect
  SOURCES engine/cli/inspect.c engine/cli/inspect-model.c engine/cli/inspect-doc.c
          engine/cli/inspect-json.c
  DEPS gguf types moelayout units placement gpu)

fl_test(test-inspect SOURCES tests/test-inspect.c MODULES inspect gguf moelayout types units TIMEOUT 120)

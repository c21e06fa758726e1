# faultline gen: synthetic MoE models of any size, and the streaming GGUF writer.
fl_module(gen SOURCES engine/gguf-writer.c engine/model-gen.c engine/gen-arch.c
          engine/gen-synth.c engine/gen-vocab.c engine/cli/gen.c
          DEPS gguf types units)

fl_test(test-gen SOURCES tests/test-gen.c MODULES gen TIMEOUT 180)

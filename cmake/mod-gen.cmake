# gen/: synthetic MoE models of any size (faultline gen), streamed, deterministic.
fl_module(gen SOURCES gen/model-gen.c gen/gen-arch.c gen/gen-meta.c gen/gen-synth.c gen/gen-vocab.c gen/gen-tokenizer.c DEPS gguf base)

fl_test(test-gen SOURCES tests/test-gen.c MODULES gen cli TIMEOUT 180)

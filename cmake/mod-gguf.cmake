# gguf/: the file format — header reader and its table of keys, the
# streaming writer, ggml's tensor formats (block codecs, quantizers, scalar
# dot products), where each layer's experts lie in the file and how many
# parameters it holds (llama-bench's size label).
fl_module(gguf
  SOURCES gguf/gguf.c gguf/gguf-split.c gguf/gguf-override.c gguf/gguf-keys.c gguf/gguf-writer.c
          gguf/tensor-types.c gguf/tensor-check.c gguf/quant-legacy.c gguf/quant-k.c gguf/quant-nl.c gguf/moe-layout.c
          gguf/tensor-names.c gguf/param-count.c
  DEPS base)
# Bit-exactness with ggml needs every float operation rounded on its own:
# a fused multiply-add (allowed by GNU C's default contraction on FMA
# targets) would change dequantized values and quantizer decisions.
set_source_files_properties(gguf/tensor-types.c gguf/quant-legacy.c gguf/quant-k.c gguf/quant-nl.c
  PROPERTIES COMPILE_OPTIONS -ffp-contract=off)

fl_test(test-gguf SOURCES tests/test-gguf.c MODULES gguf TIMEOUT 120)
fl_test(test-quant SOURCES tests/test-quant.c MODULES gguf TIMEOUT 120)
fl_test(test-param-count SOURCES tests/test-param-count.c MODULES gguf)
fl_test(test-tensor-names SOURCES tests/test-tensor-names.c MODULES gguf LIBS PkgConfig::PCRE2)
fl_fuzz(gguf SOURCES tests/fuzz/fuzz-gguf.c MODULES gguf)

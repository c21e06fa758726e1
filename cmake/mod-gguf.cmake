# The GGUF header reader and its table of known keys.
fl_module(gguf SOURCES engine/gguf.c engine/gguf-keys.c DEPS types)

fl_test(test-gguf SOURCES tests/test-gguf.c MODULES gguf types TIMEOUT 120)
fl_fuzz(gguf SOURCES tests/fuzz/fuzz-gguf.c MODULES gguf types moelayout)

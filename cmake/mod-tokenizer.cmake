# Tokenizers (SPM and byte-level BPE from GGUF metadata), the sampler and
# chat templates.
fl_module(tokenizer SOURCES engine/tokenizer.c engine/tokenizer-spm.c engine/tokenizer-bpe.c
          engine/unicode.c engine/merge-heap.c DEPS gguf LIBS PkgConfig::PCRE2)
fl_module(sampler SOURCES engine/sampler.c)
fl_module(chat SOURCES engine/chat.c DEPS gguf)

fl_test(test-tokenizer SOURCES tests/test-tokenizer.c MODULES tokenizer chat TIMEOUT 120)
fl_test(test-sampler SOURCES tests/test-sampler.c MODULES sampler)

# text/: tokenizers (SPM and byte-level BPE from GGUF metadata, PCRE2
# pre-tokenizers), the sampler, log-probabilities of a logits row, JSON mode's
# and GBNF grammars' token masks, chat templates, the tool calls in an answer and its
# reasoning.
fl_module(text
  SOURCES text/tokenizer.c text/tokenizer-spm.c text/tokenizer-bpe.c text/unicode.c text/chat.c text/eval-tasks.c
          text/chat-gpt-oss.c text/chat-kimi.c text/chat-deepseek.c text/chat-qwen.c text/chat-glm.c text/chat-minimax.c text/chat-kimi-k3.c text/chat-parts.c text/sampler.c text/sampler-order.c text/dry.c text/logprob.c text/json-schema.c text/json-match.c
          text/json-mode.c text/grammar-parse.c text/grammar.c text/constrain.c
          text/tool-calls.c text/tool-stream.c text/reasoning.c text/think-budget.c
  DEPS gguf base LIBS PkgConfig::PCRE2)

fl_test(test-tokenizer SOURCES tests/test-tokenizer.c MODULES text TIMEOUT 120)
fl_test(test-chat SOURCES tests/test-chat.c MODULES text)
fl_test(test-sampler SOURCES tests/test-sampler.c MODULES text)
# DRY, top-n-sigma, XTC, dynamic temperature, mirostat against llama.cpp's samplers.
fl_test(test-sampler-llama SOURCES tests/test-sampler-llama.c MODULES text gguf)
# The targets read fixed data (vocabularies, a model) from the source tree;
# FL_SOURCE_DIR in the environment overrides where that is.
fl_fuzz(tokenizer SOURCES tests/fuzz/fuzz-tokenizer.c MODULES text)
if(TARGET fuzz-tokenizer)
  target_compile_definitions(fuzz-tokenizer PRIVATE FL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
fl_test(test-json-schema SOURCES tests/test-json-schema.c MODULES text)
fl_test(test-tool-calls SOURCES tests/test-tool-calls.c MODULES text)
fl_test(test-reasoning SOURCES tests/test-reasoning.c MODULES text)
fl_fuzz(json-mode SOURCES tests/fuzz/fuzz-json-mode.c MODULES text)
fl_fuzz(json-schema SOURCES tests/fuzz/fuzz-json-schema.c MODULES text)
fl_fuzz(tool-calls SOURCES tests/fuzz/fuzz-tool-calls.c MODULES text)
fl_test(test-grammar SOURCES tests/test-grammar.c MODULES text TIMEOUT 300)
fl_fuzz(grammar SOURCES tests/fuzz/fuzz-grammar.c MODULES text)
fl_fuzz(eval-tasks SOURCES tests/fuzz/fuzz-eval-tasks.c MODULES text)

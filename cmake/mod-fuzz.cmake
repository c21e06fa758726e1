# libFuzzer targets for every parser of outside input (built with
# -DFAULTLINE_FUZZ=ON and CC=clang; scripts/test.sh runs each over
# tests/fuzz/corpus/<name>/), and `faultline tokenize`.
#
# The targets read fixed data (vocabularies, a model) from the source tree;
# FL_SOURCE_DIR in the environment overrides where that is.
fl_fuzz(tokenizer SOURCES tests/fuzz/fuzz-tokenizer.c MODULES tokenizer gguf)
fl_fuzz(flref SOURCES tests/fuzz/fuzz-flref.c MODULES flref)
fl_fuzz(args SOURCES tests/fuzz/fuzz-args.c MODULES units placement chat gguf)
fl_fuzz(trace-json SOURCES tests/fuzz/fuzz-trace-json.c MODULES trace)
foreach(t tokenizer args)
  if(TARGET fuzz-${t})
    target_compile_definitions(fuzz-${t} PRIVATE FL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  endif()
endforeach()

# `faultline tokenize`: the header and the tokenizer only, never the weights.
fl_module(cli-tokenize SOURCES engine/cli/tokenize.c DEPS gguf tokenizer)
fl_test(test-cli-tokenize SOURCES tests/test-cli-tokenize.c MODULES cli-tokenize TIMEOUT 60)

# record/: the files faultline writes for comparison and reads back: FLRF
# logits and FLRT routing (llama.cpp's reference runs, `faultline eval`) and
# the --stats-json document (also read back as a pinned-hot profile), and
# prompt-state files (run --prompt-cache: the header and checksums). Parsers
# of outside input, so the fuzz targets link this and nothing heavier.
fl_module(record SOURCES record/flref.c record/kld-base.c record/stats-json.c record/prompt-state.c DEPS pager base
  LIBS PkgConfig::ZLIB)

fl_fuzz(flref SOURCES tests/fuzz/fuzz-flref.c MODULES record)
fl_fuzz(prompt-state SOURCES tests/fuzz/fuzz-prompt-state.c MODULES record)

# llama-perplexity's base files: its bytes from its logits, the comparison, the refusals.
fl_test(test-kld-base SOURCES tests/test-kld-base.c MODULES record)

# record/: the files faultline writes for comparison and reads back: FLRF
# logits and FLRT routing (llama.cpp's reference runs, `faultline eval`) and
# the --stats-json document (also read back as a pinned-hot profile). Parsers
# of outside input, so the fuzz targets link this and nothing heavier.
fl_module(record SOURCES record/flref.c record/stats-json.c DEPS pager base)

fl_fuzz(flref SOURCES tests/fuzz/fuzz-flref.c MODULES record)

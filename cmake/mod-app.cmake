# app/: the session the CLI drives (placement plan -> pager region -> model,
# KV cache, tokenizer, threads, GPU), the calibration pass, expert
# predictors between engine and pager, and FLRF/FLRT files.
fl_module(app SOURCES app/session.c app/calibrate.c app/flref.c app/predict.c app/stats-json.c
  DEPS model text pager plan cpu cuda gguf base)

fl_test(test-predict SOURCES tests/test-predict.c MODULES app)
fl_test(test-calibrate SOURCES tests/test-calibrate.c MODULES app TIMEOUT 120)
add_dependencies(test-calibrate faultline)
fl_fuzz(flref SOURCES tests/fuzz/fuzz-flref.c MODULES app)

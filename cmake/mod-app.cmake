# app/: the session the CLI drives (placement plan -> pager region -> model,
# KV cache, tokenizer, threads, GPU), the calibration pass, and the expert
# predictors between engine and pager.
fl_module(app SOURCES app/session.c app/check-tensors.c app/scheduler.c app/sched-text.c app/sched-slots.c app/speculate.c app/draft-model.c app/prompt-cache.c app/prompt-file.c app/calibrate.c app/predict.c
  DEPS model text pager plan cpu cuda record gguf base)

fl_test(test-predict SOURCES tests/test-predict.c MODULES app)
fl_test(test-calibrate SOURCES tests/test-calibrate.c MODULES app TIMEOUT 120)
add_dependencies(test-calibrate faultline)
# gpu: the emulated device stays visible (its modes run in the sanitizer build)
fl_test(test-scratch-bound SOURCES tests/test-scratch-bound.c MODULES app TIMEOUT 300)
fl_test(test-batch-invariance SOURCES tests/test-batch-invariance.c MODULES app LABELS gpu
  ARGS host TIMEOUT 900)
# its device modes (the emulated device in the sanitizer build) as two tests of their own, every
# other model each, so the parts run side by side (on a slow host the device modes alone took over
# 900 s in the sanitizer build)
foreach(half even odd)
  add_test(NAME test-batch-invariance-device-${half} COMMAND test-batch-invariance device-${half}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test-batch-invariance-device-${half} PROPERTIES SKIP_RETURN_CODE 77
    LABELS gpu TIMEOUT 1200
    ENVIRONMENT "FL_SOURCE_DIR=${PROJECT_SOURCE_DIR};FL_BUILD_DIR=${PROJECT_BINARY_DIR}")
endforeach()
# gpu: the emulated device stays visible (its mode runs in the sanitizer build)
fl_test(test-speculate SOURCES tests/test-speculate.c MODULES app LABELS gpu TIMEOUT 1500)
fl_test(test-prompt-logprobs SOURCES tests/test-prompt-logprobs.c MODULES app)
fl_test(test-prompt-file SOURCES tests/test-prompt-file.c MODULES app TIMEOUT 300)

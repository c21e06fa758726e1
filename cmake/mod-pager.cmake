# The pager: the GGUF file as one region, experts faulted in with
# userfaultfd + io_uring under a RAM budget (docs/pager.md).
fl_module(pager
  SOURCES pager/pager.c pager/region.c pager/io.c pager/fault.c pager/residency.c pager/stats.c
          pager/policy.c pager/predict.c
  DEPS gguf types moelayout wholefile hostmem
  LIBS PkgConfig::URING)
target_include_directories(fl_pager PRIVATE ${SDT_INCLUDE})

fl_test(test-pager-bytes SOURCES tests/test-pager-bytes.c MODULES pager TIMEOUT 120)
fl_test(test-pager-errors SOURCES tests/test-pager-errors.c MODULES pager TIMEOUT 120)
fl_test(test-pager-pin SOURCES tests/test-pager-pin.c MODULES pager numa TIMEOUT 120)

# Measures UFFDIO_COPY against memfd + UFFDIO_CONTINUE on real slices (docs/pager.md).
fl_executable(pager-bench SOURCES pager/bench.c MODULES moelayout LIBS PkgConfig::URING)

# Predictors and cache policies (docs/prefetch.md).
fl_test(test-predict SOURCES tests/test-predict.c MODULES pager flref)
fl_test(test-policy SOURCES tests/test-policy.c MODULES pager TIMEOUT 60)
# Through the CLI: building it builds `faultline`.
fl_test(test-predict-logits SOURCES tests/test-predict-logits.c MODULES placement gguf TIMEOUT 120)
add_dependencies(test-predict-logits faultline)

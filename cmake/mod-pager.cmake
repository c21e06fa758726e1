# pager/: the GGUF file as one region, experts faulted in with
# userfaultfd + io_uring under a RAM budget (docs/pager.md).
fl_module(pager
  SOURCES pager/pager.c pager/region.c pager/io.c pager/fault.c pager/residency.c pager/stats.c
          pager/policy.c pager/sim.c pager/belady.c
  DEPS base
  LIBS PkgConfig::URING)
target_include_directories(fl_pager PRIVATE ${SDT_INCLUDE})

fl_test(test-pager-bytes SOURCES tests/test-pager-bytes.c MODULES pager plan record TIMEOUT 120)
fl_test(test-pager-errors SOURCES tests/test-pager-errors.c MODULES pager plan TIMEOUT 120)
fl_test(test-pager-pin SOURCES tests/test-pager-pin.c MODULES pager plan TIMEOUT 120)
fl_test(test-policy SOURCES tests/test-policy.c MODULES pager plan record TIMEOUT 60)
fl_test(test-belady SOURCES tests/test-belady.c MODULES pager TIMEOUT 60)

# plan/: where each tensor lives (gpu / ram / disk tier) from PCRE2 rules
# and llama.cpp-style flags, and NUMA placement of threads and host buffers.
fl_module(plan SOURCES plan/placement.c plan/numa.c plan/pager-layout.c DEPS pager gguf base
  LIBS PkgConfig::PCRE2 ${NUMA_LIB})
target_include_directories(fl_plan PUBLIC ${NUMA_INCLUDE})

fl_test(test-placement SOURCES tests/test-placement.c MODULES plan)
fl_test(test-numa SOURCES tests/test-numa.c MODULES plan)
fl_fuzz(args SOURCES tests/fuzz/fuzz-args.c MODULES plan text)
if(TARGET fuzz-args)
  target_compile_definitions(fuzz-args PRIVATE FL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()

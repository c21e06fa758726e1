fl_module(numa SOURCES pager/numa.c LIBS ${NUMA_LIB})
target_include_directories(fl_numa PUBLIC ${NUMA_INCLUDE})
fl_test(test-numa SOURCES tests/test-numa.c MODULES numa)

# base/: what every module may use — errors, sizes as typed on command
# lines, a whole small file in one call, the memory available (MemAvailable,
# memory cgroups' limits), a heap,
# JSON (jansson), and outputs written whole or not at all.
fl_module(base SOURCES base/clock.c base/units.c base/whole-file.c base/host-memory.c base/merge-heap.c
          base/json.c base/out-file.c LIBS PkgConfig::JANSSON)

fl_test(test-units SOURCES tests/test-units.c MODULES base)
fl_test(test-json-python SOURCES tests/test-json-python.c MODULES base)
fl_test(test-host-memory SOURCES tests/test-host-memory.c MODULES base)

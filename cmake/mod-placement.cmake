fl_module(placement SOURCES pager/placement.c DEPS gguf units hostmem LIBS PkgConfig::PCRE2)
fl_test(test-placement SOURCES tests/test-placement.c MODULES placement)

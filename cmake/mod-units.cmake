fl_module(units SOURCES engine/units.c)
fl_test(test-units SOURCES tests/test-units.c MODULES units)

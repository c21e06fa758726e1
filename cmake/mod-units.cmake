fl_module(units SOURCES engine/units.c)
fl_test(test-units SOURCES tests/test-units.c MODULES units)

# Reading a whole small outside file (prompts, profiles, reference data).
fl_module(wholefile SOURCES engine/whole-file.c)

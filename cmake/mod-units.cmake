fl_module(units SOURCES engine/units.c)
# The kernel's estimate of the memory still available ("auto" budgets, placement).
fl_module(hostmem SOURCES engine/host-memory.c)

fl_test(test-units SOURCES tests/test-units.c MODULES units hostmem)

# Reading a whole small outside file (prompts, profiles, reference data).
fl_module(wholefile SOURCES engine/whole-file.c)

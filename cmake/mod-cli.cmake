# The CLI's own commands (others live with the module they drive).
fl_module(cli SOURCES engine/cli/version.c DEPS cpu)
target_compile_definitions(fl_cli PRIVATE FL_VERSION="${PROJECT_VERSION}")

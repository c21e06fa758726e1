# deepseek2 (MLA) and gpt-oss forward passes.
# arch2math: self-contained numerics (YaRN rope tables and factors, SwiGLU-OAI)
# so they build and test without the forward-pass framework.
fl_module(arch2math SOURCES engine/yarn.c engine/arch2-ops.c DEPS gguf types)
# arch2: the architectures (registered by engine/arch.c) over engine/ops.h.
fl_module(arch2
  SOURCES engine/mla.c engine/arch-prenorm.c engine/arch-deepseek2.c engine/arch-gpt-oss.c
  DEPS arch2math model gpu)

fl_test(test-arch2-yarn SOURCES tests/test-arch2-yarn.c MODULES arch2math)
fl_test(test-arch2-mla SOURCES tests/test-arch2-mla.c MODULES arch2)
fl_test(test-arch2-model SOURCES tests/test-arch2-model.c MODULES arch2 engine TIMEOUT 120)

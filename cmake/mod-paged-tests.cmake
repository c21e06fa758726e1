# The pager's acceptance, end to end through the CLI ($FL_CLI, docs/oversize.md):
# bit-identical logits resident vs paged, errors, peak RSS on a generated model.
# The suites run `faultline`, so building them builds it.
foreach(model qwen3moe-tiny-F16 qwen3moe-tiny-Q8_0 mixtral-tiny-Q4_K_M deepseek2-tiny-F16
              gpt-oss-tiny-MXFP4 glm4moe-tiny-F16 glm4moe-tiny-Q8_0 minimax-m2-tiny-F16
              minimax-m2-tiny-Q8_0 qwen35moe-tiny-F16 qwen35moe-tiny-Q8_0 qwen3next-tiny-F16
              qwen3next-tiny-Q8_0 qwen3next-ssm-in-tiny-F16 deepseek32-tiny-F16 glm-dsa-tiny-F16
              kimi-linear-tiny-F16 kimi-k3-tiny-F16 minimax-m3-tiny-F16)
  fl_test(test-paged-logits-${model} SOURCES tests/test-paged-logits.c MODULES plan gguf
    ARGS tests/data/${model}.gguf TIMEOUT 120)
  add_dependencies(test-paged-logits-${model} faultline)
endforeach()

fl_test(test-paged-errors SOURCES tests/test-paged-errors.c MODULES plan gguf TIMEOUT 120)
add_dependencies(test-paged-errors faultline)

# Peak RSS of paged runs on a generated 128 MiB model; RSS means nothing under ASan.
fl_test(test-paged-rss SOURCES tests/test-paged-rss.c MODULES plan gguf LABELS nosanitize
  TIMEOUT 120)
add_dependencies(test-paged-rss faultline)

# Logits of every forward path byte for byte against tests/data/regress/
# (recorded by an earlier build: `test-logits-regress --record`). The device
# modes run only over the emulated device, whose arithmetic is fixed.
fl_test(test-logits-regress SOURCES tests/test-logits-regress.c MODULES plan gguf TIMEOUT 1200)
add_dependencies(test-logits-regress faultline)
if(FAULTLINE_CUDA_EMU)
  target_compile_definitions(test-logits-regress PRIVATE FL_REGRESS_DEVICE=1)
endif()

# A model split into several files (llama.cpp's gguf-split), opened from its first:
# the unsplit model's logits resident and paged, and one line for a broken split.
add_test(NAME test-split-gguf COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-split-gguf.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-split-gguf PROPERTIES TIMEOUT 300 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")

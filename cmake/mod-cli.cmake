# app/cli/: the faultline commands (main.c dispatches; app/cli/commands.h lists them).
fl_module(cli
  SOURCES app/cli/version.c app/cli/engine-args.c app/cli/session-flags.c app/cli/eval.c app/cli/perplexity.c app/cli/kl-divergence.c app/cli/choice-tasks.c app/cli/hellaswag.c app/cli/winogrande.c app/cli/multiple-choice.c app/cli/compare.c app/cli/run.c
          app/cli/bench.c app/cli/bench-args.c app/cli/bench-output.c app/cli/gen.c app/cli/tokenize.c
          app/cli/inspect.c app/cli/inspect-model.c
          app/cli/inspect-doc.c app/cli/batch.c app/cli/batch-files.c app/cli/serve.c app/cli/embed.c
          app/cli/interrupt.c app/cli/run-generate.c app/cli/run-chat.c app/cli/run-cache.c app/cli/progress.c
  DEPS serve app api gen trace text model plan pager cuda cpu gguf base)
target_compile_definitions(fl_cli PRIVATE FL_VERSION="${PROJECT_VERSION}")

fl_test(test-reference SOURCES tests/test-reference.c MODULES cli TIMEOUT 300)
fl_test(test-engine-session SOURCES tests/test-engine-session.c MODULES cli TIMEOUT 120)
fl_test(test-cli-tokenize SOURCES tests/test-cli-tokenize.c MODULES cli TIMEOUT 60)
fl_test(test-inspect SOURCES tests/test-inspect.c MODULES cli TIMEOUT 120)
fl_test(test-predict-logits SOURCES tests/test-predict-logits.c MODULES plan gguf TIMEOUT 120)
add_dependencies(test-predict-logits faultline)
# faultline batch from outside: kill -9 and rerun, SIGINT, clobber refusals (python3 checks).
add_test(NAME test-batch-cli COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-batch-cli.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-batch-cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# faultline bench -npp/-ntg/-npl: llama-batched-bench's table, skips, refusals.
add_test(NAME test-bench-batched COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-bench-batched.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-bench-batched PROPERTIES TIMEOUT 120 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# llama.cpp flags, exit statuses, signals and safe writes of run/gen/eval, from outside.
add_test(NAME test-cli-llama-flags COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-cli-llama-flags.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-cli-llama-flags PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# -ctk/-ctv: quantized KV caches against llama.cpp's runs with the same types.
add_test(NAME test-kv-cache-types COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-kv-cache-types.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-kv-cache-types PROPERTIES TIMEOUT 600 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# run's conversation mode through a pseudo-terminal (python3's pty).
add_test(NAME test-run-chat COMMAND python3 ${PROJECT_SOURCE_DIR}/tests/test-run-chat.py
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-run-chat PROPERTIES TIMEOUT 300 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# faultline bench as llama-bench: lists, -o csv/json/jsonl (python3 checks), -fa, -r, the size label.
add_test(NAME test-bench-llama COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-bench-llama.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-bench-llama PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# eval's logits with AMX on and off (FL_CPU_FEATURES=avx512), byte for byte; 77 without AMX.
add_test(NAME test-amx-logits COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-amx-logits.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-amx-logits PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# scripts/demo.sh on a user's own small file, named relative to the caller's folder (release only:
# it builds the checkout's build/ folder).
add_test(NAME test-demo COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-demo.sh
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-demo PROPERTIES TIMEOUT 600 LABELS nosanitize RUN_SERIAL TRUE
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# Inside a memory cgroup: an auto budget that fits its limit, plans over it refused (root; 77 otherwise).
add_test(NAME test-cgroup-fit COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-cgroup-fit.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-cgroup-fit PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS nosanitize
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# run --prompt-cache from outside: same output, refusals (bash, python3).
add_test(NAME test-prompt-cache-cli COMMAND bash ${PROJECT_SOURCE_DIR}/tests/test-prompt-cache-cli.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-prompt-cache-cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# --override-kv (llama.cpp's): metadata overridden; top-2 + expert_used_count=int:4 = top-4.
add_test(NAME test-override-kv COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-override-kv.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-override-kv PROPERTIES TIMEOUT 120 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# llama.cpp's --rope-* / --yarn-* flags and a file's YaRN, against llama.cpp's logits.
add_test(NAME test-rope-flags COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-rope-flags.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-rope-flags PROPERTIES TIMEOUT 300 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# faultline perplexity against llama-perplexity; batched, paged and alone the same.
add_test(NAME test-perplexity COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-perplexity.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-perplexity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# --check-tensors: broken values and scales refused in one line; untouched models unchanged.
add_test(NAME test-check-tensors COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-check-tensors.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-check-tensors PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# perplexity --hellaswag against llama-perplexity's lines on seven models.
add_test(NAME test-hellaswag COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-hellaswag.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-hellaswag PROPERTIES TIMEOUT 300 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# perplexity --winogrande against llama-perplexity's formula on llama.cpp's logits.
add_test(NAME test-winogrande COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-winogrande.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-winogrande PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# perplexity --multiple-choice against llama-perplexity's lines on seven models.
add_test(NAME test-multiple-choice COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-multiple-choice.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-multiple-choice PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")

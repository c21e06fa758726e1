# serve/: `faultline serve`, the OpenAI-compatible HTTP server (libmicrohttpd)
# over the scheduler: one engine thread, a thread per connection.
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
fl_module(serve SOURCES serve/engine-loop.c serve/engine-request.c serve/http.c serve/endpoints.c serve/embeddings.c
          serve/server.c serve/native.c serve/anthropic.c serve/responses.c serve/slots.c
          DEPS app api text pager base LIBS PkgConfig::MHD)
target_compile_definitions(fl_serve PRIVATE FL_VERSION="${PROJECT_VERSION}") # /props' build_info

# From outside, with the official openai npm client (pinned; installed into the
# build folder on first run) and curl: endpoints, errors, streams, disconnects,
# hostile clients, a 2,000-request soak, SIGTERM.
add_test(NAME test-serve COMMAND bash ${PROJECT_SOURCE_DIR}/tests/test-serve.sh
  $<TARGET_FILE:faultline> ${PROJECT_BINARY_DIR} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-serve PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=;FL_SANITIZE=${FAULTLINE_SANITIZE}")
# Embeddings against llama.cpp's (tests/data/ref/embd), through batch and serve
# (after test-serve: it uses the openai client that test installs).
add_test(NAME test-embeddings COMMAND bash ${PROJECT_SOURCE_DIR}/tests/test-embeddings.sh
  $<TARGET_FILE:faultline> ${PROJECT_BINARY_DIR} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-embeddings PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 DEPENDS test-serve
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# Speculative decoding through run, batch and serve: the same outputs
add_test(NAME test-speculate-cli COMMAND bash ${PROJECT_SOURCE_DIR}/tests/test-speculate-cli.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-speculate-cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
fl_fuzz(api-request SOURCES tests/fuzz/fuzz-api-request.c MODULES api)
# llama-server's slot files (--slot-save-path; curl, python3): save, restore in a new server, erase.
add_test(NAME test-serve-slots COMMAND bash ${PROJECT_SOURCE_DIR}/tests/test-serve-slots.sh
  $<TARGET_FILE:faultline> WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test-serve-slots PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "CUDA_VISIBLE_DEVICES=")

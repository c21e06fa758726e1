# api/: the OpenAI-compatible request and response documents (batch files;
# the server builds on them), with tools and the tool calls of answers
# (tools.c). A parser of outside input: fuzzed.
fl_module(api SOURCES api/openai.c api/sampler-fields.c api/batch-line.c api/response.c api/native.c api/infill.c api/anthropic.c api/responses.c api/tools.c api/tool-grammar.c api/answer.c api/chat-prompt.c api/embeddings.c DEPS text base)

fl_test(test-api SOURCES tests/test-api.c MODULES api)
fl_test(test-api-tools SOURCES tests/test-api-tools.c MODULES api)
fl_test(test-infill SOURCES tests/test-infill.c MODULES api)
fl_test(test-anthropic SOURCES tests/test-anthropic.c MODULES api)
fl_test(test-responses SOURCES tests/test-responses.c MODULES api)
fl_fuzz(api-batch SOURCES tests/fuzz/fuzz-api-batch.c MODULES api)

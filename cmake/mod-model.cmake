# model/: a loaded model (tensor table, hyperparameters) and its forward
# passes, one per architecture.
fl_module(model
  SOURCES model/model.c model/model-repack.c model/arch.c model/arch-llama.c model/arch-qwen3moe.c
          model/arch-deepseek2.c model/arch-gpt-oss.c model/arch-prenorm.c model/mla.c model/yarn.c
          model/arch2-ops.c model/ops.c model/norm.c model/attention.c model/kv-cache.c model/moe.c
  DEPS gguf base cpu cuda)

fl_test(test-arch2-yarn SOURCES tests/test-arch2-yarn.c MODULES model)
fl_test(test-arch2-mla SOURCES tests/test-arch2-mla.c MODULES model)
fl_test(test-arch2-model SOURCES tests/test-arch2-model.c MODULES model app TIMEOUT 120)
fl_test(test-engine-ops SOURCES tests/test-engine-ops.c MODULES model)

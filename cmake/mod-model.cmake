# model/: a loaded model (tensor table, hyperparameters), the backend
# interface its forward passes are written over (model/backend.h), and one
# pass per architecture. Knows no backend: the session hands it the CPU's
# (backend/cpu/) and, with a GPU, backend/cuda/'s choice per pass.
fl_module(model
  SOURCES model/model.c model/forward.c model/scratch.c model/kv-cache.c model/moe-route.c
          model/activation.c model/yarn.c model/arch.c model/arch-prenorm.c model/arch-llama.c
          model/arch-qwen3moe.c model/mla.c model/dsa.c model/kda.c model/msa.c model/arch-kimi-k3.c model/arch-deepseek2.c model/arch-gpt-oss.c
          model/arch-glm4moe.c model/arch-minimax-m2.c model/arch-minimax-m3.c model/arch-qwen35moe.c
  DEPS gguf base)

fl_test(test-arch2-yarn SOURCES tests/test-arch2-yarn.c MODULES model)
fl_test(test-arch2-mla SOURCES tests/test-arch2-mla.c MODULES model cpu)
fl_test(test-arch2-model SOURCES tests/test-arch2-model.c MODULES model cpu app TIMEOUT 120)
fl_test(test-engine-ops SOURCES tests/test-engine-ops.c MODULES model cpu)
fl_test(test-recurrent SOURCES tests/test-recurrent.c MODULES model cpu)
fl_test(test-activation SOURCES tests/test-activation.c MODULES model)
fl_test(test-kv-cache SOURCES tests/test-kv-cache.c MODULES model)

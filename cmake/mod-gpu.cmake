# The CUDA backend inside the forward pass (engine/gpu-offload.h, docs/cuda.md):
# the session's GPU context, eng_matmul's and eng_moe_ffn's GPU halves.
# Built in every configuration: without CUDA it only says "no device".
fl_module(gpu SOURCES engine/gpu-offload.c engine/gpu-forward.c DEPS cuda model placement gguf units arch2math)
# FL_HAVE_CUDA comes from the cuda module (set only when it is built with nvcc).
target_compile_definitions(fl_gpu PRIVATE $<TARGET_PROPERTY:fl_cuda,INTERFACE_COMPILE_DEFINITIONS>)

# Runs everywhere: flag parsing, the offload rule, the no-device behaviour of the CLI.
fl_test(test-gpu-offload SOURCES tests/test-gpu-offload.c MODULES gpu cli-engine TIMEOUT 120)
add_dependencies(test-gpu-offload faultline)
# On a device: CPU vs GPU logits and routing on every model in tests/data (77 without one).
fl_test(test-gpu-engine SOURCES tests/test-gpu-engine.c MODULES gpu cli-engine gen LABELS gpu TIMEOUT 300)
add_dependencies(test-gpu-engine faultline) # its --stats check runs the CLI
# A GPU failing mid-run: one-line error or the same text, never a crash (emulated device only).
fl_test(test-gpu-errors SOURCES tests/test-gpu-errors.c MODULES gpu placement gguf LABELS gpu TIMEOUT 600)
add_dependencies(test-gpu-errors faultline)

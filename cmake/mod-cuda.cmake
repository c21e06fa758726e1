# The CUDA backend (backend/cuda/, docs/cuda.md).
#
# FAULTLINE_CUDA: ON requires nvcc; AUTO builds the backend when nvcc is
# found (on PATH or in /usr/local/cuda/bin); OFF never does. Without it the
# module still exists: the expert-cache bookkeeping (plain C, always
# tested) and discovery calls that report "built without CUDA".
#
# Only kernels are CUDA sources (two .cu files, to keep CI's build short);
# the context, memory, expert cache and cuBLAS calls are C over the runtime
# API, compiled by the C compiler with the project's warnings.
#
# FAULTLINE_CUDA_EMU (tests only, docs/cuda.md "The emulated device"): the
# backend's C sources over a host emulation of the device (backend/cuda/emu/)
# instead of the kernels, cudart and cuBLAS, so that the GPU tests run, under
# sanitizers too, where there is no GPU. Needs the toolkit's headers only.
set(FL_CUDA_ON OFF)
if(FAULTLINE_CUDA_EMU)
  if(FAULTLINE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FAULTLINE_CUDA_EMU replaces the real backend: use FAULTLINE_CUDA=OFF or AUTO with it")
  endif()
  message(STATUS "faultline cuda: emulated device (FAULTLINE_CUDA_EMU, for tests)")
elseif(FAULTLINE_CUDA STREQUAL "AUTO" AND (FAULTLINE_SANITIZE OR FAULTLINE_FUZZ))
  # nvcc links these builds and cudart is not instrumented: AUTO means off
  message(STATUS "faultline cuda: off (sanitizer/fuzz build; FAULTLINE_CUDA=ON to force)")
elseif(NOT FAULTLINE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(FL_NVCC nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    if(FL_NVCC)
      set(CMAKE_CUDA_COMPILER ${FL_NVCC})
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    set(FL_CUDA_ON ON)
  elseif(FAULTLINE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FAULTLINE_CUDA=ON but nvcc was not found (set CMAKE_CUDA_COMPILER)")
  else()
    message(STATUS "faultline cuda: off (nvcc not found)")
  endif()
endif()

if(FL_CUDA_ON)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90")
  endif()
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_C_COMPILER} CACHE FILEPATH "")
  endif()
  # one CUDA runtime, the shared one CUDA::cudart names (the default would
  # add the static one too, as the C linker's implicit CUDA libraries)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "faultline cuda: on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm ${CMAKE_CUDA_ARCHITECTURES})")
  # Executables of the fragments read before this one were made before CUDA
  # was enabled; the forward pass links them to this module (through gpu),
  # so their link step needs the architectures as well.
  get_property(fl_early_targets DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${fl_early_targets})
    get_target_property(fl_t_type ${t} TYPE)
    get_target_property(fl_t_arch ${t} CUDA_ARCHITECTURES)
    if(fl_t_type STREQUAL "EXECUTABLE" AND NOT fl_t_arch)
      set_target_properties(${t} PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
    endif()
  endforeach()

  fl_module(cuda
    SOURCES backend/cuda/cuda-runtime.c backend/cuda/cuda-blas.c backend/cuda/cuda-ops.c backend/cuda/expert-cache.c
            backend/cuda/expert-lru.c backend/cuda/cuda-quant.cu backend/cuda/cuda-ops.cu
            backend/cuda/gpu-rule.c backend/cuda/gpu-open.c backend/cuda/gpu-moe.c
            backend/cuda/gpu-pass.c backend/cuda/gpu-recurrent.c backend/cuda/gpu-offload.c
            backend/cuda/gpu-matmul.c
            backend/cuda/gpu-stats.c
    DEPS model plan pager cpu gguf base
    LIBS CUDA::cudart ${CMAKE_DL_LIBS} stdc++) # stdc++: nvcc's host stubs use its guards
  target_compile_definitions(fl_cuda PUBLIC FL_HAVE_CUDA=1)
  # cuBLAS is dlopen'ed on first use (backend/cuda/cuda-blas.c): linking it
  # costs every process half a second of start-up.
  get_target_property(fl_cublas_loc CUDA::cublas IMPORTED_LOCATION)
  get_filename_component(fl_cublas_dir "${fl_cublas_loc}" DIRECTORY)
  target_compile_definitions(fl_cuda PRIVATE
    FLC_CUBLAS_SONAME="libcublas.so.${CUDAToolkit_VERSION_MAJOR}" FLC_CUBLAS_DIR="${fl_cublas_dir}")
  target_include_directories(fl_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  # The top-level flags (-Wall -Wextra -Werror, sanitizers) are gcc's: nvcc
  # gets the warnings through -Xcompiler for its host code and turns its own
  # warnings into errors likewise; sanitizers stay on the C side (device code
  # cannot use them, and cudart is not built with them).
  get_target_property(fl_cuda_opts fl_cuda COMPILE_OPTIONS)
  set(fl_cuda_c_opts "")
  foreach(opt ${fl_cuda_opts})
    list(APPEND fl_cuda_c_opts "$<$<COMPILE_LANGUAGE:C>:${opt}>")
  endforeach()
  # -ffp-contract=off: the host build of the block decoders (checked by
  # test-cuda-decode) must round like the CPU's to_float, without FMA
  set(fl_cuda_cu_opts -Xcompiler=-Wall,-Wextra,-ffp-contract=off -D_GNU_SOURCE --expt-relaxed-constexpr)
  if(FAULTLINE_WERROR)
    list(APPEND fl_cuda_cu_opts -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  foreach(opt ${fl_cuda_cu_opts})
    list(APPEND fl_cuda_c_opts "$<$<COMPILE_LANGUAGE:CUDA>:${opt}>")
  endforeach()
  set_property(TARGET fl_cuda PROPERTY COMPILE_OPTIONS ${fl_cuda_c_opts})

  # Kernel and expert-cache micro-benchmark (scripts/gpu-check.sh runs it).
  fl_executable(bench-cuda SOURCES backend/cuda/bench-cuda.c MODULES cuda gguf)

  # The kernels' block decoders, run on the host: no device needed.
  fl_test(test-cuda-decode SOURCES tests/test-cuda-decode.c MODULES cuda gguf TIMEOUT 60)
elseif(FAULTLINE_CUDA_EMU)
  # The toolkit's headers only: nothing of CUDA is linked.
  find_package(CUDAToolkit QUIET)
  find_path(FL_CUDA_EMU_INCLUDE cuda_runtime_api.h cublas_v2.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} PATHS /usr/local/cuda/include NO_CACHE)
  if(NOT FL_CUDA_EMU_INCLUDE)
    message(FATAL_ERROR "FAULTLINE_CUDA_EMU needs the CUDA toolkit's headers (cuda_runtime_api.h, cublas_v2.h)")
  endif()
  fl_module(cuda
    SOURCES backend/cuda/cuda-runtime.c backend/cuda/cuda-ops.c backend/cuda/expert-cache.c
            backend/cuda/expert-lru.c backend/cuda/emu/cudart-emu.c backend/cuda/emu/devmem-emu.c
            backend/cuda/emu/kernels-emu.c backend/cuda/emu/recurrent-emu.c backend/cuda/emu/blas-emu.c
            backend/cuda/gpu-rule.c backend/cuda/gpu-open.c backend/cuda/gpu-moe.c
            backend/cuda/gpu-pass.c backend/cuda/gpu-recurrent.c backend/cuda/gpu-offload.c
            backend/cuda/gpu-matmul.c
            backend/cuda/gpu-stats.c
    DEPS model plan pager cpu gguf base) # model: the SwiGLU-OAI kernel is arch2_swiglu_oai
  target_compile_definitions(fl_cuda PUBLIC FL_HAVE_CUDA=1 FL_CUDA_EMU=1)
  target_include_directories(fl_cuda SYSTEM PRIVATE ${FL_CUDA_EMU_INCLUDE})
  # the kernels round each operation on its own (__fmul_rn, no FMA)
  set_source_files_properties(backend/cuda/emu/kernels-emu.c backend/cuda/emu/recurrent-emu.c
    backend/cuda/emu/blas-emu.c PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
else()
  fl_module(cuda SOURCES backend/cuda/cuda-none.c backend/cuda/expert-lru.c backend/cuda/gpu-rule.c
            backend/cuda/gpu-none.c
    DEPS model plan pager cpu gguf base)
endif()

if(FL_CUDA_ON OR FAULTLINE_CUDA_EMU)
  # GPU tests: skip (77) where there is no device; always run on the emulated one.
  fl_test(test-cuda-kernels SOURCES tests/test-cuda-kernels.c MODULES cuda cpu model LABELS gpu TIMEOUT 120)
  fl_test(test-cuda-xcache SOURCES tests/test-cuda-xcache.c MODULES cuda LABELS gpu TIMEOUT 120)
endif()

# Host bookkeeping of the expert cache: runs everywhere.
fl_test(test-cuda-lru SOURCES tests/test-cuda-lru.c MODULES cuda TIMEOUT 60)

# The GPU backend of the forward pass (backend/cuda/gpu.h, docs/cuda.md).
# Runs everywhere: flag parsing, the offload rule, the no-device behaviour of the CLI.
fl_test(test-gpu-offload SOURCES tests/test-gpu-offload.c MODULES cuda cli TIMEOUT 120)
add_dependencies(test-gpu-offload faultline)
# On a device: CPU vs GPU logits and routing on every model in tests/data (77 without one).
fl_test(test-gpu-engine SOURCES tests/test-gpu-engine.c MODULES cuda cli gen LABELS gpu TIMEOUT 300)
add_dependencies(test-gpu-engine faultline) # its --stats check runs the CLI
# A GPU failing mid-run: one-line error or the same text, never a crash (emulated device only).
fl_test(test-gpu-errors SOURCES tests/test-gpu-errors.c MODULES cuda plan gguf LABELS gpu TIMEOUT 600)
add_dependencies(test-gpu-errors faultline)

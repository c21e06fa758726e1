# The CUDA backend (engine/cuda/, docs/cuda.md).
#
# FAULTLINE_CUDA: ON requires nvcc; AUTO builds the backend when nvcc is
# found (on PATH or in /usr/local/cuda/bin); OFF never does. Without it the
# module still exists: the expert-cache bookkeeping (plain C, always
# tested) and discovery calls that report "built without CUDA".
#
# Only kernels are CUDA sources (two .cu files, to keep CI's build short);
# the context, memory, expert cache and cuBLAS calls are C over the runtime
# API, compiled by the C compiler with the project's warnings.
set(FL_CUDA_ON OFF)
if(NOT FAULTLINE_CUDA STREQUAL "OFF")
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

  fl_module(cuda
    SOURCES engine/cuda/cuda-runtime.c engine/cuda/cuda-ops.c engine/cuda/expert-cache.c
            engine/cuda/expert-lru.c engine/cuda/cuda-quant.cu engine/cuda/cuda-ops.cu
    DEPS types cpu
    LIBS CUDA::cudart CUDA::cublas stdc++) # nvcc's host stubs use C++ runtime guards
  target_compile_definitions(fl_cuda PUBLIC FL_HAVE_CUDA=1)
  # The top-level flags (-Wall -Wextra -Werror, sanitizers) are gcc's: nvcc
  # gets the warnings through -Xcompiler for its host code and turns its own
  # warnings into errors likewise; sanitizers stay on the C side (device code
  # cannot use them, and cudart is not built with them).
  get_target_property(fl_cuda_opts fl_cuda COMPILE_OPTIONS)
  set(fl_cuda_c_opts "")
  foreach(opt ${fl_cuda_opts})
    list(APPEND fl_cuda_c_opts "$<$<COMPILE_LANGUAGE:C>:${opt}>")
  endforeach()
  set(fl_cuda_cu_opts -Xcompiler=-Wall,-Wextra -D_GNU_SOURCE --expt-relaxed-constexpr)
  if(FAULTLINE_WERROR)
    list(APPEND fl_cuda_cu_opts -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  foreach(opt ${fl_cuda_cu_opts})
    list(APPEND fl_cuda_c_opts "$<$<COMPILE_LANGUAGE:CUDA>:${opt}>")
  endforeach()
  set_property(TARGET fl_cuda PROPERTY COMPILE_OPTIONS ${fl_cuda_c_opts})

  # GPU tests: skip (77) where there is no device.
  fl_test(test-cuda-kernels SOURCES tests/test-cuda-kernels.c MODULES cuda cpu LABELS gpu TIMEOUT 120)
  fl_test(test-cuda-xcache SOURCES tests/test-cuda-xcache.c MODULES cuda LABELS gpu TIMEOUT 120)
else()
  fl_module(cuda SOURCES engine/cuda/cuda-none.c engine/cuda/expert-lru.c DEPS types cpu)
endif()

# Host bookkeeping of the expert cache: runs everywhere.
fl_test(test-cuda-lru SOURCES tests/test-cuda-lru.c MODULES cuda TIMEOUT 60)

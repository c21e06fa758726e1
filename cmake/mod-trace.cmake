# faultline trace: per-expert fault, I/O and copy latency with eBPF (docs/trace.md).
#
# The report side (tables, trace-event JSON, HTML, `trace report`) always
# builds. The live side (BPF programs, skeleton, libbpf) builds when
# FAULTLINE_BPF is ON, or AUTO and clang + bpftool + libbpf + BTF are found.
# vmlinux.h is generated at build time from the build machine's BTF; where
# it has none, point FAULTLINE_BPF_VMLINUX at a vmlinux.h made elsewhere
# (`bpftool btf dump file /sys/kernel/btf/vmlinux format c`): no 3 MB copy
# is committed.
set(FAULTLINE_BPF_VMLINUX "" CACHE FILEPATH "vmlinux.h to use instead of one generated from /sys/kernel/btf/vmlinux")

set(FL_TRACE_BPF OFF)
set(FL_TRACE_WHY "FAULTLINE_BPF=OFF")
if(NOT FAULTLINE_BPF STREQUAL "OFF")
  find_program(FL_BPF_CLANG NAMES clang clang-16 clang-15 clang-14)
  find_program(FL_BPFTOOL bpftool PATHS /usr/sbin /usr/local/sbin)
  pkg_check_modules(LIBBPF QUIET IMPORTED_TARGET libbpf>=1.0)
  if(NOT FL_BPF_CLANG)
    set(FL_TRACE_WHY "clang not found")
  elseif(NOT FL_BPFTOOL)
    set(FL_TRACE_WHY "bpftool not found")
  elseif(NOT LIBBPF_FOUND)
    set(FL_TRACE_WHY "libbpf >= 1.0 (libbpf-dev) not found")
  elseif(NOT FAULTLINE_BPF_VMLINUX AND NOT EXISTS /sys/kernel/btf/vmlinux)
    set(FL_TRACE_WHY "no kernel BTF at /sys/kernel/btf/vmlinux (set FAULTLINE_BPF_VMLINUX to a vmlinux.h)")
  else()
    set(FL_TRACE_BPF ON)
  endif()
  if(NOT FL_TRACE_BPF)
    if(FAULTLINE_BPF STREQUAL "ON")
      message(FATAL_ERROR "FAULTLINE_BPF=ON but ${FL_TRACE_WHY}")
    endif()
    message(STATUS "faultline trace: live tracing off (${FL_TRACE_WHY})")
  endif()
endif()

# zlib: `--out FILE.json.gz` is written compressed, and `trace report` reads it.
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
set(FL_TRACE_SOURCES ebpf/cli-trace.c ebpf/trace-stats.c ebpf/trace-tables.c ebpf/trace-json.c
  ebpf/trace-json-read.c ebpf/trace-file.c ebpf/trace-html.c)
if(FL_TRACE_BPF)
  set(gen ${PROJECT_BINARY_DIR}/ebpf)
  file(MAKE_DIRECTORY ${gen})
  if(FAULTLINE_BPF_VMLINUX)
    add_custom_command(OUTPUT ${gen}/vmlinux.h
      COMMAND ${CMAKE_COMMAND} -E copy ${FAULTLINE_BPF_VMLINUX} ${gen}/vmlinux.h
      DEPENDS ${FAULTLINE_BPF_VMLINUX} VERBATIM)
  else()
    add_custom_command(OUTPUT ${gen}/vmlinux.h
      COMMAND ${FL_BPFTOOL} btf dump file /sys/kernel/btf/vmlinux format c > ${gen}/vmlinux.h
      VERBATIM)
  endif()
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(bpf_arch arm64)
  else()
    set(bpf_arch x86)
  endif()
  # <bpf/usdt.bpf.h> pulls <asm/errno.h>, which lives under the multiarch dir.
  set(multiarch_inc "")
  if(CMAKE_LIBRARY_ARCHITECTURE)
    set(multiarch_inc -I/usr/include/${CMAKE_LIBRARY_ARCHITECTURE})
  endif()
  add_custom_command(OUTPUT ${gen}/faultline.bpf.o
    COMMAND ${FL_BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${bpf_arch} -Wall -Werror
            -I${gen} -I${PROJECT_SOURCE_DIR}/ebpf ${multiarch_inc}
            -c ${PROJECT_SOURCE_DIR}/ebpf/faultline.bpf.c -o ${gen}/faultline.bpf.o
    DEPENDS ${PROJECT_SOURCE_DIR}/ebpf/faultline.bpf.c ${PROJECT_SOURCE_DIR}/ebpf/trace-event.h
            ${gen}/vmlinux.h
    VERBATIM)
  add_custom_command(OUTPUT ${gen}/faultline.skel.h
    COMMAND ${FL_BPFTOOL} gen skeleton ${gen}/faultline.bpf.o name faultline_bpf > ${gen}/faultline.skel.h
    DEPENDS ${gen}/faultline.bpf.o
    VERBATIM)
  add_custom_target(fl_trace_skel DEPENDS ${gen}/faultline.skel.h)
  list(APPEND FL_TRACE_SOURCES ebpf/trace-bpf.c ebpf/trace-live.c)
  fl_module(trace SOURCES ${FL_TRACE_SOURCES} DEPS base LIBS PkgConfig::LIBBPF PkgConfig::ZLIB)
  add_dependencies(fl_trace fl_trace_skel)
  target_compile_definitions(fl_trace PRIVATE FL_TRACE_BPF=1)
else()
  fl_module(trace SOURCES ${FL_TRACE_SOURCES} DEPS base LIBS PkgConfig::ZLIB)
  target_compile_definitions(fl_trace PRIVATE FL_TRACE_WHY="${FL_TRACE_WHY}")
endif()

# A small program that drives the pager in uffd mode and writes its stats
# JSON: the tracee of the tests and of scripts/bench-trace.sh.
fl_executable(trace-driver SOURCES tests/trace-driver.c MODULES pager plan record)
target_include_directories(trace-driver PRIVATE ${SDT_INCLUDE})

# Fires the copy, hit/miss and region probes nothing fires yet (links the
# pager so that the binary has every required probe).
fl_executable(trace-probes SOURCES tests/trace-probes.c MODULES pager)
target_include_directories(trace-probes PRIVATE ${SDT_INCLUDE})

fl_test(test-trace-stats SOURCES tests/test-trace-stats.c MODULES trace)
set(live_args "")
if(FL_TRACE_BPF)
  fl_test(test-trace-live SOURCES tests/test-trace-live.c MODULES trace
    ARGS $<TARGET_FILE:trace-driver> TIMEOUT 120)
  # FL_CLI: the real paged runs (`faultline trace -- faultline run ...`).
  add_dependencies(test-trace-live trace-driver trace-probes faultline)
  set_tests_properties(test-trace-live PROPERTIES ENVIRONMENT
    "FL_SOURCE_DIR=${PROJECT_SOURCE_DIR};FL_TRACE_PROBES=$<TARGET_FILE:trace-probes>;FL_CLI=$<TARGET_FILE:faultline>")
  set(live_args $<TARGET_FILE:test-trace-live> $<TARGET_FILE:trace-driver>)
endif()
# The files, checked from outside (python3; headless chromium for the DOM).
foreach(mode json html)
  add_test(NAME test-trace-${mode} COMMAND sh ${PROJECT_SOURCE_DIR}/tests/test-trace-files.sh ${mode}
    $<TARGET_FILE:test-trace-stats> ${live_args} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test-trace-${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180)
  if(FL_TRACE_BPF)
    set_tests_properties(test-trace-${mode} PROPERTIES ENVIRONMENT "FL_CLI=$<TARGET_FILE:faultline>")
  endif()
endforeach()
fl_fuzz(trace-json SOURCES tests/fuzz/fuzz-trace-json.c MODULES trace record)

#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh needs into one folder that can be copied
# to a GPU host lacking the build's -dev packages (a bare CUDA image), and
# run there with
#   LD_LIBRARY_PATH=$DIR/lib FL_GPU_PREBUILT=1 FL_GPU_BUILD=$DIR scripts/gpu-check.sh
# The folder holds the CLI, the GPU tests and bench-cuda (CUDA on, eBPF on
# when libbpf is found, so `faultline trace` works there too) and the shared
# libraries they load that such an image may lack: liburing, libpcre2-8,
# libnuma, libbpf, libelf and the CUDA runtime (the driver and cuBLAS come
# from the host). The host's glibc must be at least this machine's.
#   scripts/gpu-bundle.sh [DIR]    (default build-bundle; the build is in build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-bundle}
build=${FL_GPU_BUILD_DIR:-build-gpu}
targets="faultline test-cuda-lru test-cuda-decode test-cuda-kernels test-cuda-xcache
         test-gpu-offload test-gpu-engine bench-cuda"

command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] ||
  { echo "gpu-bundle: nvcc not found: the bundle needs the CUDA build" >&2; exit 1; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFAULTLINE_WERROR=ON \
      -DFAULTLINE_CUDA=ON -DFAULTLINE_BPF=AUTO >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target $targets

rm -rf "$out"
mkdir -p "$out/lib"
for t in $targets; do cp "$build/$t" "$out/"; done
# every library the binaries load from outside the C runtime and the driver
ldd "$out"/faultline "$out"/test-* "$out"/bench-cuda |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libz.so*) ;;
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)): $(ls "$out/lib" | tr '\n' ' ')"

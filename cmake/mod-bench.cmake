# bench/: measuring programs over several modules (not tests).
# UFFDIO_COPY against memfd + UFFDIO_CONTINUE on real expert slices (docs/pager.md).
fl_executable(pager-bench SOURCES bench/pager-bench.c MODULES gguf LIBS PkgConfig::URING)
# The cache policies replayed on a routing trace (docs/cuda.md): runs everywhere.
fl_executable(bench-xlru SOURCES bench/bench-xlru.c MODULES cuda pager record)

/* probes-gpu.h: USDT probes around host -> GPU copies of expert weights
 * (provider "faultline", like the pager's probes in pager/probes.h, and
 * with the same five arguments, so `faultline trace` handles them alike):
 *   arg0 layer   (int; -1 for a non-expert tensor)
 *   arg1 expert  (int; -1 likewise)
 *   arg2 kind    (int; enum pager_kind: 0 other, 1 gate, 2 up, 3 down, 4 gate_up)
 *   arg3 bytes   (uint64; bytes copied)
 *   arg4 offset  (uint64; the file offset of the copied bytes)
 * Probes:
 *   copy_begin   a copy was issued (cudaMemcpyAsync or a kernel launch reading host memory)
 *   copy_end     that copy finished (seen by the host: after the stream sync or event)
 * The tracer pairs begin and end by offset, so each copy in flight must
 * have its own offset; fire copy_end only for a copy whose copy_begin fired.
 * With nobody attached each probe is one nop.
 *
 * Usage in the CUDA backend (host code):
 *   FL_PROBE_COPY_BEGIN(layer, expert, PAGER_KIND_UP, n, off);
 *   cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream);
 *   ... cudaStreamSynchronize(stream) or an event callback ...
 *   FL_PROBE_COPY_END(layer, expert, PAGER_KIND_UP, n, off);
 */
#ifndef FL_PROBES_GPU_H
#define FL_PROBES_GPU_H

#include <stdint.h>

/* libbpf before 1.3 cannot read USDT arguments in indexed memory operands:
 * keep them in registers or constants. Must precede <sys/sdt.h>. */
#ifndef STAP_SDT_ARG_CONSTRAINT
#define STAP_SDT_ARG_CONSTRAINT nr
#endif
#include <sys/sdt.h>

#define FL_PROBE_GPU_(name, l, e, k, b, o) \
    DTRACE_PROBE5(faultline, name, (int)(l), (int)(e), (int)(k), (uint64_t)(b), (uint64_t)(o))

#define FL_PROBE_COPY_BEGIN(l, e, k, b, o) FL_PROBE_GPU_(copy_begin, l, e, k, b, o)
#define FL_PROBE_COPY_END(l, e, k, b, o)   FL_PROBE_GPU_(copy_end, l, e, k, b, o)

#endif

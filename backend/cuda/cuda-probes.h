/* cuda-probes.h: USDT probes for host -> GPU expert copies (provider
 * "faultline", names copy_begin / copy_end), with the pager's five
 * arguments (pager/probes.h): layer, expert, kind, bytes, offset. The
 * tracer (ebpf/faultline.bpf.c) pairs a copy_end with its copy_begin by
 * offset. When the tracer's backend/cuda/probes-gpu.h exists it is the one
 * definition and is used instead. */
#ifndef FL_CUDA_PROBES_H
#define FL_CUDA_PROBES_H

#if __has_include("backend/cuda/probes-gpu.h")
#include "backend/cuda/probes-gpu.h"
#endif

#ifndef FL_PROBE_COPY_BEGIN
#include <stdint.h>
#include <sys/sdt.h>
#define FL_PROBE_COPY_BEGIN(l, e, k, b, o) \
    DTRACE_PROBE5(faultline, copy_begin, (int)(l), (int)(e), (int)(k), (uint64_t)(b), (uint64_t)(o))
#define FL_PROBE_COPY_END(l, e, k, b, o) \
    DTRACE_PROBE5(faultline, copy_end, (int)(l), (int)(e), (int)(k), (uint64_t)(b), (uint64_t)(o))
#endif

#endif

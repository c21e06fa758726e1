/* emu.h: the host emulation of a CUDA device (FAULTLINE_CUDA_EMU, docs/cuda.md
 * "The emulated device"): what its files share. Test scaffolding: it lets
 * the backend's C orchestration (the C files of backend/cuda/,
 * backend/cuda/gpu-offload.c, backend/cuda/gpu-forward.c) run in CI under ASan+UBSan,
 * on a machine without a GPU.
 *
 * Kernels and most copies run when they are enqueued, in order, on the
 * calling thread; copies from page-locked host memory wait on their stream
 * until something waits for them (cudart-emu.c), as on a GPU, so missing
 * waits show.
 *
 * Device memory (cudaMalloc) lives in mmap'ed regions kept PROT_NONE, so a
 * host read or write of a device pointer faults at once. An emulated
 * operation (kernel, copy, GEMM) names every device range it touches with
 * flemu_dev(): the range must lie inside one allocation (else the op fails
 * with cudaErrorInvalidValue, or cudaErrorIllegalAddress for an overrun,
 * and one line on stderr says which argument), and its pages are readable
 * and writable until flemu_end(). Managed memory (cudaMallocManaged) is
 * ordinary heap memory that ops may name too; pinned and registered host
 * memory may not be named as device memory. */
#ifndef FL_CUDA_EMU_H
#define FL_CUDA_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* At most this many ranges opened by one op (a matvec group names 48). */
#define FLEMU_OP_RANGES 64

struct flemu_op {
    const char *what;            /* "matvec", "cudaMemcpyAsync", ... for messages */
    cudaError_t err;             /* first error; the op's body runs only without one */
    int n;
    struct { void *p; size_t len; } open[FLEMU_OP_RANGES];
};

/* An allocation's bounds, for ops that check many rows of one buffer. */
struct flemu_span {
    uintptr_t lo, hi;
};

/* Takes the device lock (ops never overlap: the protection windows are
 * global) and checks the stream handle. */
void flemu_begin(struct flemu_op *op, const char *what, cudaStream_t s);
/* [p, p + bytes) of device or managed memory the op reads or writes:
 * checked, opened for the op; returns p. */
void *flemu_dev(struct flemu_op *op, const void *p, size_t bytes, const char *arg);
/* The bounds of the device allocation holding p, not opened: rows are
 * checked against it with flemu_within (an index that leaves the buffer is
 * an overrun even if it lands in another allocation), then the rows' extent
 * opened with flemu_dev (opening only what the op touches: mprotect's cost
 * is per page, and the rest stays a fault for the host). */
struct flemu_span flemu_dev_span(struct flemu_op *op, const void *p, const char *arg);
bool flemu_within(struct flemu_op *op, struct flemu_span s, const void *p, size_t bytes,
                  const char *arg);
/* [p, p + bytes) of host memory (not device memory) the op reads or writes. */
void *flemu_host(struct flemu_op *op, const void *p, size_t bytes, const char *arg);
/* Closes the windows, drops the lock; returns the op's error (also left
 * as the thread's last error, as the runtime does). */
cudaError_t flemu_end(struct flemu_op *op);
/* flemu_end for kernels: the .cu launchers return cudaGetLastError() after
 * the launch, so an earlier call's unread error is reported here too. */
cudaError_t flemu_launched(struct flemu_op *op);

/* The thread's last error (cudaGetLastError's), set by every failing call. */
cudaError_t flemu_fail(cudaError_t e);
/* cudaSuccess, or why no runtime call may be made now: no device, or
 * inside a cudaLaunchHostFunc callback (which must not call CUDA). */
cudaError_t flemu_enter(void);
/* The injected failure every call now returns (FL_CUDA_EMU_FAIL_OP), or
 * cudaSuccess. */
cudaError_t flemu_sticky(void);
/* Whether the stream handle is the default stream or a live stream. */
bool flemu_stream_ok(cudaStream_t s);

/* --- memory (devmem-emu.c) ------------------------------------------------------ */

enum flemu_kind {
    FLEMU_DEVICE,                /* cudaMalloc: PROT_NONE outside ops, guard pages */
    FLEMU_MANAGED,               /* cudaMallocManaged: heap memory, host and ops */
    FLEMU_PINNED,                /* cudaMallocHost: heap memory, host only */
    FLEMU_REGISTERED,            /* cudaHostRegister: the caller's memory, host only */
};

/* New memory of a kind (not FLEMU_REGISTERED); device memory beyond what
 * is free is cudaErrorMemoryAllocation. */
cudaError_t flemu_alloc(enum flemu_kind kind, size_t bytes, void **out);
/* Frees (or, for a registered range, forgets) the entry that starts at p,
 * if it is of `kind`; cudaErrorInvalidValue otherwise. */
cudaError_t flemu_free(enum flemu_kind kind, void *p);
/* Page-locks [p, p + bytes): refused when a page of it is already locked. */
cudaError_t flemu_register(void *p, size_t bytes);
/* Whether [p, p + bytes) lies inside one page-locked host range
 * (cudaMallocHost or cudaHostRegister): copies from there are deferred. */
bool flemu_is_locked_host(const void *p, size_t bytes);
/* Runs the work stream s deferred (copies from page-locked memory and the
 * host functions behind them); nothing for the default streams, and
 * nothing while deferred work is running (no nesting). */
void flemu_stream_flush(cudaStream_t s);
/* Whether [p, p + bytes) lies inside one managed allocation. */
bool flemu_is_managed(const void *p, size_t bytes);
/* Device memory: total (FL_CUDA_EMU_MEM, default 4 GiB) and in use. */
void flemu_mem_info(size_t *free_bytes, size_t *total_bytes);

/* Every half's float (fl_f16_to_f32's values, the table built once):
 * emulated kernels convert every F16 weight on every launch, and one load
 * is the cheapest exact conversion (the suite runs them under ASan). */
const float *flemu_f16_table(void);

#endif

/* gguf-writer.h: writes GGUF v3 files whose tensor data is streamed in later.
 *
 * The header (metadata and tensor infos) is small and is built in memory;
 * the tensor data can be many times larger than RAM, so the writer only
 * lays it out: once every tensor is declared, each one has a fixed absolute
 * file offset and callers pwrite() its bytes there, in any order and from
 * any number of threads. gguf_writer_finish() writes the header and sets the
 * final file size (alignment padding included). */
#ifndef FL_GGUF_WRITER_H
#define FL_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "gguf/gguf.h"

struct gguf_writer;

/* Creates (truncates) path for writing. Data alignment is 32 bytes, the
 * GGUF default, so no general.alignment key is written. A NULL path gives
 * a writer that only lays the file out (sizes and offsets; writes fail). */
int gguf_writer_open(const char *path, struct gguf_writer **out, struct fl_err *err);
/* Closes the file; a writer that was not finished leaves a partial file,
 * which the caller should unlink. */
void gguf_writer_close(struct gguf_writer *w);

/* Metadata, written in the order added. Keys must be unique. */
int gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_kv_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_kv_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v);
/* Arrays: strs holds n NUL-terminated strings; elems n packed values of type
 * (a numeric vtype). */
int gguf_writer_kv_str_arr(struct gguf_writer *w, const char *key,
                           const char *const *strs, uint64_t n);
int gguf_writer_kv_arr(struct gguf_writer *w, const char *key, enum gguf_vtype type,
                       const void *elems, uint64_t n);

/* Declares the next tensor; returns its index (>= 0) or -errno. Tensors are
 * laid out in declaration order, each start aligned. The row length ne[0]
 * must be a multiple of the type's block size. */
int64_t gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type,
                               uint32_t n_dims, const int64_t *ne);

/* Valid after the last kv/tensor was added: the header's final size and
 * so the absolute offset at which tensor i's data starts, and its size. */
uint64_t gguf_writer_data_offset(struct gguf_writer *w);
uint64_t gguf_writer_tensor_offset(struct gguf_writer *w, int64_t i);
uint64_t gguf_writer_tensor_nbytes(const struct gguf_writer *w, int64_t i);
uint64_t gguf_writer_file_size(struct gguf_writer *w);
int64_t gguf_writer_n_tensors(const struct gguf_writer *w);

/* Streaming: when lag > 0, each write starts its own writeback at once
 * and waits for, then drops from the page cache, the range lag bytes
 * before it. A file written front to back then holds at most about lag
 * bytes of dirty or cached pages, instead of filling RAM with a file that
 * may be larger than RAM (and evicting everyone else's cache). */
void gguf_writer_set_stream_lag(struct gguf_writer *w, uint64_t lag);

/* Writes len bytes at byte off inside tensor i's data (thread-safe: pwrite
 * to disjoint ranges). Returns 0 or -errno, with err set. */
int gguf_writer_write(struct gguf_writer *w, int64_t i, uint64_t off, const void *buf,
                      size_t len, struct fl_err *err);

/* Writes the header and sets the file to its final size. The data of every
 * tensor must have been written (gaps read back as zeros). */
int gguf_writer_finish(struct gguf_writer *w, struct fl_err *err);

#endif

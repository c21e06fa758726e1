/* repack.h: weights rearranged once, at load, for faster matmul kernels.
 *
 * A Q4_K matrix kept in RAM can be rebuilt as FL_TYPE_Q4_K_R8 (8 rows
 * interleaved, scales unpacked; see struct fl_block_q4_K_r8): one VNNI
 * instruction (AVX2: one maddubs) then advances 8 rows and the scales apply
 * once per sub-block for 8 rows, with no transposes at run time.
 * fl_matmul* take the result like any weight type (rows 8g.. at
 * 8g * fl_row_size(FL_TYPE_Q4_K_R8, n_in)), and give bit for bit what they
 * give on the Q4_K rows it came from: the Q4_K kernels of the level that
 * repacks use the same float order (integer dots per block and row, then
 * the same float steps), so a repacked (resident) matrix and its file
 * bytes (paged) yield identical logits.
 *
 *   int lt = fl_repack_layout(type, n_in, n_rows);   // -1: keep the file's
 *   if (lt >= 0) {
 *       void *dst = aligned_alloc(64, fl_repack_size(lt, n_in, n_rows));
 *       fl_repack(type, src, dst, n_in, n_rows);
 *       // use dst with type lt from now on
 *   }
 */
#ifndef FL_CPU_REPACK_H
#define FL_CPU_REPACK_H

#include <stddef.h>
#include <stdint.h>

/* The layout rows of `type` are best repacked into on this CPU with the
 * kernels in use (fl_cpu_kernels), or -1: no layout for the type, the row
 * count is not a multiple of 8, or the level has no faster kernel for it
 * (AVX2 and AVX-512 have one; the scalar level has none). */
int fl_repack_layout(uint32_t type, int64_t n_in, int64_t n_rows);

/* Bytes of n_rows rows of n_in values in layout. */
size_t fl_repack_size(uint32_t layout, int64_t n_in, int64_t n_rows);

/* dst <- src's n_rows rows (row length n_in) in the layout
 * fl_repack_layout(type, ...) named. Returns 0, or -EINVAL when that
 * layout is -1 for these arguments (dst untouched). Safe to call from
 * several threads on disjoint row ranges (a multiple of 8 rows each). */
int fl_repack(uint32_t type, const void *src, void *dst, int64_t n_in, int64_t n_rows);

#endif

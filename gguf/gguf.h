/* gguf.h: reads and validates the header of a GGUF file (v2 and v3).
 *
 * Only the header is read: metadata, tensor infos and where the data section
 * starts. Tensor data is never touched here; the pager maps it. Every length
 * and count in the file is checked against the file size before anything is
 * allocated from it, so a hostile file costs at most its own size in memory. */
#ifndef FL_GGUF_H
#define FL_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

enum gguf_vtype {
    GGUF_VT_UINT8 = 0,
    GGUF_VT_INT8 = 1,
    GGUF_VT_UINT16 = 2,
    GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4,
    GGUF_VT_INT32 = 5,
    GGUF_VT_FLOAT32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_UINT64 = 10,
    GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT
};

struct gguf_str {
    const char *data; /* NUL-terminated copy; len excludes the NUL */
    uint64_t len;
};

/* One metadata value. Numeric arrays hold their elements packed in native
 * representation (elems points at n values of arr.type); string arrays hold
 * n struct gguf_str; nested arrays hold n struct gguf_value. */
struct gguf_value {
    enum gguf_vtype type;
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16;
        uint32_t u32; int32_t i32; uint64_t u64; int64_t i64;
        float f32; double f64; bool b;
        struct gguf_str str;
        struct {
            enum gguf_vtype type;
            uint64_t n;
            const void *elems;
        } arr;
    };
};

struct gguf_tensor {
    const char *name;
    uint32_t type;        /* enum fl_type */
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length; unused dims are 1 */
    uint64_t offset;      /* absolute offset of the data in the file */
    uint64_t nbytes;
    uint64_t info_offset; /* where its tensor-info record starts, for messages */
};

struct gguf_file;

/* Opens and validates path. On failure returns -errno (-EINVAL for a
 * malformed file) and err holds "PATH: problem at byte N".
 *
 * A model split into several files (llama.cpp's gguf-split:
 * PREFIX-00001-of-0000N.gguf ..., "split.no", "split.count" and
 * "split.tensors.count" in each, the metadata in the first) is opened from
 * its first file, as llama.cpp opens it: every part is opened and checked,
 * and the tensors of all of them are one table whose offsets lie in one
 * space of bytes, in which part i's file starts at gguf_part(f, i)->base
 * (GGUF_PART_ALIGN apart, in order; the bytes between parts are in no
 * file). gguf_file_size is that space's size. An unsplit file is one part
 * at 0. */
int gguf_open(const char *path, struct gguf_file **out, struct fl_err *err);

/* gguf_open in two steps: path's own header (a later part of a split
 * model as it is, as gguf-dump shows it), then, when f is the first part
 * of a split model, its other parts opened and joined into f's table (0
 * and nothing done for an unsplit file; on an error f stays the caller's
 * to close). */
int gguf_open_part(const char *path, struct gguf_file **out, struct fl_err *err);
int gguf_split_join(struct gguf_file *f, struct fl_err *err);

#define GGUF_PART_ALIGN (2ull << 20)
struct gguf_part {
    const char *path;
    uint64_t base, size; /* where the file starts in the space, its bytes */
};
int gguf_n_parts(const struct gguf_file *f);
const struct gguf_part *gguf_part(const struct gguf_file *f, int i);
uint64_t gguf_parts_bytes(const struct gguf_file *f); /* the bytes of all its files */
/* The part whose file holds byte `at` of the parts' space (0-based; -1
 * between parts), and *in_file, at's offset in that file. */
int gguf_part_at(const struct gguf_file *f, uint64_t at, uint64_t *in_file);

/* The same validation over a header already in memory: buf holds the first
 * len bytes of a file of file_size bytes (len may be < file_size; the header
 * must lie inside buf). name is used in messages. For tests and fuzzing. */
int gguf_parse(const void *buf, size_t len, uint64_t file_size, const char *name,
               struct gguf_file **out, struct fl_err *err);

void gguf_close(struct gguf_file *f);

/* gguf_open with llama.cpp's --override-kv applied to the metadata before
 * it is checked, as llama.cpp's loader applies them (so an override can
 * mend a key the file holds wrongly): each spec is "KEY=TYPE:VALUE[,...]",
 * TYPE int, float, bool (true or false) or str (at most 127 bytes, no
 * comma). Each KEY's value is replaced, or added where the file has none;
 * the first override of a key wins (llama.cpp keeps the first); the result
 * must pass the key table (gguf-keys.h). Errors: "--override-kv ITEM: why"
 * (-EINVAL), or gguf_open's. */
int gguf_open_overridden(const char *path, const char *const *specs, int n,
                         struct gguf_file **out, struct fl_err *err);

const char *gguf_name(const struct gguf_file *f);
uint32_t gguf_version(const struct gguf_file *f);
uint64_t gguf_file_size(const struct gguf_file *f); /* all parts' space (gguf_open) */
uint64_t gguf_alignment(const struct gguf_file *f);
uint64_t gguf_data_offset(const struct gguf_file *f); /* start of the data section */

int64_t gguf_n_kv(const struct gguf_file *f);
const char *gguf_kv_key(const struct gguf_file *f, int64_t i);
const struct gguf_value *gguf_kv_value(const struct gguf_file *f, int64_t i);
int64_t gguf_find_kv(const struct gguf_file *f, const char *key); /* -1 if absent */

/* Typed lookups: 0 on success, -ENOENT when the key is absent, -EINVAL when
 * it holds another kind of value. Integers of any width (and bool) convert
 * to int64_t when the value fits; get_float accepts floats and integers. */
int gguf_get_int(const struct gguf_file *f, const char *key, int64_t *out);
int gguf_get_float(const struct gguf_file *f, const char *key, double *out);
int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out);
int gguf_get_str(const struct gguf_file *f, const char *key, const char **out);
int gguf_get_arr(const struct gguf_file *f, const char *key, const struct gguf_value **out);

int64_t gguf_n_tensors(const struct gguf_file *f);
const struct gguf_tensor *gguf_tensor(const struct gguf_file *f, int64_t i);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name);

const char *gguf_vtype_name(enum gguf_vtype t);

/* Extensions. Tensors are one array: gguf_tensor(f, i) == gguf_tensor(f, 0) + i,
 * so a tensor's index is its pointer minus the first. */
uint64_t gguf_header_size(const struct gguf_file *f);  /* bytes up to the end of the tensor infos */
uint64_t gguf_kv_offset(const struct gguf_file *f, int64_t i); /* where entry i starts, for messages */
/* gguf_get_int's conversion applied to a value already at hand (an array
 * element, say): 0, -EINVAL for a non-integer, -ERANGE for a u64 > INT64_MAX. */
int gguf_value_int(const struct gguf_value *v, int64_t *out);

#endif

/* gguf-writer.c: GGUF v3 writer; the header in memory, the data by pwrite. */
#include "gguf/gguf-writer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/tensor-types.h"

struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t rel_offset; /* from the start of the data section */
    uint64_t nbytes;
};

struct gguf_writer {
    int fd;
    char *path;
    /* serialized key/value records, appended as they are added */
    uint8_t *kv;
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys;
    struct wtensor *t;
    int64_t n_t, cap_t;
    uint64_t data_size; /* aligned end of the last tensor */
    uint64_t data_offset; /* 0 until the layout is frozen */
    uint64_t stream_lag;
};

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static int buf_put(struct gguf_writer *w, const void *p, size_t n)
{
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n)
            cap *= 2;
        uint8_t *nb = realloc(w->kv, cap);
        if (!nb)
            return -ENOMEM;
        w->kv = nb;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return 0;
}

static int put_u32(struct gguf_writer *w, uint32_t v) { return buf_put(w, &v, 4); }
static int put_u64(struct gguf_writer *w, uint64_t v) { return buf_put(w, &v, 8); }

static int put_str(struct gguf_writer *w, const char *s)
{
    uint64_t n = strlen(s);
    int rc = put_u64(w, n);
    return rc ? rc : buf_put(w, s, n);
}

int gguf_writer_open(const char *path, struct gguf_writer **out, struct fl_err *err)
{
    struct gguf_writer *w = calloc(1, sizeof(*w));
    if (!w || !(w->path = strdup(path ? path : "(layout)"))) {
        free(w);
        return fl_err_set(err, -ENOMEM, "%s: out of memory", path ? path : "gguf");
    }
    if (!path) { /* layout only: sizes and offsets, no file */
        w->fd = -1;
        *out = w;
        return 0;
    }
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int rc = -errno;
        free(w->path);
        free(w);
        return fl_err_set(err, rc, "%s: cannot create: %s", path, strerror(-rc));
    }
    *out = w;
    return 0;
}

void gguf_writer_close(struct gguf_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    for (uint64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    for (int64_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->keys);
    free(w->t);
    free(w->kv);
    free(w->path);
    free(w);
}

/* Starts a record: checks the key is new and the header still open. */
static int kv_begin(struct gguf_writer *w, const char *key, enum gguf_vtype type)
{
    if (w->data_offset)
        return -EBUSY;
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key))
            return -EEXIST;
    char **nk = realloc(w->keys, (w->n_kv + 1) * sizeof(*nk));
    if (!nk)
        return -ENOMEM;
    w->keys = nk;
    if (!(nk[w->n_kv] = strdup(key)))
        return -ENOMEM;
    w->n_kv++;
    int rc = put_str(w, key);
    return rc ? rc : put_u32(w, (uint32_t)type);
}

static int kv_scalar(struct gguf_writer *w, const char *key, enum gguf_vtype t,
                     const void *v, size_t n)
{
    int rc = kv_begin(w, key, t);
    return rc ? rc : buf_put(w, v, n);
}

int gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
    return kv_scalar(w, key, GGUF_VT_UINT32, &v, 4);
}

int gguf_writer_kv_i32(struct gguf_writer *w, const char *key, int32_t v)
{
    return kv_scalar(w, key, GGUF_VT_INT32, &v, 4);
}

int gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v)
{
    return kv_scalar(w, key, GGUF_VT_FLOAT32, &v, 4);
}

int gguf_writer_kv_bool(struct gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v;
    return kv_scalar(w, key, GGUF_VT_BOOL, &b, 1);
}

int gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v)
{
    int rc = kv_begin(w, key, GGUF_VT_STRING);
    return rc ? rc : put_str(w, v);
}

int gguf_writer_kv_str_arr(struct gguf_writer *w, const char *key,
                           const char *const *strs, uint64_t n)
{
    int rc = kv_begin(w, key, GGUF_VT_ARRAY);
    if (!rc)
        rc = put_u32(w, GGUF_VT_STRING);
    if (!rc)
        rc = put_u64(w, n);
    for (uint64_t i = 0; !rc && i < n; i++)
        rc = put_str(w, strs[i]);
    return rc;
}

static size_t vtype_size(enum gguf_vtype t)
{
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
    case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
    default: return 0;
    }
}

int gguf_writer_kv_arr(struct gguf_writer *w, const char *key, enum gguf_vtype type,
                       const void *elems, uint64_t n)
{
    size_t sz = vtype_size(type);
    if (!sz)
        return -EINVAL;
    int rc = kv_begin(w, key, GGUF_VT_ARRAY);
    if (!rc)
        rc = put_u32(w, (uint32_t)type);
    if (!rc)
        rc = put_u64(w, n);
    return rc ? rc : buf_put(w, elems, sz * n);
}

int64_t gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type,
                               uint32_t n_dims, const int64_t *ne)
{
    const struct fl_type_traits *tr = fl_type_traits(type);
    if (w->data_offset)
        return -EBUSY;
    if (!tr || n_dims < 1 || n_dims > GGUF_MAX_DIMS || ne[0] % tr->blck_size)
        return -EINVAL;
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 64;
        struct wtensor *nt = realloc(w->t, (size_t)cap * sizeof(*nt));
        if (!nt)
            return -ENOMEM;
        w->t = nt;
        w->cap_t = cap;
    }
    struct wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof(*t));
    if (!(t->name = strdup(name)))
        return -ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    uint64_t rows = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        if (d > 0)
            rows *= (uint64_t)t->ne[d];
    }
    t->nbytes = fl_row_size(type, t->ne[0]) * rows;
    t->rel_offset = w->data_size;
    w->data_size = align_up(w->data_size + t->nbytes, GGUF_DEFAULT_ALIGNMENT);
    return w->n_t++;
}

/* Size of the tensor-info records: name, n_dims, dims, type, offset. */
static uint64_t infos_size(const struct gguf_writer *w)
{
    uint64_t n = 0;
    for (int64_t i = 0; i < w->n_t; i++)
        n += 8 + strlen(w->t[i].name) + 4 + 8 * (uint64_t)w->t[i].n_dims + 4 + 8;
    return n;
}

uint64_t gguf_writer_data_offset(struct gguf_writer *w)
{
    if (!w->data_offset)
        w->data_offset = align_up(4 + 4 + 8 + 8 + w->kv_len + infos_size(w),
                                  GGUF_DEFAULT_ALIGNMENT);
    return w->data_offset;
}

uint64_t gguf_writer_tensor_offset(struct gguf_writer *w, int64_t i)
{
    return gguf_writer_data_offset(w) + w->t[i].rel_offset;
}

uint64_t gguf_writer_tensor_nbytes(const struct gguf_writer *w, int64_t i)
{
    return w->t[i].nbytes;
}

uint64_t gguf_writer_file_size(struct gguf_writer *w)
{
    return gguf_writer_data_offset(w) + w->data_size;
}

int64_t gguf_writer_n_tensors(const struct gguf_writer *w)
{
    return w->n_t;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

void gguf_writer_set_stream_lag(struct gguf_writer *w, uint64_t lag)
{
    w->stream_lag = lag;
}

/* Page-cache hygiene only: failures here change nothing the file holds. */
static void stream_behind(struct gguf_writer *w, uint64_t pos, size_t len)
{
    sync_file_range(w->fd, (off_t)pos, (off_t)len, SYNC_FILE_RANGE_WRITE);
    if (pos < w->stream_lag)
        return;
    uint64_t old = pos - w->stream_lag;
    sync_file_range(w->fd, (off_t)old, (off_t)len, SYNC_FILE_RANGE_WAIT_BEFORE |
                    SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    posix_fadvise(w->fd, (off_t)old, (off_t)len, POSIX_FADV_DONTNEED);
}

int gguf_writer_write(struct gguf_writer *w, int64_t i, uint64_t off, const void *buf,
                      size_t len, struct fl_err *err)
{
    if (i < 0 || i >= w->n_t || off > w->t[i].nbytes || len > w->t[i].nbytes - off)
        return fl_err_set(err, -EINVAL, "%s: write outside tensor %" PRId64, w->path, i);
    uint64_t pos = gguf_writer_tensor_offset(w, i) + off;
    int rc = pwrite_all(w->fd, buf, len, pos);
    if (rc)
        return fl_err_set(err, rc, "%s: write failed: %s", w->path, strerror(-rc));
    if (w->stream_lag)
        stream_behind(w, pos, len);
    return 0;
}

/* The fixed part of the header plus the tensor infos, serialized after kv. */
static int build_header(struct gguf_writer *w)
{
    size_t kv_len = w->kv_len;
    int rc = 0;
    for (int64_t i = 0; !rc && i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        rc = put_str(w, t->name);
        if (!rc)
            rc = put_u32(w, t->n_dims);
        for (uint32_t d = 0; !rc && d < t->n_dims; d++)
            rc = put_u64(w, (uint64_t)t->ne[d]);
        if (!rc)
            rc = put_u32(w, t->type);
        if (!rc)
            rc = put_u64(w, t->rel_offset);
    }
    if (rc)
        w->kv_len = kv_len;
    return rc;
}

int gguf_writer_finish(struct gguf_writer *w, struct fl_err *err)
{
    uint64_t data_off = gguf_writer_data_offset(w);
    size_t kv_len = w->kv_len;
    uint8_t fixed[24];
    uint32_t version = 3;
    uint64_t n_t = (uint64_t)w->n_t;
    memcpy(fixed, "GGUF", 4);
    memcpy(fixed + 4, &version, 4);
    memcpy(fixed + 8, &n_t, 8);
    memcpy(fixed + 16, &w->n_kv, 8);
    int rc = build_header(w);
    if (rc)
        return fl_err_set(err, rc, "%s: out of memory", w->path);
    /* padding up to the data section is zeros */
    size_t pad = (size_t)(data_off - 24 - w->kv_len);
    uint8_t zeros[GGUF_DEFAULT_ALIGNMENT] = {0};
    rc = pwrite_all(w->fd, fixed, sizeof(fixed), 0);
    if (!rc)
        rc = pwrite_all(w->fd, w->kv, w->kv_len, 24);
    if (!rc)
        rc = pwrite_all(w->fd, zeros, pad, 24 + w->kv_len);
    w->kv_len = kv_len;
    if (!rc && ftruncate(w->fd, (off_t)gguf_writer_file_size(w)) < 0)
        rc = -errno;
    if (rc)
        return fl_err_set(err, rc, "%s: write failed: %s", w->path, strerror(-rc));
    return 0;
}

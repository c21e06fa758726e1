/* gguf.c: the GGUF header reader (see gguf.h).
 *
 * The header is parsed by one cursor over a byte source: either a buffer the
 * caller holds (gguf_parse) or a file read with pread in doubling chunks
 * (gguf_open). Before anything is allocated from a count or length field, the
 * smallest encoding of that many items must actually be present in the source,
 * so allocations stay within a constant factor of bytes really read, and the
 * bytes read are capped at GGUF_MAX_HEADER. Every value is copied out of the
 * source into an arena owned by the gguf_file, so the source can go away. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/gguf-impl.h"
#include "gguf/gguf-keys.h"
#include "gguf/tensor-types.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c decodes little-endian GGUF by memcpy; a big-endian host needs byte swaps"
#endif

/* Largest header we read. Real headers (256k-token vocabularies with merges
 * and a chat template) are tens of MB; this bounds what a hostile file can
 * make us read and allocate. */
#define GGUF_MAX_HEADER (256ull << 20)
#define GGUF_FIRST_CHUNK (64u << 10)
#define GGUF_MAX_NEST 8          /* arrays of arrays of ... */
#define GGUF_MIN_KV_BYTES 13     /* empty key (8) + type (4) + a u8/bool value (1) */
#define GGUF_MIN_TI_BYTES 32     /* empty name (8) + n_dims (4) + ne[0] (8) + type (4) + offset (8) */
#define ARENA_BLOCK (64u << 10)

/* --- arena: every string and array of one file lives here ------------------ */

struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

static void *arena_alloc(struct arena_block **head, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct arena_block *b = *head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        b = malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->next = *head;
        b->used = 0;
        b->cap = cap;
        *head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free(struct arena_block *b)
{
    while (b) {
        struct arena_block *next = b->next;
        free(b);
        b = next;
    }
}

/* --- the file object -------------------------------------------------------- */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int index_init(struct name_index *ix, int64_t n)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2)
        cap *= 2;
    ix->slot = calloc(cap, sizeof(*ix->slot));
    ix->mask = cap - 1;
    return ix->slot ? 0 : -ENOMEM;
}

/* Slot of name: holding it, or the empty one where it would go. names(i)
 * gives the name stored for index i. */
static uint32_t *index_slot(const struct name_index *ix, const char *name,
                            const char *(*names)(const struct gguf_file *, int64_t),
                            const struct gguf_file *f)
{
    for (uint64_t h = name_hash(name);; h++) {
        uint32_t *s = &ix->slot[h & ix->mask];
        if (!*s || !strcmp(names(f, *s - 1), name))
            return s;
    }
}

static const char *kv_name(const struct gguf_file *f, int64_t i) { return f->kv[i].key; }
static const char *tensor_name(const struct gguf_file *f, int64_t i) { return f->tensors[i].name; }

/* --- byte source and cursor --------------------------------------------------- */

struct parser {
    const uint8_t *buf; /* bytes [0, len) of the file */
    uint64_t len;
    uint64_t file_size;
    int fd;             /* >= 0: grow buf from here; -1: buf is all there is */
    uint8_t *own;       /* the growing buffer when reading from fd */
    uint64_t pos;
    const char *name;
    struct fl_err *err;
    struct gguf_file *f;
    int depth;
    bool no_keys_check; /* the caller checks the keys (after overriding some) */
};

/* Bytes between the cursor and the end of the file. */
static uint64_t left(const struct parser *p)
{
    return p->file_size - p->pos;
}

static int grow(struct parser *p, uint64_t want)
{
    uint64_t limit = p->file_size < GGUF_MAX_HEADER ? p->file_size : GGUF_MAX_HEADER;
    uint64_t n = p->len * 2 > GGUF_FIRST_CHUNK ? p->len * 2 : GGUF_FIRST_CHUNK;
    if (n < want)
        n = want;
    if (n > limit)
        n = limit;
    uint8_t *nb = realloc(p->own, n);
    if (!nb)
        return fl_err_set(p->err, -ENOMEM, "%s: out of memory reading the header at byte %" PRIu64,
                          p->name, p->len);
    p->own = nb;
    p->buf = nb;
    while (p->len < n) {
        ssize_t r = pread(p->fd, nb + p->len, n - p->len, (off_t)p->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fl_err_set(p->err, -errno, "%s: read failed: %s at byte %" PRIu64,
                              p->name, strerror(errno), p->len);
        if (r == 0)
            return fl_err_set(p->err, -EIO, "%s: file shrank while reading at byte %" PRIu64,
                              p->name, p->len);
        p->len += (uint64_t)r;
    }
    return 0;
}

/* Makes n bytes at the cursor available, or says why they are not. */
static int need(struct parser *p, uint64_t n, const char *what)
{
    if (n <= p->len - p->pos)
        return 0;
    if (n > left(p))
        return fl_err_set(p->err, -EINVAL, "%s: file ends inside %s at byte %" PRIu64,
                          p->name, what, p->pos);
    if (p->pos + n > GGUF_MAX_HEADER)
        return fl_err_set(p->err, -EINVAL, "%s: header larger than %llu MiB (in %s) at byte %" PRIu64,
                          p->name, GGUF_MAX_HEADER >> 20, what, p->pos);
    if (p->fd < 0)
        return fl_err_set(p->err, -EINVAL, "%s: header extends past the %" PRIu64
                          " bytes given (in %s) at byte %" PRIu64, p->name, p->len, what, p->pos);
    return grow(p, p->pos + n);
}

static int read_bytes(struct parser *p, void *dst, uint64_t n, const char *what)
{
    int rc = need(p, n, what);
    if (rc)
        return rc;
    memcpy(dst, p->buf + p->pos, n);
    p->pos += n;
    return 0;
}

static int read_u32(struct parser *p, uint32_t *v, const char *what)
{
    return read_bytes(p, v, sizeof(*v), what);
}

static int read_u64(struct parser *p, uint64_t *v, const char *what)
{
    return read_bytes(p, v, sizeof(*v), what);
}

static int oom(struct parser *p)
{
    return fl_err_set(p->err, -ENOMEM, "%s: out of memory at byte %" PRIu64, p->name, p->pos);
}

/* A string: u64 length, then that many bytes (no NUL in the file). */
static int read_str(struct parser *p, struct gguf_str *s, const char *what)
{
    uint64_t at = p->pos, n;
    int rc = read_u64(p, &n, what);
    if (rc)
        return rc;
    if (n > left(p))
        return fl_err_set(p->err, -EINVAL, "%s: %s length %" PRIu64 " runs past the end of the file at byte %"
                          PRIu64, p->name, what, n, at);
    if ((rc = need(p, n, what)))
        return rc;
    char *d = arena_alloc(&p->f->arena, n + 1);
    if (!d)
        return oom(p);
    memcpy(d, p->buf + p->pos, n);
    d[n] = 0;
    p->pos += n;
    s->data = d;
    s->len = n;
    return 0;
}

/* Names (keys, tensor names) are looked up as C strings, so an embedded NUL
 * would make two different names compare equal. */
static int read_name(struct parser *p, struct gguf_str *s, const char *what)
{
    uint64_t at = p->pos;
    int rc = read_str(p, s, what);
    if (rc)
        return rc;
    if (s->len == 0)
        return fl_err_set(p->err, -EINVAL, "%s: empty %s at byte %" PRIu64, p->name, what, at);
    if (memchr(s->data, 0, s->len))
        return fl_err_set(p->err, -EINVAL, "%s: %s contains a NUL byte at byte %" PRIu64, p->name, what, at);
    return 0;
}

/* --- metadata values ------------------------------------------------------------ */

static const size_t scalar_size[GGUF_VT_COUNT] = {
    [GGUF_VT_UINT8] = 1, [GGUF_VT_INT8] = 1, [GGUF_VT_UINT16] = 2, [GGUF_VT_INT16] = 2,
    [GGUF_VT_UINT32] = 4, [GGUF_VT_INT32] = 4, [GGUF_VT_FLOAT32] = 4, [GGUF_VT_BOOL] = 1,
    [GGUF_VT_UINT64] = 8, [GGUF_VT_INT64] = 8, [GGUF_VT_FLOAT64] = 8,
};

/* Smallest encoding of one array element of type t in the file. */
static uint64_t min_elem_bytes(enum gguf_vtype t)
{
    if (t == GGUF_VT_STRING)
        return 8;
    if (t == GGUF_VT_ARRAY)
        return 12;
    return scalar_size[t];
}

static int read_vtype(struct parser *p, enum gguf_vtype *t, const char *what)
{
    uint64_t at = p->pos;
    uint32_t v;
    int rc = read_u32(p, &v, what);
    if (rc)
        return rc;
    if (v >= GGUF_VT_COUNT)
        return fl_err_set(p->err, -EINVAL, "%s: unknown value type %" PRIu32 " at byte %" PRIu64,
                          p->name, v, at);
    *t = (enum gguf_vtype)v;
    return 0;
}

/* Bools must be 0 or 1: any other byte is not a valid C bool. */
static int check_bools(struct parser *p, const uint8_t *b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (b[i] > 1)
            return fl_err_set(p->err, -EINVAL, "%s: bool value %u is not 0 or 1 at byte %" PRIu64,
                              p->name, b[i], p->pos + i);
    return 0;
}

static int read_value(struct parser *p, enum gguf_vtype t, struct gguf_value *v);

static int read_array_elems(struct parser *p, enum gguf_vtype et, uint64_t n, void *elems)
{
    if (et == GGUF_VT_STRING) {
        struct gguf_str *s = elems;
        for (uint64_t i = 0; i < n; i++) {
            int rc = read_str(p, &s[i], "string array element");
            if (rc)
                return rc;
        }
        return 0;
    }
    if (et == GGUF_VT_ARRAY) {
        struct gguf_value *a = elems;
        for (uint64_t i = 0; i < n; i++) {
            int rc = read_value(p, GGUF_VT_ARRAY, &a[i]);
            if (rc)
                return rc;
        }
        return 0;
    }
    uint64_t bytes = n * scalar_size[et];
    if (et == GGUF_VT_BOOL) {
        int rc = check_bools(p, p->buf + p->pos, n);
        if (rc)
            return rc;
    }
    memcpy(elems, p->buf + p->pos, bytes);
    p->pos += bytes;
    return 0;
}

/* An array body: element type, count, elements. Elements are at least
 * min_elem_bytes each, so the count is checked against the file and those
 * bytes are made present before the element table is allocated. */
static int read_array(struct parser *p, struct gguf_value *v)
{
    uint64_t at = p->pos, n;
    enum gguf_vtype et = GGUF_VT_UINT8;
    int rc = read_vtype(p, &et, "array type");
    if (rc || (rc = read_u64(p, &n, "array length")))
        return rc;
    uint64_t min = min_elem_bytes(et);
    if (n > left(p) / min)
        return fl_err_set(p->err, -EINVAL, "%s: array of %" PRIu64 " %s values runs past the end of the "
                          "file at byte %" PRIu64, p->name, n, gguf_vtype_name(et), at);
    if (et == GGUF_VT_ARRAY && p->depth >= GGUF_MAX_NEST)
        return fl_err_set(p->err, -EINVAL, "%s: arrays nested deeper than %d at byte %" PRIu64,
                          p->name, GGUF_MAX_NEST, at);
    if ((rc = need(p, n * min, "array")))
        return rc;
    size_t esz = et == GGUF_VT_STRING ? sizeof(struct gguf_str)
               : et == GGUF_VT_ARRAY ? sizeof(struct gguf_value) : scalar_size[et];
    void *elems = arena_alloc(&p->f->arena, n ? n * esz : 1);
    if (!elems)
        return oom(p);
    p->depth++;
    rc = read_array_elems(p, et, n, elems);
    p->depth--;
    v->type = GGUF_VT_ARRAY;
    v->arr.type = et;
    v->arr.n = n;
    v->arr.elems = elems;
    return rc;
}

static int read_value(struct parser *p, enum gguf_vtype t, struct gguf_value *v)
{
    memset(v, 0, sizeof(*v));
    v->type = t;
    if (t == GGUF_VT_STRING)
        return read_str(p, &v->str, "string value");
    if (t == GGUF_VT_ARRAY)
        return read_array(p, v);
    int rc = need(p, scalar_size[t], "value");
    if (rc)
        return rc;
    if (t == GGUF_VT_BOOL && (rc = check_bools(p, p->buf + p->pos, 1)))
        return rc;
    /* All scalar members share the union's first bytes. */
    memcpy(&v->u64, p->buf + p->pos, scalar_size[t]);
    p->pos += scalar_size[t];
    return 0;
}

/* --- header sections ---------------------------------------------------------------- */

static int read_preamble(struct parser *p)
{
    char magic[4];
    int rc = read_bytes(p, magic, 4, "magic");
    if (rc)
        return rc;
    if (memcmp(magic, "GGUF", 4))
        return fl_err_set(p->err, -EINVAL, "%s: not a GGUF file (bad magic) at byte 0", p->name);
    uint32_t v;
    if ((rc = read_u32(p, &v, "version")))
        return rc;
    if (v == 1)
        return fl_err_set(p->err, -EINVAL, "%s: GGUF v1 is not supported (only v2 and v3) at byte 4", p->name);
    if (v != 2 && v != 3 && (v & 0xffff) == 0)
        return fl_err_set(p->err, -EINVAL, "%s: GGUF version 0x%08" PRIx32 " looks big-endian; only "
                          "little-endian files are supported at byte 4", p->name, v);
    if (v != 2 && v != 3)
        return fl_err_set(p->err, -EINVAL, "%s: unsupported GGUF version %" PRIu32 " (only v2 and v3) at byte 4",
                          p->name, v);
    p->f->version = v;
    return 0;
}

/* Both counts are bounded by what the rest of the file could hold, and that
 * many minimal records must be present before the tables are allocated. */
static int read_counts(struct parser *p)
{
    uint64_t nt, nkv;
    int rc = read_u64(p, &nt, "tensor count");
    if (rc || (rc = read_u64(p, &nkv, "metadata count")))
        return rc;
    if (nkv > left(p) / GGUF_MIN_KV_BYTES)
        return fl_err_set(p->err, -EINVAL, "%s: %" PRIu64 " metadata entries cannot fit in the rest of the "
                          "file at byte 16", p->name, nkv);
    uint64_t rest = left(p) - nkv * GGUF_MIN_KV_BYTES;
    if (nt > rest / GGUF_MIN_TI_BYTES)
        return fl_err_set(p->err, -EINVAL, "%s: %" PRIu64 " tensors cannot fit in the rest of the file at "
                          "byte 8", p->name, nt);
    if ((rc = need(p, nkv * GGUF_MIN_KV_BYTES + nt * GGUF_MIN_TI_BYTES, "metadata")))
        return rc;
    struct gguf_file *f = p->f;
    f->n_kv = (int64_t)nkv;
    f->n_tensors = (int64_t)nt;
    f->kv = calloc(nkv ? nkv : 1, sizeof(*f->kv));
    f->tensors = calloc(nt ? nt : 1, sizeof(*f->tensors));
    if (!f->kv || !f->tensors || index_init(&f->kv_index, f->n_kv) || index_init(&f->tensor_index, f->n_tensors))
        return oom(p);
    return 0;
}

/* Keys and tensor names are echoed in messages: keep them short and on one line. */
static const char *shown(const char *s, char buf[72])
{
    size_t o = 0;
    for (; *s && o < 64; s++)
        buf[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    if (*s)
        buf[o - 1] = '~';
    buf[o] = 0;
    return buf;
}

static int read_kvs(struct parser *p)
{
    struct gguf_file *f = p->f;
    for (int64_t i = 0; i < f->n_kv; i++) {
        struct gguf_kv *kv = &f->kv[i];
        struct gguf_str key;
        enum gguf_vtype t = GGUF_VT_UINT8;
        char b[72];
        kv->offset = p->pos;
        int rc = read_name(p, &key, "key");
        if (rc)
            return rc;
        kv->key = key.data;
        uint32_t *slot = index_slot(&f->kv_index, key.data, kv_name, f);
        if (*slot)
            return fl_err_set(p->err, -EINVAL, "%s: duplicate key '%s' at byte %" PRIu64,
                              p->name, shown(key.data, b), kv->offset);
        *slot = (uint32_t)i + 1;
        if ((rc = read_vtype(p, &t, "value type")) || (rc = read_value(p, t, &kv->val)))
            return rc;
    }
    return 0;
}

/* Alignment decides where the data section starts, so it is checked here
 * rather than with the other known keys. */
static int read_alignment(struct parser *p)
{
    struct gguf_file *f = p->f;
    int64_t i = gguf_find_kv(f, "general.alignment");
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (i < 0)
        return 0;
    const struct gguf_value *v = &f->kv[i].val;
    if (v->type != GGUF_VT_UINT32)
        return fl_err_set(p->err, -EINVAL, "%s: key 'general.alignment' has type %s, expected u32 at byte %"
                          PRIu64, p->name, gguf_vtype_name(v->type), f->kv[i].offset);
    if (v->u32 == 0 || (v->u32 & (v->u32 - 1)))
        return fl_err_set(p->err, -EINVAL, "%s: general.alignment %" PRIu32 " is not a power of two at byte %"
                          PRIu64, p->name, v->u32, f->kv[i].offset);
    f->alignment = v->u32;
    return 0;
}

/* --- tensor infos ------------------------------------------------------------------- */

static int tensor_err(struct parser *p, const struct gguf_tensor *t, const char *problem)
{
    char b[72];
    return fl_err_set(p->err, -EINVAL, "%s: tensor '%s': %s at byte %" PRIu64,
                      p->name, shown(t->name, b), problem, t->info_offset);
}

static int read_dims(struct parser *p, struct gguf_tensor *t)
{
    uint32_t nd;
    char msg[96];
    int rc = read_u32(p, &nd, "tensor dimension count");
    if (rc)
        return rc;
    if (nd < 1 || nd > GGUF_MAX_DIMS) {
        snprintf(msg, sizeof(msg), "n_dims %" PRIu32 " is not in 1..%d", nd, GGUF_MAX_DIMS);
        return tensor_err(p, t, msg);
    }
    t->n_dims = nd;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t ne;
        if ((rc = read_u64(p, &ne, "tensor shape")))
            return rc;
        if (ne < 1 || ne > INT64_MAX) {
            snprintf(msg, sizeof(msg), "dimension %" PRIu32 " is %" PRIu64 " (must be >= 1)", d, ne);
            return tensor_err(p, t, msg);
        }
        t->ne[d] = (int64_t)ne;
    }
    return 0;
}

/* Element count and byte size, with every product checked for overflow. */
static int tensor_size(struct parser *p, struct gguf_tensor *t)
{
    const struct fl_type_traits *tt = fl_type_traits(t->type);
    char msg[96];
    if (!tt || t->type >= FL_TYPE_FILE_COUNT) {
        snprintf(msg, sizeof(msg), "unknown type id %" PRIu32, t->type);
        return tensor_err(p, t, msg);
    }
    uint64_t n = 1, rows = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (__builtin_mul_overflow(n, (uint64_t)t->ne[d], &n) || n > INT64_MAX)
            return tensor_err(p, t, "element count overflows 64 bits");
        if (d > 0)
            rows *= (uint64_t)t->ne[d]; /* <= n, cannot overflow */
    }
    if ((uint64_t)t->ne[0] % (uint64_t)tt->blck_size) {
        snprintf(msg, sizeof(msg), "row length %" PRId64 " is not a multiple of the %s block size %d",
                 t->ne[0], tt->name, tt->blck_size);
        return tensor_err(p, t, msg);
    }
    uint64_t row = (uint64_t)t->ne[0] / (uint64_t)tt->blck_size;
    if (__builtin_mul_overflow(row, (uint64_t)tt->type_size, &row) ||
        __builtin_mul_overflow(row, rows, &t->nbytes) || t->nbytes > INT64_MAX)
        return tensor_err(p, t, "byte size overflows 64 bits");
    return 0;
}

static int read_tensor_info(struct parser *p, int64_t i)
{
    struct gguf_file *f = p->f;
    struct gguf_tensor *t = &f->tensors[i];
    struct gguf_str name;
    t->info_offset = p->pos;
    int rc = read_name(p, &name, "tensor name");
    if (rc)
        return rc;
    t->name = name.data;
    uint32_t *slot = index_slot(&f->tensor_index, name.data, tensor_name, f);
    if (*slot)
        return tensor_err(p, t, "duplicate tensor name");
    *slot = (uint32_t)i + 1;
    if ((rc = read_dims(p, t)) || (rc = read_u32(p, &t->type, "tensor type")) ||
        (rc = tensor_size(p, t)))
        return rc;
    return read_u64(p, &t->offset, "tensor offset"); /* relative until place_tensors */
}

static int cmp_by_offset(const void *a, const void *b)
{
    const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
    const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int check_overlaps(struct parser *p)
{
    struct gguf_file *f = p->f;
    if (f->n_tensors < 2)
        return 0;
    const struct gguf_tensor **by = malloc((size_t)f->n_tensors * sizeof(*by));
    if (!by)
        return oom(p);
    for (int64_t i = 0; i < f->n_tensors; i++)
        by[i] = &f->tensors[i];
    qsort(by, (size_t)f->n_tensors, sizeof(*by), cmp_by_offset);
    int rc = 0;
    for (int64_t i = 1; i < f->n_tensors && !rc; i++) {
        const struct gguf_tensor *a = by[i - 1], *b = by[i];
        if (a->offset + a->nbytes > b->offset) {
            char ba[72], bb[72];
            const struct gguf_tensor *later = a->info_offset > b->info_offset ? a : b;
            rc = fl_err_set(p->err, -EINVAL, "%s: tensors '%s' and '%s' overlap at byte %" PRIu64,
                            p->name, shown(a->name, ba), shown(b->name, bb), later->info_offset);
        }
    }
    free(by);
    return rc;
}

/* Turns relative offsets into absolute ones and checks each tensor lies
 * aligned and inside the file, and that no two share bytes. */
static int place_tensors(struct parser *p)
{
    struct gguf_file *f = p->f;
    char msg[160];
    for (int64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment) {
            snprintf(msg, sizeof(msg), "data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                     t->offset, f->alignment);
            return tensor_err(p, t, msg);
        }
        uint64_t room = f->file_size - f->data_offset;
        if (t->offset > room || t->nbytes > room - t->offset) {
            snprintf(msg, sizeof(msg), "%" PRIu64 " bytes at data offset %" PRIu64 " run past the end of the "
                     "file (%" PRIu64 " bytes)", t->nbytes, t->offset, f->file_size);
            return tensor_err(p, t, msg);
        }
        t->offset += f->data_offset;
    }
    return check_overlaps(p);
}

static int read_tensors(struct parser *p)
{
    struct gguf_file *f = p->f;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        int rc = read_tensor_info(p, i);
        if (rc)
            return rc;
    }
    f->header_size = p->pos;
    f->data_offset = p->pos;
    if (f->n_tensors > 0) {
        f->data_offset = (p->pos + f->alignment - 1) & ~(f->alignment - 1);
        if (f->data_offset > f->file_size)
            return fl_err_set(p->err, -EINVAL, "%s: data section starts at %" PRIu64 ", past the end of the "
                              "file at byte %" PRIu64, p->name, f->data_offset, p->pos);
    }
    return place_tensors(p);
}

/* --- entry points ------------------------------------------------------------------------ */

static int parse(struct parser *p, struct gguf_file **out)
{
    *out = NULL;
    struct gguf_file *f = calloc(1, sizeof(*f));
    if (!f || !(f->name = strdup(p->name))) {
        free(f);
        return fl_err_set(p->err, -ENOMEM, "%s: out of memory", p->name);
    }
    f->file_size = p->file_size;
    f->one = (struct gguf_part){ f->name, 0, p->file_size };
    f->parts = &f->one;
    f->n_parts = 1;
    p->f = f;
    int rc = read_preamble(p);
    if (!rc)
        rc = read_counts(p);
    if (!rc)
        rc = read_kvs(p);
    if (!rc)
        rc = read_alignment(p);
    if (!rc)
        rc = read_tensors(p);
    if (!rc)
        rc = p->no_keys_check ? 0 : gguf_keys_check(f, p->err);
    if (rc) {
        gguf_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

int gguf_parse(const void *buf, size_t len, uint64_t file_size, const char *name,
               struct gguf_file **out, struct fl_err *err)
{
    if (!name)
        name = "(buffer)";
    if (len > file_size)
        len = file_size; /* bytes past the file's end are not the file's */
    struct parser p = { .buf = buf, .len = len, .file_size = file_size, .fd = -1, .name = name, .err = err };
    return parse(&p, out);
}

/* Size of a regular file or block device; anything else (a FIFO, a socket)
 * has no size to validate against and could block a read. */
static int file_size_of(int fd, const char *path, uint64_t *size, struct fl_err *err)
{
    struct stat st;
    if (fstat(fd, &st))
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return fl_err_set(err, -EISDIR, "%s: is a directory", path);
    if (S_ISREG(st.st_mode)) {
        *size = (uint64_t)st.st_size;
        return 0;
    }
    if (S_ISBLK(st.st_mode)) {
        off_t end = lseek(fd, 0, SEEK_END);
        if (end < 0)
            return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
        *size = (uint64_t)end;
        return 0;
    }
    return fl_err_set(err, -EINVAL, "%s: not a regular file or block device", path);
}

static int open_part(const char *path, bool no_keys_check, struct gguf_file **out,
                     struct fl_err *err);

int gguf_open(const char *path, struct gguf_file **out, struct fl_err *err)
{
    return gguf_open_overridden(path, NULL, 0, out, err);
}

int gguf_open_overridden(const char *path, const char *const *specs, int n,
                         struct gguf_file **out, struct fl_err *err)
{
    int rc = open_part(path, n > 0, out, err);
    for (int i = 0; !rc && i < n; i++)
        rc = gguf_override(*out, specs[i], err);
    struct fl_err why;
    if (!rc && n > 0 && (rc = gguf_keys_check(*out, &why)))
        fl_err_set(err, rc, "%s (with --override-kv)", why.msg);
    if (!rc)
        rc = gguf_split_join(*out, err);
    if (rc) {
        gguf_close(*out);
        *out = NULL;
    }
    return rc;
}

int gguf_open_part(const char *path, struct gguf_file **out, struct fl_err *err)
{
    return open_part(path, false, out, err);
}

static int open_part(const char *path, bool no_keys_check, struct gguf_file **out,
                     struct fl_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    uint64_t size = 0;
    int rc = file_size_of(fd, path, &size, err);
    if (!rc) {
        struct parser p = { .file_size = size, .fd = fd, .name = path, .err = err,
                            .no_keys_check = no_keys_check };
        rc = parse(&p, out);
        free(p.own);
    }
    close(fd);
    return rc;
}

void gguf_close(struct gguf_file *f)
{
    if (!f)
        return;
    for (int i = 1; f->shards && i < f->n_parts; i++)
        gguf_close(f->shards[i]);
    free(f->shards);
    if (f->parts != &f->one)
        free(f->parts);
    arena_free(f->arena);
    free(f->kv_index.slot);
    free(f->tensor_index.slot);
    free(f->kv);
    free(f->tensors);
    free(f->name);
    free(f);
}

/* --- accessors ------------------------------------------------------------------------------ */

const char *gguf_name(const struct gguf_file *f) { return f->name; }
uint32_t gguf_version(const struct gguf_file *f) { return f->version; }
uint64_t gguf_file_size(const struct gguf_file *f) { return f->file_size; }
uint64_t gguf_alignment(const struct gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const struct gguf_file *f) { return f->data_offset; }
uint64_t gguf_header_size(const struct gguf_file *f) { return f->header_size; }
int64_t gguf_n_kv(const struct gguf_file *f) { return f->n_kv; }
int gguf_n_parts(const struct gguf_file *f) { return f->n_parts; }

const struct gguf_part *gguf_part(const struct gguf_file *f, int i)
{
    return i >= 0 && i < f->n_parts ? &f->parts[i] : NULL;
}

void *gguf_arena(struct gguf_file *f, size_t n) { return arena_alloc(&f->arena, n); }

/* ix built anew over the n names names(f, i): 0, -ENOMEM, or -EEXIST with
 * *dup the name two entries share. */
static int index_rebuild(struct gguf_file *f, struct name_index *ix, int64_t n,
                         const char *(*names)(const struct gguf_file *, int64_t), const char **dup)
{
    free(ix->slot);
    ix->slot = NULL;
    if (index_init(ix, n))
        return -ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        uint32_t *slot = index_slot(ix, names(f, i), names, f);
        if (*slot) {
            *dup = names(f, i);
            return -EEXIST;
        }
        *slot = (uint32_t)i + 1;
    }
    return 0;
}

int gguf_add_kv(struct gguf_file *f, const char *key, const struct gguf_value *v)
{
    char *k = arena_alloc(&f->arena, strlen(key) + 1);
    struct gguf_kv *kv = k ? realloc(f->kv, (size_t)(f->n_kv + 1) * sizeof(*kv)) : NULL;
    if (!kv)
        return -ENOMEM;
    f->kv = kv;
    kv[f->n_kv++] = (struct gguf_kv){ strcpy(k, key), *v, 0, false };
    const char *dup;
    return index_rebuild(f, &f->kv_index, f->n_kv, kv_name, &dup); /* the key was new */
}

int gguf_part_at(const struct gguf_file *f, uint64_t at, uint64_t *in_file)
{
    int i = f->n_parts - 1; /* the parts lie in order: the last whose base is at or below */
    while (i > 0 && f->parts[i].base > at)
        i--;
    *in_file = at - f->parts[i].base;
    return *in_file < f->parts[i].size ? i : -1;
}

uint64_t gguf_parts_bytes(const struct gguf_file *f)
{
    uint64_t bytes = 0;
    for (int i = 0; i < f->n_parts; i++)
        bytes += f->parts[i].size;
    return bytes;
}

int gguf_index_tensors(struct gguf_file *f, const char **dup)
{
    return index_rebuild(f, &f->tensor_index, f->n_tensors, tensor_name, dup);
}
int64_t gguf_n_tensors(const struct gguf_file *f) { return f->n_tensors; }

const char *gguf_kv_key(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_kv ? f->kv[i].key : NULL;
}

const struct gguf_value *gguf_kv_value(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_kv ? &f->kv[i].val : NULL;
}

uint64_t gguf_kv_offset(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_kv ? f->kv[i].offset : 0;
}

int64_t gguf_find_kv(const struct gguf_file *f, const char *key)
{
    /* During parsing the table is filled as keys are read; absent slots are 0. */
    if (!f->kv_index.slot)
        return -1;
    uint32_t s = *index_slot(&f->kv_index, key, kv_name, f);
    return s ? (int64_t)s - 1 : -1;
}

const struct gguf_tensor *gguf_tensor(const struct gguf_file *f, int64_t i)
{
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name)
{
    if (!f->tensor_index.slot)
        return NULL;
    uint32_t s = *index_slot(&f->tensor_index, name, tensor_name, f);
    return s ? &f->tensors[s - 1] : NULL;
}

/* --- typed lookups ----------------------------------------------------------------------------- */

int gguf_value_int(const struct gguf_value *v, int64_t *out)
{
    switch (v->type) {
    case GGUF_VT_UINT8: *out = v->u8; return 0;
    case GGUF_VT_INT8: *out = v->i8; return 0;
    case GGUF_VT_UINT16: *out = v->u16; return 0;
    case GGUF_VT_INT16: *out = v->i16; return 0;
    case GGUF_VT_UINT32: *out = v->u32; return 0;
    case GGUF_VT_INT32: *out = v->i32; return 0;
    case GGUF_VT_INT64: *out = v->i64; return 0;
    case GGUF_VT_BOOL: *out = v->b; return 0;
    case GGUF_VT_UINT64:
        if (v->u64 > INT64_MAX)
            return -ERANGE;
        *out = (int64_t)v->u64;
        return 0;
    default:
        return -EINVAL;
    }
}

int gguf_get_int(const struct gguf_file *f, const char *key, int64_t *out)
{
    const struct gguf_value *v = gguf_kv_value(f, gguf_find_kv(f, key));
    return v ? gguf_value_int(v, out) : -ENOENT;
}

int gguf_get_float(const struct gguf_file *f, const char *key, double *out)
{
    const struct gguf_value *v = gguf_kv_value(f, gguf_find_kv(f, key));
    if (!v)
        return -ENOENT;
    if (v->type == GGUF_VT_FLOAT32) {
        *out = v->f32;
        return 0;
    }
    if (v->type == GGUF_VT_FLOAT64) {
        *out = v->f64;
        return 0;
    }
    if (v->type == GGUF_VT_UINT64) { /* may exceed int64 but is still a number */
        *out = (double)v->u64;
        return 0;
    }
    int64_t i;
    int rc = v->type == GGUF_VT_BOOL ? -EINVAL : gguf_value_int(v, &i);
    if (!rc)
        *out = (double)i;
    return rc;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out)
{
    const struct gguf_value *v = gguf_kv_value(f, gguf_find_kv(f, key));
    if (!v)
        return -ENOENT;
    if (v->type != GGUF_VT_BOOL)
        return -EINVAL;
    *out = v->b;
    return 0;
}

int gguf_get_str(const struct gguf_file *f, const char *key, const char **out)
{
    const struct gguf_value *v = gguf_kv_value(f, gguf_find_kv(f, key));
    if (!v)
        return -ENOENT;
    if (v->type != GGUF_VT_STRING)
        return -EINVAL;
    *out = v->str.data;
    return 0;
}

int gguf_get_arr(const struct gguf_file *f, const char *key, const struct gguf_value **out)
{
    const struct gguf_value *v = gguf_kv_value(f, gguf_find_kv(f, key));
    if (!v)
        return -ENOENT;
    if (v->type != GGUF_VT_ARRAY)
        return -EINVAL;
    *out = v;
    return 0;
}

const char *gguf_vtype_name(enum gguf_vtype t)
{
    static const char *const names[GGUF_VT_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    return (unsigned)t < GGUF_VT_COUNT ? names[t] : "?";
}

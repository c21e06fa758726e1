/* test-gguf: the GGUF header reader.
 *
 * 1. The five reference models parse, with the tensor counts and types and
 *    the key values listed in tests/data/ref/README.md.
 * 2. A small valid file (built here byte by byte) and a real header, cut at
 *    every byte of their header, are rejected with a one-line message.
 * 3. Seeded random bit flips in headers are rejected or parse into a file
 *    whose every invariant holds.
 * 4. Hand-made hostile headers, one per validation rule, each give the
 *    expected message at the expected byte.
 * 5. gguf_open on real files: growth past the first chunk, 64-bit offsets in
 *    a sparse file, and I/O errors. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/tensor-types.h"
#define CHECK_OUT stderr
#include "tests/check.h"

/* --- a byte-level GGUF builder, independent of the reader ------------------ */

struct gb {
    uint8_t *buf;
    size_t len, cap;
};

static void put(struct gb *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->buf = realloc(b->buf, b->cap);
        if (!b->buf)
            abort();
    }
    memcpy(b->buf + b->len, p, n);
    b->len += n;
}

static void u8(struct gb *b, uint8_t v) { put(b, &v, 1); }
static void u32(struct gb *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct gb *b, uint64_t v) { put(b, &v, 8); }
static void f32(struct gb *b, float v) { put(b, &v, 4); }

static void str(struct gb *b, const char *s)
{
    u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void head(struct gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kv);
}

static void kv_u32(struct gb *b, const char *k, uint32_t v) { str(b, k); u32(b, GGUF_VT_UINT32); u32(b, v); }
static void kv_str(struct gb *b, const char *k, const char *v) { str(b, k); u32(b, GGUF_VT_STRING); str(b, v); }

static void tinfo(struct gb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        u64(b, ne[d]);
    u32(b, type);
    u64(b, off);
}

/* Pads to the alignment and appends data_bytes of data. */
static void data(struct gb *b, size_t align, size_t data_bytes)
{
    while (b->len % align)
        u8(b, 0);
    for (size_t i = 0; i < data_bytes; i++)
        u8(b, (uint8_t)i);
}

/* The small valid file: every value type once, a nested array, a per-layer
 * array, three tensors of different types. Returns its header size. */
static size_t build_small(struct gb *b)
{
    head(b, 3, 3, 9);
    kv_str(b, "general.architecture", "llama");
    kv_u32(b, "llama.block_count", 2);
    str(b, "llama.attention.head_count_kv"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_INT32); u64(b, 2);
    u32(b, 2); u32(b, 4);
    str(b, "u8"); u32(b, GGUF_VT_UINT8); u8(b, 7);
    str(b, "i64"); u32(b, GGUF_VT_INT64); u64(b, (uint64_t)-5);
    str(b, "f64"); u32(b, GGUF_VT_FLOAT64); { double d = 0.25; put(b, &d, 8); }
    str(b, "flag"); u32(b, GGUF_VT_BOOL); u8(b, 1);
    str(b, "strs"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_STRING); u64(b, 2); str(b, "a"); str(b, "bc");
    /* [[1.5], [], [2.5, 3.5]] */
    str(b, "nested"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_ARRAY); u64(b, 3);
    u32(b, GGUF_VT_FLOAT32); u64(b, 1); f32(b, 1.5f);
    u32(b, GGUF_VT_FLOAT32); u64(b, 0);
    u32(b, GGUF_VT_FLOAT32); u64(b, 2); f32(b, 2.5f); f32(b, 3.5f);
    tinfo(b, "a", 2, (uint64_t[]){ 4, 3 }, FL_TYPE_F32, 0);          /* 48 bytes */
    tinfo(b, "b", 1, (uint64_t[]){ 64 }, FL_TYPE_Q8_0, 64);          /* 68 bytes */
    tinfo(b, "c", 3, (uint64_t[]){ 256, 1, 2 }, FL_TYPE_Q4_K, 160);  /* 288 bytes */
    size_t header = b->len;
    data(b, 32, 160 + 288);
    return header;
}

/* --- invariants of a parsed file --------------------------------------------- */

static uint64_t walk_value(const struct gguf_value *v, int depth)
{
    uint64_t n = 1;
    if (v->type == GGUF_VT_STRING)
        n += strlen(v->str.data) == v->str.len ? 0 : 1000000; /* no embedded NUL in walkable text */
    if (v->type != GGUF_VT_ARRAY)
        return n;
    if (v->arr.type == GGUF_VT_STRING) {
        const struct gguf_str *s = v->arr.elems;
        for (uint64_t i = 0; i < v->arr.n; i++)
            n += s[i].data[s[i].len] == 0; /* NUL-terminated copies, readable */
    } else if (v->arr.type == GGUF_VT_ARRAY) {
        const struct gguf_value *a = v->arr.elems;
        for (uint64_t i = 0; i < v->arr.n; i++)
            n += walk_value(&a[i], depth + 1);
    } else if (v->arr.type == GGUF_VT_BOOL) {
        const bool *bs = v->arr.elems;
        for (uint64_t i = 0; i < v->arr.n; i++)
            n += bs[i];
    }
    return n;
}

static int cmp_u64pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Checks what the reader promises about any file it accepts. */
static void check_invariants(const struct gguf_file *f, const char *what)
{
    uint64_t size = gguf_file_size(f), align = gguf_alignment(f);
    CHECK(align && !(align & (align - 1)), "%s: alignment %" PRIu64, what, align);
    CHECK(gguf_data_offset(f) <= size, "%s: data offset past end", what);
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        CHECK(gguf_find_kv(f, gguf_kv_key(f, i)) == i, "%s: key %" PRId64 " not found by name", what, i);
        walk_value(gguf_kv_value(f, i), 0);
    }
    int64_t n = gguf_n_tensors(f);
    uint64_t *span = malloc(sizeof(uint64_t) * 2 * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        const struct fl_type_traits *tt = fl_type_traits(t->type);
        CHECK(gguf_find_tensor(f, t->name) == t, "%s: tensor %s not found by name", what, t->name);
        CHECK(tt != NULL, "%s: tensor %s has unknown type", what, t->name);
        CHECK(t->n_dims >= 1 && t->n_dims <= 4, "%s: n_dims", what);
        uint64_t rows = 1;
        for (int d = 0; d < 4; d++) {
            CHECK(t->ne[d] >= 1, "%s: ne", what);
            rows *= d ? (uint64_t)t->ne[d] : 1;
        }
        if (tt)
            CHECK(t->nbytes == (uint64_t)t->ne[0] / (uint64_t)tt->blck_size * tt->type_size * rows,
                  "%s: nbytes of %s", what, t->name);
        CHECK(t->offset % align == 0 && t->offset >= gguf_data_offset(f), "%s: offset of %s", what, t->name);
        CHECK(t->offset <= size && t->nbytes <= size - t->offset, "%s: %s outside file", what, t->name);
        span[2 * i] = t->offset;
        span[2 * i + 1] = t->nbytes;
    }
    qsort(span, (size_t)n, 2 * sizeof(uint64_t), cmp_u64pair);
    for (int64_t i = 1; i < n; i++)
        CHECK(span[2 * i - 2] + span[2 * i - 1] <= span[2 * i], "%s: tensors overlap", what);
    free(span);
}

/* A rejection: -EINVAL (or -ENOMEM never), one line, "NAME: ... at byte N". */
static void check_rejection(int rc, const struct fl_err *err, const char *name, const char *what)
{
    CHECK(rc == -EINVAL, "%s: rc %d", what, rc);
    CHECK(!strncmp(err->msg, name, strlen(name)) && err->msg[strlen(name)] == ':',
          "%s: message does not start with the name: %s", what, err->msg);
    CHECK(strstr(err->msg, " at byte ") != NULL, "%s: no offset in: %s", what, err->msg);
    CHECK(strchr(err->msg, '\n') == NULL, "%s: multi-line message", what);
}

/* --- 1. reference models ---------------------------------------------------------- */

struct type_count {
    uint32_t type;
    int n;
};

struct model_ref {
    const char *file;
    uint64_t size;
    int n_tensors;
    struct type_count types[6];
};

/* From tests/data/ref/README.md (the "Models" table and "Tensor types"). */
static const struct model_ref models[] = {
    { "qwen3moe-tiny-F16.gguf", 2342176, 27, { { FL_TYPE_F16, 16 }, { FL_TYPE_F32, 11 } } },
    { "qwen3moe-tiny-Q8_0.gguf", 1266784, 27, { { FL_TYPE_F32, 11 }, { FL_TYPE_Q8_0, 16 } } },
    { "mixtral-tiny-Q4_K_M.gguf", 2546336, 23,
      { { FL_TYPE_F32, 7 }, { FL_TYPE_Q4_K, 8 }, { FL_TYPE_Q5_K, 2 }, { FL_TYPE_Q6_K, 2 }, { FL_TYPE_Q8_0, 4 } } },
    { "deepseek2-tiny-F16.gguf", 1982080, 52, { { FL_TYPE_F16, 35 }, { FL_TYPE_F32, 17 } } },
    { "gpt-oss-tiny-MXFP4.gguf", 869056, 41, { { FL_TYPE_F32, 25 }, { FL_TYPE_MXFP4, 6 }, { FL_TYPE_Q8_0, 10 } } },
};

static char *data_path(const char *file)
{
    const char *dir = getenv("FL_SOURCE_DIR");
    static char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/%s", dir ? dir : ".", file);
    return path;
}

static void check_type_counts(const struct gguf_file *f, const struct model_ref *m)
{
    int count[FL_TYPE_COUNT] = { 0 }, want[FL_TYPE_COUNT] = { 0 };
    for (int64_t i = 0; i < gguf_n_tensors(f); i++)
        if (gguf_tensor(f, i)->type < FL_TYPE_COUNT)
            count[gguf_tensor(f, i)->type]++;
    for (int i = 0; i < 6 && m->types[i].n; i++)
        want[m->types[i].type] = m->types[i].n;
    for (int t = 0; t < FL_TYPE_COUNT; t++)
        CHECK(count[t] == want[t], "%s: %d tensors of %s, README says %d", m->file, count[t],
              fl_type_name((uint32_t)t), want[t]);
}

/* Key values stated in the README. */
static void check_known_keys(const struct gguf_file *f, const char *file)
{
    const char *arch = NULL;
    int64_t v = 0;
    const struct gguf_value *tok = NULL;
    CHECK(!gguf_get_str(f, "general.architecture", &arch), "%s: architecture", file);
    CHECK(!gguf_get_arr(f, "tokenizer.ggml.tokens", &tok) && tok->arr.n == 1025 &&
          tok->arr.type == GGUF_VT_STRING, "%s: 1025 tokens", file);
    if (!arch)
        return;
    char key[128];
    snprintf(key, sizeof(key), "%s.expert_count", arch);
    int64_t want_e = !strcmp(arch, "qwen3moe") ? 16 : 8;
    CHECK(!gguf_get_int(f, key, &v) && v == want_e, "%s: %s = %" PRId64, file, key, v);
    snprintf(key, sizeof(key), "%s.expert_used_count", arch);
    CHECK(!gguf_get_int(f, key, &v) && v == (!strcmp(arch, "qwen3moe") ? 4 : 2), "%s: %s", file, key);
    snprintf(key, sizeof(key), "%s.embedding_length", arch);
    CHECK(!gguf_get_int(f, key, &v) && v == (!strcmp(arch, "llama") ? 256 : 128), "%s: %s", file, key);
    if (!strcmp(arch, "llama")) {
        bool b = false;
        CHECK(!gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b) && b, "%s: add_bos", file);
        CHECK(!gguf_get_int(f, "tokenizer.ggml.bos_token_id", &v) && v == 1, "%s: bos", file);
    }
    if (!strcmp(arch, "deepseek2")) {
        double d = 0;
        CHECK(!gguf_get_float(f, "deepseek2.expert_weights_scale", &d) && d == 2.5, "%s: scale", file);
        CHECK(!gguf_get_int(f, "deepseek2.leading_dense_block_count", &v) && v == 1, "%s: dense", file);
    }
}

static void test_models(void)
{
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        struct gguf_file *f = NULL, *g = NULL;
        struct fl_err err = { { 0 } };
        const char *path = data_path(models[m].file);
        int rc = gguf_open(path, &f, &err);
        CHECK(rc == 0, "%s: gguf_open: %s", models[m].file, err.msg);
        if (rc)
            continue;
        CHECK(gguf_version(f) == 3, "%s: version", models[m].file);
        CHECK(gguf_file_size(f) == models[m].size, "%s: size", models[m].file);
        CHECK(gguf_n_tensors(f) == models[m].n_tensors, "%s: %" PRId64 " tensors, README says %d",
              models[m].file, gguf_n_tensors(f), models[m].n_tensors);
        check_type_counts(f, &models[m]);
        check_known_keys(f, models[m].file);
        check_invariants(f, models[m].file);
        /* The same header from memory, given only up to the header's end. */
        size_t len = 0;
        uint8_t *buf = (uint8_t *)check_read_file(path, &len);
        rc = gguf_parse(buf, (size_t)gguf_header_size(f), len, "mem", &g, &err);
        CHECK(rc == 0, "%s: gguf_parse of the header alone: %s", models[m].file, err.msg);
        if (!rc) {
            CHECK(gguf_n_kv(g) == gguf_n_kv(f) && gguf_data_offset(g) == gguf_data_offset(f),
                  "%s: parse and open disagree", models[m].file);
            for (int64_t i = 0; i < gguf_n_tensors(f) && i < gguf_n_tensors(g); i++)
                CHECK(gguf_tensor(f, i)->offset == gguf_tensor(g, i)->offset, "%s: offsets", models[m].file);
        }
        gguf_close(g);
        free(buf);
        gguf_close(f);
        printf("ok   %s: %d tensors, types as in the README\n", models[m].file, models[m].n_tensors);
    }
}

/* Any other model dropped into tests/data must parse too. */
static void test_all_data_files(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/tests/data", src ? src : ".");
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot list %s", dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf"))
            continue;
        struct gguf_file *f = NULL;
        struct fl_err err = { { 0 } };
        CHECK(gguf_open(data_path(e->d_name), &f, &err) == 0, "%s", err.msg);
        if (f)
            check_invariants(f, e->d_name);
        gguf_close(f);
        n++;
    }
    if (d)
        closedir(d);
    CHECK(n >= 5, "only %d .gguf files in %s", n, dir);
    printf("ok   all %d tests/data/*.gguf files parse\n", n);
}

/* A header that would need more than the reader's cap is refused before
 * anything is read or allocated for it. */
static void test_header_cap(void)
{
    struct gb b = { 0 };
    head(&b, 3, 0, 1);
    str(&b, "huge"); u32(&b, GGUF_VT_ARRAY);
    size_t at = b.len;
    u32(&b, GGUF_VT_UINT8); u64(&b, 300ull << 20);
    struct gguf_file *f = NULL;
    struct fl_err err = { { 0 } };
    char want[64];
    int rc = gguf_parse(b.buf, b.len, 1ull << 40, "cap", &f, &err);
    snprintf(want, sizeof(want), "at byte %zu", at + 12);
    CHECK(rc == -EINVAL && strstr(err.msg, "header larger than 256 MiB") && strstr(err.msg, want),
          "header cap: %s", err.msg);
    gguf_close(f);
    free(b.buf);
    printf("ok   a 300 MiB array in a 1 TiB file: %s\n", err.msg);
}

/* --- 2. truncation ------------------------------------------------------------------ */

static void test_truncation(const uint8_t *buf, size_t header, size_t full, const char *what, size_t step)
{
    int bad = 0;
    for (size_t cut = 0; cut < header; cut += step) {
        struct gguf_file *f = NULL;
        struct fl_err err = { { 0 } };
        /* A file that really ends here, then a longer file given only in part. */
        int rc = gguf_parse(buf, cut, cut, "cut", &f, &err);
        check_rejection(rc, &err, "cut", what);
        bad += rc == 0;
        gguf_close(f);
        rc = gguf_parse(buf, cut, full, "part", &f, &err);
        check_rejection(rc, &err, "part", what);
        bad += rc == 0;
        gguf_close(f);
    }
    CHECK(bad == 0, "%s: %d truncations accepted", what, bad);
    printf("ok   %s: every cut of the %zu-byte header (step %zu) rejected\n", what, header, step);
}

/* --- 3. bit flips --------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    return check_xorshift64(&rng_state);
}

static void test_bitflips(const uint8_t *orig, size_t len, size_t header, int rounds, const char *what)
{
    uint8_t *buf = malloc(len);
    int accepted = 0;
    for (int r = 0; r < rounds; r++) {
        memcpy(buf, orig, len);
        int flips = 1 + (int)(rng() % 3);
        for (int i = 0; i < flips; i++) {
            uint64_t bit = rng() % (header * 8);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        struct gguf_file *f = NULL;
        struct fl_err err = { { 0 } };
        int rc = gguf_parse(buf, len, len, "flip", &f, &err);
        if (rc == 0) {
            accepted++;
            check_invariants(f, what);
        } else {
            check_rejection(rc, &err, "flip", what);
        }
        gguf_close(f);
    }
    free(buf);
    printf("ok   %s: %d random bit flips: %d rejected cleanly, %d parsed consistently\n", what, rounds,
           rounds - accepted, accepted);
}

/* --- 4. hostile headers ------------------------------------------------------------- */

static size_t mark; /* where the offending record starts, set by each builder */

static void here(struct gb *b) { mark = b->len; }

static void h_magic(struct gb *b) { put(b, "GGUX", 4); u32(b, 3); u64(b, 0); u64(b, 0); mark = 0; }
static void h_v1(struct gb *b) { head(b, 1, 0, 0); mark = 4; }
static void h_v4(struct gb *b) { head(b, 4, 0, 0); mark = 4; }
static void h_bigendian(struct gb *b) { head(b, 0x03000000u, 0, 0); mark = 4; }
static void h_huge_kv(struct gb *b) { head(b, 3, 0, 1ull << 60); mark = 16; }
static void h_huge_tensors(struct gb *b) { head(b, 3, 1ull << 60, 0); mark = 8; }
static void h_huge_str(struct gb *b) { head(b, 3, 0, 1); here(b); u64(b, 1ull << 62); put(b, "abcdefgh", 8); }
static void h_huge_arr(struct gb *b)
{
    head(b, 3, 0, 1);
    str(b, "big"); u32(b, GGUF_VT_ARRAY);
    here(b); u32(b, GGUF_VT_UINT32); u64(b, 1ull << 40); u32(b, 1);
}

/* levels arrays of arrays, the innermost holding no u8. */
static void nest(struct gb *b, int levels)
{
    head(b, 3, 0, 1);
    str(b, "deep"); u32(b, GGUF_VT_ARRAY);
    for (int i = 0; i < levels; i++) {
        if (i == 8)
            here(b);
        u32(b, GGUF_VT_ARRAY); u64(b, 1);
    }
    u32(b, GGUF_VT_UINT8); u64(b, 0);
}
static void h_deep(struct gb *b) { nest(b, 9); }
static void h_bool(struct gb *b) { head(b, 3, 0, 1); str(b, "b"); u32(b, GGUF_VT_BOOL); here(b); u8(b, 2); }
static void h_vtype(struct gb *b) { head(b, 3, 0, 1); str(b, "t"); here(b); u32(b, 13); u32(b, 0); }
static void h_empty_key(struct gb *b) { head(b, 3, 0, 1); here(b); u64(b, 0); u32(b, GGUF_VT_UINT8); u8(b, 0); }
static void h_nul_key(struct gb *b)
{
    head(b, 3, 0, 1); here(b); u64(b, 3); put(b, "a\0b", 3); u32(b, GGUF_VT_UINT8); u8(b, 0);
}
static void h_dup_key(struct gb *b) { head(b, 3, 0, 2); kv_u32(b, "x", 1); here(b); kv_u32(b, "x", 2); }
static void h_key_type(struct gb *b)
{
    head(b, 3, 0, 2); kv_str(b, "general.architecture", "llama"); here(b); kv_str(b, "llama.block_count", "2");
}
static void h_arch_type(struct gb *b) { head(b, 3, 0, 1); here(b); kv_u32(b, "general.architecture", 1); }
static void h_align_type(struct gb *b)
{
    head(b, 3, 0, 1); here(b); str(b, "general.alignment"); u32(b, GGUF_VT_UINT64); u64(b, 32);
}
static void h_align_48(struct gb *b) { head(b, 3, 0, 1); here(b); kv_u32(b, "general.alignment", 48); }
static void h_align_0(struct gb *b) { head(b, 3, 0, 1); here(b); kv_u32(b, "general.alignment", 0); }
static void h_negative(struct gb *b)
{
    head(b, 3, 0, 2); kv_str(b, "general.architecture", "qwen3moe");
    here(b); str(b, "qwen3moe.expert_count"); u32(b, GGUF_VT_INT32); u32(b, (uint32_t)-1);
}
static void h_per_layer_len(struct gb *b)
{
    head(b, 3, 0, 3); kv_str(b, "general.architecture", "llama"); kv_u32(b, "llama.block_count", 2);
    here(b); str(b, "llama.attention.head_count_kv"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_UINT32);
    u64(b, 3); u32(b, 1); u32(b, 2); u32(b, 3);
}
static void tokens3(struct gb *b)
{
    str(b, "tokenizer.ggml.tokens"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_STRING); u64(b, 3);
    str(b, "x"); str(b, "y"); str(b, "z");
}
static void h_token_type(struct gb *b)
{
    head(b, 3, 0, 2); tokens3(b);
    here(b); str(b, "tokenizer.ggml.token_type"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_UINT8); u64(b, 3);
    u8(b, 1); u8(b, 1); u8(b, 1);
}
static void h_scores_len(struct gb *b)
{
    head(b, 3, 0, 2); tokens3(b);
    here(b); str(b, "tokenizer.ggml.scores"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_FLOAT32); u64(b, 2);
    f32(b, 0); f32(b, 0);
}
static void h_tokens_type(struct gb *b)
{
    head(b, 3, 0, 1);
    here(b); str(b, "tokenizer.ggml.tokens"); u32(b, GGUF_VT_ARRAY); u32(b, GGUF_VT_INT32); u64(b, 1); u32(b, 0);
}

/* One tensor with the given shape and type at relative offset 0. */
static void one_tensor(struct gb *b, uint32_t n_dims, const uint64_t *ne, uint32_t type)
{
    head(b, 3, 1, 0); here(b); tinfo(b, "t", n_dims, ne, type, 0); data(b, 32, 64);
}
static void h_ndims5(struct gb *b) { one_tensor(b, 5, (uint64_t[]){ 1, 1, 1, 1, 1 }, FL_TYPE_F32); }
static void h_ndims0(struct gb *b) { one_tensor(b, 0, NULL, FL_TYPE_F32); }
static void h_dim0(struct gb *b) { one_tensor(b, 2, (uint64_t[]){ 4, 0 }, FL_TYPE_F32); }
static void h_type99(struct gb *b) { one_tensor(b, 1, (uint64_t[]){ 4 }, 99); }
static void h_block(struct gb *b) { one_tensor(b, 1, (uint64_t[]){ 100 }, FL_TYPE_Q4_K); }
static void h_nelem(struct gb *b) { one_tensor(b, 2, (uint64_t[]){ 1ull << 32, 1ull << 32 }, FL_TYPE_F32); }
static void h_nbytes(struct gb *b) { one_tensor(b, 1, (uint64_t[]){ 1ull << 62 }, FL_TYPE_F32); }
static void h_past_end(struct gb *b) { one_tensor(b, 1, (uint64_t[]){ 32 }, FL_TYPE_F32); }
static void h_unaligned(struct gb *b)
{
    head(b, 3, 1, 0); here(b); tinfo(b, "t", 1, (uint64_t[]){ 4 }, FL_TYPE_F32, 16); data(b, 32, 64);
}
static void h_overlap(struct gb *b)
{
    head(b, 3, 2, 0);
    tinfo(b, "a", 1, (uint64_t[]){ 16 }, FL_TYPE_F32, 0);
    here(b); tinfo(b, "b", 1, (uint64_t[]){ 16 }, FL_TYPE_F32, 32);
    data(b, 32, 128);
}
static void h_dup_tensor(struct gb *b)
{
    head(b, 3, 2, 0);
    tinfo(b, "a", 1, (uint64_t[]){ 8 }, FL_TYPE_F32, 0);
    here(b); tinfo(b, "a", 1, (uint64_t[]){ 8 }, FL_TYPE_F32, 32);
    data(b, 32, 64);
}
static void h_empty_name(struct gb *b) { head(b, 3, 1, 0); here(b); tinfo(b, "", 1, (uint64_t[]){ 8 }, FL_TYPE_F32, 0); }

struct hostile {
    const char *what;
    void (*build)(struct gb *b);
    const char *expect;
};

static const struct hostile hostiles[] = {
    { "bad magic", h_magic, "not a GGUF file" },
    { "GGUF v1", h_v1, "GGUF v1 is not supported" },
    { "GGUF v4", h_v4, "unsupported GGUF version 4" },
    { "big-endian", h_bigendian, "big-endian" },
    { "huge n_kv", h_huge_kv, "metadata entries cannot fit" },
    { "huge n_tensors", h_huge_tensors, "tensors cannot fit" },
    { "huge string length", h_huge_str, "key length 4611686018427387904 runs past the end" },
    { "huge array length", h_huge_arr, "array of 1099511627776 u32 values runs past the end" },
    { "arrays nested 9 deep", h_deep, "arrays nested deeper than 8" },
    { "bool 2", h_bool, "bool value 2 is not 0 or 1" },
    { "unknown value type", h_vtype, "unknown value type 13" },
    { "empty key", h_empty_key, "empty key" },
    { "NUL in key", h_nul_key, "key contains a NUL byte" },
    { "duplicate key", h_dup_key, "duplicate key 'x'" },
    { "wrong key type", h_key_type, "key 'llama.block_count' holds str, expected an unsigned 32-bit integer" },
    { "architecture not a string", h_arch_type, "key 'general.architecture' holds u32, expected a string" },
    { "alignment not u32", h_align_type, "'general.alignment' has type u64, expected u32" },
    { "alignment 48", h_align_48, "general.alignment 48 is not a power of two" },
    { "alignment 0", h_align_0, "general.alignment 0 is not a power of two" },
    { "negative count", h_negative, "key 'qwen3moe.expert_count' holds i32 out of range" },
    { "per-layer array length", h_per_layer_len, "'llama.attention.head_count_kv' has 3 elements, expected 2" },
    { "token_type of u8", h_token_type, "holds arr[u8], expected an array of i32" },
    { "scores length", h_scores_len, "'tokenizer.ggml.scores' has 2 elements, expected 3" },
    { "tokens of i32", h_tokens_type, "holds arr[i32], expected an array of strings" },
    { "n_dims 5", h_ndims5, "tensor 't': n_dims 5 is not in 1..4" },
    { "n_dims 0", h_ndims0, "tensor 't': n_dims 0 is not in 1..4" },
    { "dimension 0", h_dim0, "dimension 1 is 0" },
    { "unknown type id", h_type99, "unknown type id 99" },
    { "row not whole blocks", h_block, "row length 100 is not a multiple of the Q4_K block size 256" },
    { "element count overflow", h_nelem, "element count overflows" },
    { "byte size overflow", h_nbytes, "byte size overflows" },
    { "tensor past the end", h_past_end, "128 bytes at data offset 0 run past the end of the file (128 bytes)" },
    { "unaligned offset", h_unaligned, "data offset 16 is not a multiple of the alignment 32" },
    { "overlapping tensors", h_overlap, "tensors 'a' and 'b' overlap" },
    { "duplicate tensor name", h_dup_tensor, "tensor 'a': duplicate tensor name" },
    { "empty tensor name", h_empty_name, "empty tensor name" },
};

static void test_hostile(void)
{
    for (size_t i = 0; i < sizeof(hostiles) / sizeof(hostiles[0]); i++) {
        struct gb b = { 0 };
        struct gguf_file *f = NULL;
        struct fl_err err = { { 0 } };
        char at[48];
        mark = (size_t)-1;
        hostiles[i].build(&b);
        int rc = gguf_parse(b.buf, b.len, b.len, "hostile.gguf", &f, &err);
        check_rejection(rc, &err, "hostile.gguf", hostiles[i].what);
        snprintf(at, sizeof(at), " at byte %zu", mark);
        size_t ml = strlen(err.msg), al = strlen(at);
        bool ok = strstr(err.msg, hostiles[i].expect) && ml >= al && !strcmp(err.msg + ml - al, at);
        CHECK(ok, "%s: expected \"%s ...%s\", got \"%s\"", hostiles[i].what, hostiles[i].expect, at, err.msg);
        if (ok)
            printf("ok   hostile %-26s -> %s\n", hostiles[i].what, err.msg);
        gguf_close(f);
        free(b.buf);
    }
}

/* --- the small file's values, and the typed getters ------------------------------- */

static void test_small_values(void)
{
    struct gb b = { 0 };
    size_t header = build_small(&b);
    struct gguf_file *f = NULL;
    struct fl_err err = { { 0 } };
    int rc = gguf_parse(b.buf, b.len, b.len, "small", &f, &err);
    CHECK(rc == 0, "small file: %s", err.msg);
    if (rc) {
        free(b.buf);
        return;
    }
    int64_t i = 0;
    double d = 0;
    bool flag = false;
    const char *s = NULL;
    const struct gguf_value *a = NULL;
    CHECK(gguf_header_size(f) == header && gguf_data_offset(f) == (header + 31) / 32 * 32, "small: data offset");
    CHECK(!gguf_get_int(f, "u8", &i) && i == 7, "small: u8");
    CHECK(!gguf_get_int(f, "i64", &i) && i == -5, "small: i64");
    CHECK(!gguf_get_float(f, "f64", &d) && d == 0.25, "small: f64");
    CHECK(!gguf_get_float(f, "u8", &d) && d == 7.0, "small: int as float");
    CHECK(!gguf_get_bool(f, "flag", &flag) && flag, "small: bool");
    CHECK(!gguf_get_int(f, "flag", &i) && i == 1, "small: bool as int");
    CHECK(gguf_get_str(f, "u8", &s) == -EINVAL, "small: u8 as string");
    CHECK(gguf_get_bool(f, "u8", &flag) == -EINVAL, "small: u8 as bool");
    CHECK(gguf_get_int(f, "general.architecture", &i) == -EINVAL, "small: string as int");
    CHECK(gguf_get_int(f, "absent", &i) == -ENOENT, "small: absent key");
    CHECK(!gguf_get_str(f, "general.architecture", &s) && !strcmp(s, "llama"), "small: str");
    CHECK(!gguf_get_arr(f, "strs", &a) && a->arr.n == 2 && a->arr.type == GGUF_VT_STRING &&
          !strcmp(((const struct gguf_str *)a->arr.elems)[1].data, "bc"), "small: string array");
    CHECK(!gguf_get_arr(f, "llama.attention.head_count_kv", &a) && a->arr.type == GGUF_VT_INT32 &&
          ((const int32_t *)a->arr.elems)[1] == 4, "small: per-layer array");
    CHECK(!gguf_get_arr(f, "nested", &a) && a->arr.n == 3 && a->arr.type == GGUF_VT_ARRAY, "small: nested");
    if (a && a->arr.type == GGUF_VT_ARRAY && a->arr.n == 3) {
        const struct gguf_value *e = a->arr.elems;
        CHECK(e[0].arr.n == 1 && ((const float *)e[0].arr.elems)[0] == 1.5f, "small: nested[0]");
        CHECK(e[1].arr.n == 0 && e[2].arr.n == 2 && ((const float *)e[2].arr.elems)[1] == 3.5f,
              "small: nested[2]");
    }
    const struct gguf_tensor *c = gguf_find_tensor(f, "c");
    CHECK(c && c->offset == gguf_data_offset(f) + 160 && c->nbytes == 288 && c->ne[2] == 2 && c->ne[3] == 1,
          "small: tensor c");
    CHECK(gguf_find_tensor(f, "d") == NULL, "small: absent tensor");
    check_invariants(f, "small");
    gguf_close(f);
    free(b.buf);
    printf("ok   small file: every value type, nested arrays and typed getters\n");

    /* Eight levels of nesting are fine, nine are not (in the hostile table). */
    struct gb n = { 0 };
    nest(&n, 8);
    rc = gguf_parse(n.buf, n.len, n.len, "nest8", &f, &err);
    CHECK(rc == 0, "8 nested arrays: %s", err.msg);
    gguf_close(f);
    free(n.buf);

    /* A u64 above INT64_MAX is a number but not an int64_t. */
    struct gb u = { 0 };
    head(&u, 2, 0, 1);
    str(&u, "big"); u32(&u, GGUF_VT_UINT64); u64(&u, 1ull << 63);
    rc = gguf_parse(u.buf, u.len, u.len, "v2", &f, &err);
    CHECK(rc == 0 && gguf_version(f) == 2, "v2 file: %s", err.msg);
    CHECK(rc || (gguf_get_int(f, "big", &i) == -ERANGE && !gguf_get_float(f, "big", &d) && d == 0x1p63),
          "u64 range");
    gguf_close(f);
    free(u.buf);
}

/* --- 5. gguf_open on files ---------------------------------------------------------- */

static int write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, buf, len);
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

/* A header bigger than the reader's first chunks: 30000 vocabulary strings. */
static void test_open_big_header(const char *dir)
{
    struct gb b = { 0 };
    char path[512], tok[32];
    head(&b, 3, 1, 1);
    str(&b, "tokenizer.ggml.tokens"); u32(&b, GGUF_VT_ARRAY); u32(&b, GGUF_VT_STRING); u64(&b, 30000);
    for (int i = 0; i < 30000; i++) {
        snprintf(tok, sizeof(tok), "token-%05d", i);
        str(&b, tok);
    }
    tinfo(&b, "w", 1, (uint64_t[]){ 8 }, FL_TYPE_F32, 0);
    data(&b, 32, 32);
    snprintf(path, sizeof(path), "%s/big-header.gguf", dir);
    CHECK(!write_file(path, b.buf, b.len), "write %s", path);
    struct gguf_file *f = NULL;
    struct fl_err err = { { 0 } };
    const struct gguf_value *a = NULL;
    int rc = gguf_open(path, &f, &err);
    CHECK(rc == 0, "big header: %s", err.msg);
    CHECK(rc || (!gguf_get_arr(f, "tokenizer.ggml.tokens", &a) && a->arr.n == 30000 &&
                 !strcmp(((const struct gguf_str *)a->arr.elems)[29999].data, "token-29999")),
          "big header: last token");
    CHECK(rc || gguf_header_size(f) > 256 * 1024, "big header is only %" PRIu64, rc ? 0 : gguf_header_size(f));
    gguf_close(f);
    unlink(path);
    free(b.buf);
    printf("ok   gguf_open: %zu-byte header read in growing chunks\n", b.len);
}

/* A tensor 64 GiB into a sparse file: offsets and sizes are 64-bit. */
static void test_open_sparse(const char *dir)
{
    struct gb b = { 0 };
    char path[512];
    const uint64_t far = 1ull << 36;
    head(&b, 3, 2, 0);
    tinfo(&b, "near", 1, (uint64_t[]){ 8 }, FL_TYPE_F32, 0);
    tinfo(&b, "far", 2, (uint64_t[]){ 4096, 1024 }, FL_TYPE_Q8_0, far);
    data(&b, 32, 32);
    snprintf(path, sizeof(path), "%s/sparse.gguf", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    uint64_t data_off = (b.len - 32), size = data_off + far + 4096 / 32 * 34 * 1024;
    bool made = fd >= 0 && write(fd, b.buf, b.len) == (ssize_t)b.len && !ftruncate(fd, (off_t)size);
    if (fd >= 0)
        close(fd);
    if (!made) {
        printf("skip gguf_open sparse 64 GiB file: cannot create it here\n");
        unlink(path);
        free(b.buf);
        return;
    }
    struct gguf_file *f = NULL;
    struct fl_err err = { { 0 } };
    int rc = gguf_open(path, &f, &err);
    CHECK(rc == 0, "sparse: %s", err.msg);
    const struct gguf_tensor *t = rc ? NULL : gguf_find_tensor(f, "far");
    CHECK(t && t->offset == data_off + far && t->offset + t->nbytes == size, "sparse: far tensor placement");
    gguf_close(f);
    /* One byte short: the far tensor no longer fits. */
    CHECK(!truncate(path, (off_t)size - 1), "truncate");
    rc = gguf_open(path, &f, &err);
    check_rejection(rc, &err, path, "sparse short");
    CHECK(strstr(err.msg, "'far'") != NULL, "sparse short: %s", err.msg);
    unlink(path);
    free(b.buf);
    printf("ok   gguf_open: a tensor at 64 GiB in a sparse file, and one byte short of it\n");
}

static void test_open_errors(const char *dir)
{
    struct gguf_file *f = NULL;
    struct fl_err err = { { 0 } };
    char path[512];
    snprintf(path, sizeof(path), "%s/absent.gguf", dir);
    CHECK(gguf_open(path, &f, &err) == -ENOENT && strstr(err.msg, path) && !f, "absent file: %s", err.msg);
    CHECK(gguf_open(dir, &f, &err) == -EISDIR, "directory: %s", err.msg);
    snprintf(path, sizeof(path), "%s/empty.gguf", dir);
    CHECK(!write_file(path, "", 0), "write empty");
    int rc = gguf_open(path, &f, &err);
    check_rejection(rc, &err, path, "empty file");
    unlink(path);
    snprintf(path, sizeof(path), "%s/fifo.gguf", dir);
    if (!mkfifo(path, 0600)) {
        rc = gguf_open(path, &f, &err); /* must not block waiting for a writer */
        CHECK(rc == -EINVAL && strstr(err.msg, "not a regular file"), "fifo: %s", err.msg);
        unlink(path);
    }
    printf("ok   gguf_open: missing file, directory, empty file, FIFO\n");
}

int main(void)
{
    char dir[] = "/tmp/test-gguf-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_models();
    test_all_data_files();
    test_small_values();
    test_header_cap();

    struct gb small = { 0 };
    size_t small_header = build_small(&small);
    test_truncation(small.buf, small_header, small.len, "small file", 1);
    test_bitflips(small.buf, small.len, small_header, 4000, "small file");
    free(small.buf);

    size_t len = 0;
    uint8_t *real = (uint8_t *)check_read_file(data_path("mixtral-tiny-Q4_K_M.gguf"), &len);
    CHECK(real != NULL, "read mixtral-tiny-Q4_K_M.gguf");
    if (real) {
        struct gguf_file *f = NULL;
        struct fl_err err = { { 0 } };
        if (!gguf_parse(real, len, len, "mixtral", &f, &err)) {
            size_t header = (size_t)gguf_header_size(f);
            gguf_close(f);
            test_truncation(real, header, len, "mixtral header", 1);
            test_bitflips(real, len, header, 2000, "mixtral header");
        }
        free(real);
    }
    test_hostile();
    test_open_big_header(dir);
    test_open_sparse(dir);
    test_open_errors(dir);
    rmdir(dir);
    return check_summary("test-gguf");
}

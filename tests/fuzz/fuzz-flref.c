/* fuzz-flref: libFuzzer target for the FLRF (logits) and FLRT (routing)
 * readers and llama-perplexity's base files of log-probabilities
 * (record/kld-base.h), and for the comparisons run on what they accept.
 *
 * The readers take paths, so the bytes go into memfds read back through
 * /proc/self/fd. The first input byte chooses the layout:
 *   bit 1 set:   the rest is a base file: opened, every chunk read, each
 *                row compared with a logits row made of the input's bytes,
 *                and that logits row encoded and compared with itself
 *                (a KL-divergence of about zero);
 *   bit 0 set:   the rest is one file, read as both kinds. Whatever is
 *                accepted is compared with itself (must agree completely),
 *                written out and read back (must be the same bytes).
 *   bit 0 clear: two little-endian bytes give the length of a first file,
 *                the remainder is a second one; both are read and, when
 *                both are accepted, compared with each other, which reaches
 *                the code paths for differing prompts, generations and
 *                routing shapes.
 * A broken contract aborts, which libFuzzer reports as a crash. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "record/flref.h"
#include "record/kld-base.h"

struct memfile {
    int fd;
    char path[64];
};

static struct memfile files[3];
static uint64_t sink;

static void die(const char *what)
{
    fprintf(stderr, "fuzz-flref: %s\n", what);
    abort();
}

static const char *put(int which, const uint8_t *data, size_t size)
{
    struct memfile *m = &files[which];
    if (!m->path[0]) {
        m->fd = memfd_create("fuzz-flref", 0);
        if (m->fd < 0)
            die("memfd_create failed");
        snprintf(m->path, sizeof(m->path), "/proc/self/fd/%d", m->fd);
    }
    if (ftruncate(m->fd, 0) || (size && pwrite(m->fd, data, size, 0) != (ssize_t)size))
        die("cannot write the memfd");
    return m->path;
}

static void check_err(int rc, const struct fl_err *err)
{
    if (rc >= 0)
        return;
    if (!strchr(err->msg, ':') || strchr(err->msg, '\n'))
        die("error without a one-line 'PATH: problem' message");
}

static void check_logits_self(const struct flref_logits *r)
{
    struct flref_cmp c;
    struct fl_err err;
    for (int p = 0; p < r->n_tokens; p++)
        sink += (uint32_t)flref_argmax(r->logits + (int64_t)p * r->n_vocab, r->n_vocab);
    int rc = flref_compare(r, r, 0.1, &c, &err);
    if (rc == 0 && (c.n_pos != r->n_tokens || c.gen_same != r->n_gen || !c.gen_ok ||
                    c.top1_agree != r->n_tokens))
        die("a logits file differs from itself");
    if (rc == 0)
        flref_cmp_free(&c);
    else if (r->n_tokens >= 1)
        die("a logits file cannot be compared with itself");
}

static void roundtrip_logits(const struct flref_logits *r, const uint8_t *data, size_t size)
{
    struct fl_err err;
    const char *path = put(2, NULL, 0);
    if (flref_logits_write(path, r, &err))
        die("cannot write an accepted logits file back");
    uint8_t *back = malloc(size ? size : 1);
    if (!back || pread(files[2].fd, back, size, 0) != (ssize_t)size || memcmp(back, data, size) ||
        lseek(files[2].fd, 0, SEEK_END) != (off_t)size)
        die("logits write(read(file)) is not the file");
    free(back);
}

static void roundtrip_routing(const struct flref_routing *r, const uint8_t *data, size_t size)
{
    struct fl_err err;
    const char *path = put(2, NULL, 0);
    if (flref_routing_write(path, r, &err))
        die("cannot write an accepted routing file back");
    uint8_t *back = malloc(size ? size : 1);
    if (!back || pread(files[2].fd, back, size, 0) != (ssize_t)size || memcmp(back, data, size) ||
        lseek(files[2].fd, 0, SEEK_END) != (off_t)size)
        die("routing write(read(file)) is not the file");
    free(back);
}

static void one_file(const uint8_t *data, size_t size)
{
    struct flref_logits l;
    struct flref_routing r;
    struct fl_err err;
    const char *path = put(0, data, size);
    int rc = flref_logits_read(path, &l, &err);
    check_err(rc, &err);
    if (rc == 0) {
        check_logits_self(&l);
        roundtrip_logits(&l, data, size);
    }
    flref_logits_free(&l);
    rc = flref_routing_read(path, &r, &err);
    check_err(rc, &err);
    if (rc == 0) {
        if (flref_routing_diff(&r, &r, -1, NULL, NULL, &err) != 0)
            die("a routing file differs from itself");
        roundtrip_routing(&r, data, size);
    }
    flref_routing_free(&r);
}

static void count_diff(void *arg, int pos, int layer, const int32_t *a, const int32_t *b, int k)
{
    sink += (uint64_t)pos + (uint64_t)layer + (k > 0 ? (uint32_t)(a[0] ^ b[k - 1]) : 0);
    ++*(int *)arg;
}

static void two_files(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    /* zeroed: the second read is skipped when the first fails */
    struct flref_logits la = { 0 }, lb = { 0 };
    struct flref_routing ra = { 0 }, rb = { 0 };
    struct fl_err err;
    struct flref_cmp c;
    const char *pa = put(0, a, na), *pb = put(1, b, nb);
    if (!flref_logits_read(pa, &la, &err) && !flref_logits_read(pb, &lb, &err)) {
        if (!flref_compare(&la, &lb, 0.1, &c, &err)) {
            if (c.n_pos != la.n_tokens || c.gen_same > c.n_gen || c.top1_agree > c.n_pos)
                die("comparison counts out of range");
            flref_cmp_free(&c);
        }
    }
    flref_logits_free(&la);
    flref_logits_free(&lb);
    if (!flref_routing_read(pa, &ra, &err) && !flref_routing_read(pb, &rb, &err)) {
        int seen = 0;
        int n = flref_routing_diff(&ra, &rb, (int)(na % 7) - 1, count_diff, &seen, &err);
        if (n >= 0 && n != seen)
            die("routing_diff's count differs from its callbacks");
    }
    flref_routing_free(&ra);
    flref_routing_free(&rb);
}

static void kld_rows(const struct fl_kld_base *b, const uint16_t *rows, float *logits,
                     uint16_t *own, int32_t chunk)
{
    const size_t len = fl_kld_row_len(b->n_vocab);
    struct fl_kld_sums s = { 0 };
    float p_diff;
    for (int32_t i = 0; i < fl_kld_rows_per_chunk(b->n_ctx); i++) {
        const int32_t tok = b->tokens[(size_t)chunk * b->n_ctx + b->n_ctx / 2 + i + 1];
        sink += fl_kld_compare_row(logits, b->n_vocab, rows + i * len, tok, &s, &p_diff) > 0;
    }
    if (s.count != fl_kld_rows_per_chunk(b->n_ctx) || s.n_same_top > s.count)
        die("base comparison counts out of range");
    struct fl_kld_sums self = { 0 };
    fl_kld_encode_row(logits, b->n_vocab, own);
    if (fabs(fl_kld_compare_row(logits, b->n_vocab, own, 0, &self, &p_diff)) > 1e-2)
        die("a logits row differs from its own encoding");
}

static void kld_base(const uint8_t *data, size_t size)
{
    struct fl_kld_base b;
    struct fl_err err;
    int rc = fl_kld_base_open(put(0, data, size), &b, &err);
    check_err(rc, &err);
    const size_t len = rc ? 0 : fl_kld_row_len(b.n_vocab);
    uint16_t *rows = rc ? NULL : malloc(sizeof(uint16_t) * len * fl_kld_rows_per_chunk(b.n_ctx));
    uint16_t *own = rc ? NULL : malloc(sizeof(uint16_t) * len);
    float *logits = rc ? NULL : malloc(sizeof(float) * (size_t)b.n_vocab);
    if (!rc && (!rows || !own || !logits))
        die("out of memory for an accepted base's rows");
    for (int32_t v = 0; !rc && v < b.n_vocab; v++) /* finite: the input's bytes */
        logits[v] = (float)(int8_t)data[(size_t)v % size] / 4.0f;
    for (int32_t c = 0; !rc && c < b.n_chunk; c++) {
        rc = fl_kld_base_read_chunk(&b, rows, &err);
        check_err(rc, &err);
        if (!rc)
            kld_rows(&b, rows, logits, own, c);
    }
    if (!rc && fl_kld_base_read_chunk(&b, rows, &err) != -ERANGE)
        die("a chunk read past the last");
    free(rows);
    free(own);
    free(logits);
    fl_kld_base_close(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 2) {
        kld_base(data + 1, size - 1);
        return 0;
    }
    if (data[0] & 1) {
        one_file(data + 1, size - 1);
        return 0;
    }
    if (size < 3)
        return 0;
    size_t split = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3, size -= 3;
    if (split > size)
        split = size;
    two_files(data, split, data + split, size - split);
    return 0;
}

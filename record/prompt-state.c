/* prompt-state.c: FLPS files (prompt-state.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "record/prompt-state.h"

uint64_t flps_fnv(uint64_t h, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint32_t crc_of(uint32_t crc, const void *buf, size_t len)
{
    return (uint32_t)crc32_z(crc, buf, len);
}

/* --- reading ------------------------------------------------------------------ */

/* The header's fields against e and the file's size. */
static int check_header(struct flps_reader *r, const uint8_t *p, uint64_t size,
                        const struct flps_expect *e, struct fl_err *err)
{
    if (memcmp(p, "FLPS", 4))
        return fl_err_set(err, -EINVAL, "%s: not a faultline prompt-state file", r->name);
    if (get32(p + 4) != FLPS_VERSION)
        return fl_err_set(err, -EINVAL, "%s: prompt-state version %u (this faultline reads %d)",
                          r->name, get32(p + 4), FLPS_VERSION);
    if (get64(p + 8) != e->model_sig)
        return fl_err_set(err, -EINVAL, "%s: written for another model file", r->name);
    if (get64(p + 16) != e->settings_sig)
        return fl_err_set(err, -EINVAL, "%s: written under other settings (-b, -ctk/-ctv, the "
                          "CPU's kernels or the GPU decide the cache's bits)", r->name);
    r->n_tokens = get32(p + 24), r->want_crc = get32(p + 28), r->left = get64(p + 32);
    const uint64_t n = r->n_tokens;
    if (n > FLPS_MAX_TOKENS || r->left != e->fixed_bytes + n * e->pos_bytes ||
        size != FLPS_HEADER_BYTES + 4 * n + r->left)
        return fl_err_set(err, -EINVAL, "%s: its sizes do not add up (%llu bytes, %llu tokens): "
                          "cut short or damaged", r->name, (unsigned long long)size,
                          (unsigned long long)n);
    return 0;
}

static int read_tokens(struct flps_reader *r, int64_t n_vocab, struct fl_err *err)
{
    if (!(r->tokens = malloc(sizeof(int32_t) * (r->n_tokens ? r->n_tokens : 1))))
        return fl_err_set(err, -ENOMEM, "out of memory");
    uint8_t b[4];
    for (uint32_t i = 0; i < r->n_tokens; i++) {
        if (fread(b, 1, 4, r->f) != 4)
            return fl_err_set(err, -EIO, "%s: cannot read its tokens", r->name);
        r->crc = crc_of(r->crc, b, 4);
        const int32_t id = (int32_t)get32(b);
        if (id < 0 || id >= n_vocab)
            return fl_err_set(err, -EINVAL, "%s: token %d is not in the vocabulary", r->name, id);
        r->tokens[i] = id;
    }
    return 0;
}

int flps_open(const char *path, const struct flps_expect *e, struct flps_reader *r,
              struct fl_err *err)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", path);
    r->crc = crc_of(0, NULL, 0);
    if (!(r->f = fopen(path, "rb"))) {
        const int e0 = errno;
        return fl_err_set(err, -e0, "%s: %s", path, strerror(e0));
    }
    struct stat st;
    uint8_t head[FLPS_HEADER_BYTES];
    int rc = fstat(fileno(r->f), &st) ? -errno : 0;
    if (rc)
        rc = fl_err_set(err, rc, "%s: %s", path, strerror(-rc));
    else if (!S_ISREG(st.st_mode))
        rc = fl_err_set(err, -EINVAL, "%s: not a regular file", path);
    else if (fread(head, 1, sizeof(head), r->f) != sizeof(head))
        rc = fl_err_set(err, -EINVAL, "%s: not a faultline prompt-state file", path);
    if (!rc)
        rc = check_header(r, head, (uint64_t)st.st_size, e, err);
    if (!rc)
        rc = read_tokens(r, e->n_vocab, err);
    if (rc)
        flps_close(r);
    return rc;
}

int flps_read(void *reader, void *buf, size_t len)
{
    struct flps_reader *r = reader;
    if (len > r->left || fread(buf, 1, len, r->f) != len) {
        r->error = r->error ? r->error : len > r->left ? -EINVAL : -EIO;
        return r->error;
    }
    r->crc = crc_of(r->crc, buf, len);
    r->left -= len;
    return 0;
}

int flps_check(const struct flps_reader *r, struct fl_err *err)
{
    if (r->left || fgetc(r->f) != EOF)
        return fl_err_set(err, -EINVAL, "%s: bytes left after its body", r->name);
    if (r->crc != r->want_crc)
        return fl_err_set(err, -EINVAL, "%s: its checksum differs: the file changed since it "
                          "was written", r->name);
    return 0;
}

void flps_close(struct flps_reader *r)
{
    if (r->f)
        fclose(r->f);
    free(r->tokens);
    r->f = NULL;
    r->tokens = NULL;
}

/* --- writing ------------------------------------------------------------------ */

static void header_bytes(uint8_t *p, const struct flps_writer *w)
{
    memcpy(p, "FLPS", 4);
    put32(p + 4, FLPS_VERSION);
    put64(p + 8, w->model_sig);
    put64(p + 16, w->settings_sig);
    put32(p + 24, w->n_tokens);
    put32(p + 28, w->crc);
    put64(p + 32, w->body);
}

static int put_bytes(struct flps_writer *w, const void *buf, size_t len)
{
    if (!w->error && fwrite(buf, 1, len, w->f) != len)
        w->error = errno ? -errno : -EIO;
    return w->error;
}

int flps_begin(struct flps_writer *w, FILE *f, uint64_t model_sig, uint64_t settings_sig,
               const int32_t *tokens, uint32_t n_tokens)
{
    *w = (struct flps_writer){ .f = f, .crc = crc_of(0, NULL, 0), .model_sig = model_sig,
                               .settings_sig = settings_sig, .n_tokens = n_tokens };
    uint8_t head[FLPS_HEADER_BYTES], b[4];
    header_bytes(head, w);
    put_bytes(w, head, sizeof(head));
    for (uint32_t i = 0; i < n_tokens; i++) {
        put32(b, (uint32_t)tokens[i]);
        w->crc = crc_of(w->crc, b, 4);
        put_bytes(w, b, 4);
    }
    return w->error;
}

int flps_write(void *writer, void *buf, size_t len)
{
    struct flps_writer *w = writer;
    w->crc = crc_of(w->crc, buf, len);
    w->body += len;
    return put_bytes(w, buf, len);
}

int flps_end(struct flps_writer *w)
{
    uint8_t head[FLPS_HEADER_BYTES];
    header_bytes(head, w);
    if (!w->error && fseek(w->f, 0, SEEK_SET))
        w->error = -errno;
    put_bytes(w, head, sizeof(head));
    if (!w->error && fflush(w->f))
        w->error = errno ? -errno : -EIO;
    return w->error;
}

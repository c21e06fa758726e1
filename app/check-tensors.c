/* check-tensors.c: see check-tensors.h. */
#include "app/check-tensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/tensor-types.h"

#define CHECK_PIECE (16u << 20) /* bytes read at a time (whole blocks) */

struct scan {
    const struct gguf_file *g;
    int *fds;          /* per part, opened on first use */
    unsigned char *buf;
};

static int part_fd(struct scan *s, int part, struct fl_err *err)
{
    if (s->fds[part] < 0) {
        const char *path = gguf_part(s->g, part)->path;
        s->fds[part] = open(path, O_RDONLY | O_CLOEXEC);
        if (s->fds[part] < 0)
            return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    }
    return s->fds[part];
}

static int check_one(struct scan *s, const struct gguf_tensor *t, struct fl_err *err)
{
    const struct fl_type_traits *tr = fl_type_traits(t->type);
    uint64_t in_file;
    const int part = gguf_part_at(s->g, t->offset, &in_file);
    const char *path = part >= 0 ? gguf_part(s->g, part)->path : gguf_name(s->g);
    if (!tr || tr->is_layout || part < 0)
        return fl_err_set(err, -EINVAL, "%s: tensor '%s' cannot be checked", path, t->name);
    const int fd = part_fd(s, part, err);
    if (fd < 0)
        return fd;
    const size_t piece = CHECK_PIECE / tr->type_size * tr->type_size;
    for (uint64_t done = 0; done < t->nbytes;) {
        const size_t len = t->nbytes - done < piece ? (size_t)(t->nbytes - done) : piece;
        const ssize_t got = pread(fd, s->buf, len, (off_t)(in_file + done));
        if (got != (ssize_t)len)
            return fl_err_set(err, got < 0 ? -errno : -EIO, "%s: reading tensor '%s': %s", path,
                              t->name, got < 0 ? strerror(errno) : "the file ends early");
        uint64_t at = 0;
        const enum fl_bad_data bad = fl_blocks_check(t->type, s->buf, len / tr->type_size, &at);
        if (bad)
            return fl_err_set(err, -EINVAL, "%s: tensor '%s' has invalid data: %s at %s %llu "
                              "(--check-tensors)", path, t->name, fl_bad_data_name(bad),
                              tr->is_quantized ? "block" : "value",
                              (unsigned long long)(done / tr->type_size + at));
        /* a check of a model larger than RAM must not fill the page cache */
        posix_fadvise(fd, (off_t)(in_file + done), (off_t)len, POSIX_FADV_DONTNEED);
        done += len;
    }
    return 0;
}

int eng_check_tensors(const struct gguf_file *g, uint64_t *bytes, struct fl_err *err)
{
    struct scan s = { .g = g };
    const int n_parts = gguf_n_parts(g);
    s.fds = malloc(sizeof(int) * (size_t)n_parts);
    s.buf = malloc(CHECK_PIECE);
    int rc = s.fds && s.buf ? 0 : fl_err_set(err, -ENOMEM, "out of memory for --check-tensors");
    for (int i = 0; s.fds && i < n_parts; i++)
        s.fds[i] = -1;
    uint64_t n = 0;
    for (int64_t i = 0; !rc && i < gguf_n_tensors(g); i++) {
        rc = check_one(&s, gguf_tensor(g, i), err);
        n += gguf_tensor(g, i)->nbytes;
    }
    for (int i = 0; s.fds && i < n_parts; i++)
        if (s.fds[i] >= 0)
            close(s.fds[i]);
    free(s.fds);
    free(s.buf);
    if (bytes)
        *bytes = rc ? 0 : n;
    return rc;
}

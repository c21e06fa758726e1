/* trace-file.c: see ebpf/trace-file.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ebpf/trace-file.h"

/* zlib's default level (6) for --out FILE.gz. The tracer compresses while
 * the traced run goes on: on the development VM that is ~9 ms of CPU per
 * second of run for a file a quarter smaller than level 1 gives (3 ms);
 * docs/trace.md has the sizes. */
#define TR_GZ_MODE "wb"

bool tr_file_is_gz_name(const char *path)
{
    size_t n = strlen(path);
    return n > 3 && !strcmp(path + n - 3, ".gz");
}

/* stdio's side of the gzip FILE (fopencookie): the stdio buffer hands
 * gzwrite large blocks, so each call compresses one. */
static ssize_t gz_cookie_write(void *cookie, const char *buf, size_t n)
{
    size_t done = 0;
    while (done < n) { /* gzwrite takes an unsigned int */
        unsigned chunk = n - done > (1u << 30) ? 1u << 30 : (unsigned)(n - done);
        int w = gzwrite(cookie, buf + done, chunk);
        if (w <= 0) {
            errno = EIO;
            return 0;  /* fopencookie: 0 is the error */
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

static int gz_cookie_close(void *cookie)
{
    /* writes the last block and the trailer: a full disk shows here */
    if (gzclose_w(cookie) != Z_OK) {
        errno = EIO;
        return EOF;
    }
    return 0;
}

FILE *tr_file_create(const char *path, bool gz_wanted, int *rc)
{
    if (!gz_wanted) {
        FILE *f = fopen(path, "w");
        *rc = f ? 0 : -errno;
        return f;
    }
    errno = 0;
    gzFile gz = gzopen(path, TR_GZ_MODE);
    if (!gz) {
        *rc = errno ? -errno : -ENOMEM;
        return NULL;
    }
    gzbuffer(gz, 1 << 18);
    cookie_io_functions_t io = { .write = gz_cookie_write, .close = gz_cookie_close };
    FILE *f = fopencookie(gz, "w", io);
    if (!f) {
        *rc = -ENOMEM;
        gzclose_w(gz);
        return NULL;
    }
    *rc = 0;
    return f;
}

/* The rest of gz into *buf (capacity *cap, n bytes so far). */
static int read_all(gzFile gz, size_t max, char **buf, size_t *cap, size_t *n)
{
    for (;;) {
        if (*n + 1 >= *cap) {
            size_t want = 2 * *cap;
            char *nb = realloc(*buf, want);
            if (!nb)
                return -ENOMEM;
            *buf = nb;
            *cap = want;
        }
        size_t room = *cap - *n - 1;
        int got = gzread(gz, *buf + *n, room > (1u << 30) ? 1u << 30 : (unsigned)room);
        int zerr;
        gzerror(gz, &zerr);
        if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR))
            return zerr == Z_ERRNO ? -EIO : -EBADMSG;
        *n += (size_t)got;
        if (*n > max)
            return -EFBIG;
        if (got == 0) /* the end; Z_BUF_ERROR: it came inside a gzip stream */
            return zerr == Z_BUF_ERROR ? -EBADMSG : 0;
    }
}

int tr_file_read(const char *path, size_t max, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* A plain file's size is the final one; a gzip file's buffer grows. */
    struct stat st;
    size_t cap = 1 << 16;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size >= cap)
        cap = (size_t)st.st_size + 1 < max + 2 ? (size_t)st.st_size + 2 : max + 2;
    /* zlib reads a file without gzip's magic as it is ("transparent"). */
    gzFile gz = gzdopen(fd, "rb");
    char *b = gz ? malloc(cap) : NULL;
    if (!b) {
        if (gz)
            gzclose_r(gz);
        else
            close(fd);
        return -ENOMEM;
    }
    gzbuffer(gz, 1 << 18);
    size_t n = 0;
    int rc = read_all(gz, max, &b, &cap, &n);
    if (gzclose_r(gz) != Z_OK && rc == 0)
        rc = -EBADMSG;
    if (rc) {
        free(b);
        return rc;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

/* out-file.c: outputs written whole or not at all (out-file.h). */
#include "base/out-file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary names a signal handler removes. A slot's name is written
 * before its flag is set and the flag cleared before the name is reused,
 * so the handler never reads a name being written. */
static char g_pending[FL_OUT_MAX_PENDING][PATH_MAX];
static atomic_int g_used[FL_OUT_MAX_PENDING];
static atomic_uint g_serial;

bool fl_out_is_gguf(const char *path)
{
    char magic[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct stat st;
    bool yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
               read(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) &&
               memcmp(magic, "GGUF", 4) == 0;
    close(fd);
    return yes;
}

/* Refuses a path that is one of the inputs or a model (unless forced). A
 * device or a pipe (/dev/null, /dev/stdout, a FIFO) is marked o->direct:
 * written as it is, since there is nothing to rename over and a file
 * beside it must not appear. */
static int check_target(struct fl_out *o, const char *path, const char *const *inputs,
                        int n_inputs, bool force, struct fl_err *err)
{
    struct stat out;
    if (stat(path, &out) != 0)
        return 0; /* a new file, or a path creating the temporary file will judge */
    if (S_ISDIR(out.st_mode))
        return fl_err_set(err, -EISDIR, "%s: is a folder, not a file to write", path);
    for (int i = 0; i < n_inputs; i++) {
        struct stat in;
        if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == out.st_dev &&
            in.st_ino == out.st_ino)
            return fl_err_set(err, -EEXIST, "%s: is this command's input %s; refusing to overwrite it",
                              path, inputs[i]);
    }
    if (!force && S_ISREG(out.st_mode) && fl_out_is_gguf(path))
        return fl_err_set(err, -EEXIST, "%s: is a GGUF model; refusing to overwrite it (--force to replace it)",
                          path);
    o->direct = !S_ISREG(out.st_mode);
    return 0;
}

/* "DIR/.NAME.PID.N.tmp": hidden, in the final name's folder (rename is
 * atomic only within one file system), unique per process and claim. */
static int make_tmp(struct fl_out *o, struct fl_err *err)
{
    const char *slash = strrchr(o->path, '/');
    const int dir_len = slash ? (int)(slash - o->path) + 1 : 0;
    const char *base = slash ? slash + 1 : o->path;
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned n = atomic_fetch_add(&g_serial, 1);
        int len = snprintf(o->tmp, sizeof(o->tmp), "%.*s.%s.%ld.%u.tmp", dir_len, o->path, base,
                           (long)getpid(), n);
        if (len < 0 || (size_t)len >= sizeof(o->tmp))
            return fl_err_set(err, -ENAMETOOLONG, "%s: name too long", o->path);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (errno != EEXIST) {
            int e = errno;
            o->tmp[0] = '\0';
            return fl_err_set(err, -e, "%s: cannot write there: %s", o->path, strerror(e));
        }
    }
    o->tmp[0] = '\0';
    return fl_err_set(err, -EEXIST, "%s: no free temporary name beside it", o->path);
}

static int take_slot(const char *tmp)
{
    for (int i = 0; i < FL_OUT_MAX_PENDING; i++) {
        int expect = 0;
        /* 2 = being written: the handler skips it until it reads 1 */
        if (atomic_compare_exchange_strong(&g_used[i], &expect, 2)) {
            memcpy(g_pending[i], tmp, strlen(tmp) + 1);
            atomic_store(&g_used[i], 1);
            return i;
        }
    }
    return -1;
}

static void end_claim(struct fl_out *o)
{
    if (o->slot >= 0)
        atomic_store(&g_used[o->slot], 0);
    o->slot = -1;
    o->tmp[0] = '\0';
}

/* Through a symbolic link, the file it names is the one replaced (the
 * temporary file goes beside it and the link stays). */
static void follow_link(struct fl_out *o, const char *path)
{
    struct stat l;
    if (lstat(path, &l) == 0 && S_ISLNK(l.st_mode)) {
        char *real = realpath(path, NULL);
        if (real && strlen(real) < sizeof(o->path))
            memcpy(o->path, real, strlen(real) + 1);
        free(real);
    }
}

int fl_out_begin(struct fl_out *o, const char *path, const char *const *inputs, int n_inputs,
                 bool force, struct fl_err *err)
{
    *o = (struct fl_out)FL_OUT_NONE;
    if (!path || !*path)
        return fl_err_set(err, -EINVAL, "an empty output path");
    if (strlen(path) >= sizeof(o->path))
        return fl_err_set(err, -ENAMETOOLONG, "%s: name too long", path);
    memcpy(o->path, path, strlen(path) + 1);
    int rc = check_target(o, path, inputs, n_inputs, force, err);
    if (!rc && o->direct) {
        memcpy(o->tmp, path, strlen(path) + 1); /* written in place; never renamed or removed */
        return 0;
    }
    if (!rc) {
        follow_link(o, path);
        rc = make_tmp(o, err);
    }
    if (rc)
        return rc;
    if ((o->slot = take_slot(o->tmp)) < 0) {
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return fl_err_set(err, -EMFILE, "%s: too many outputs open at once", path);
    }
    return 0;
}

int fl_out_commit(struct fl_out *o, struct fl_err *err)
{
    if (o->direct) {
        o->tmp[0] = '\0';
        return 0;
    }
    if (!o->tmp[0])
        return 0;
    if (rename(o->tmp, o->path) != 0) {
        int e = errno;
        unlink(o->tmp);
        end_claim(o);
        return fl_err_set(err, -e, "%s: cannot put the finished file in place: %s", o->path,
                          strerror(e));
    }
    end_claim(o);
    return 0;
}

void fl_out_abort(struct fl_out *o)
{
    if (o->direct) {
        o->tmp[0] = '\0';
        return;
    }
    if (!o->tmp[0])
        return;
    unlink(o->tmp);
    end_claim(o);
}

void fl_out_remove_pending(void)
{
    for (int i = 0; i < FL_OUT_MAX_PENDING; i++)
        if (atomic_load(&g_used[i]) == 1)
            unlink(g_pending[i]);
}

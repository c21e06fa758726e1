/* batch-files.c: the output file of `faultline batch` (batch-files.h). */
#include "app/cli/batch-files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int same_file(const struct stat *a, const char *path)
{
    struct stat b;
    return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* One earlier output line: what it says is done. */
static void note_line(struct batch_out *o, const char *line, size_t n)
{
    json_t *v = NULL;
    if (fl_json_load_bytes(line, n, false, "line", &v, NULL) || !json_is_object(v)) {
        o->bad_lines++;
        json_decref(v);
        return;
    }
    const char *id = fl_json_str(v, "custom_id");
    const json_t *ln = json_object_get(v, "line");
    if (id) {
        json_object_set_new(o->done_ids, id, json_true());
        o->n_done++;
    } else if (json_is_integer(ln)) {
        char key[24];
        snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(ln));
        json_object_set_new(o->done_lines, key, json_true());
        o->n_done++;
    } else {
        o->bad_lines++;
    }
    json_decref(v);
}

/* Reads the finished lines; *keep = bytes up to the end of the last whole
 * line. */
static int scan(struct batch_out *o, const char *path, off_t *keep, struct fl_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    *keep = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            break; /* a partial last line: cut */
        *keep += n;
        if (n > 1)
            note_line(o, line, (size_t)n - 1);
    }
    const int bad = ferror(f);
    free(line);
    fclose(f);
    return bad ? fl_err_set(err, -EIO, "%s: cannot read it", path) : 0;
}

int batch_out_open(struct batch_out *o, const char *path, const char *const *inputs, int n_inputs,
                   struct fl_err *err)
{
    memset(o, 0, sizeof(*o));
    o->fd = -1;
    o->done_ids = json_object();
    o->done_lines = json_object();
    if (!o->done_ids || !o->done_lines)
        return fl_err_set(err, -ENOMEM, "out of memory");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    char magic[4] = { 0 };
    int rc = fstat(fd, &st) ? fl_err_set(err, -errno, "%s: %s", path, strerror(errno)) : 0;
    for (int i = 0; !rc && i < n_inputs; i++)
        if (inputs[i] && same_file(&st, inputs[i]))
            rc = fl_err_set(err, -EINVAL, "%s: the output is an input (%s); not touched", path,
                            inputs[i]);
    if (!rc && pread(fd, magic, 4, 0) == 4 && !memcmp(magic, "GGUF", 4))
        rc = fl_err_set(err, -EINVAL, "%s: is a GGUF model; not overwritten", path);
    off_t keep = 0;
    if (!rc)
        rc = scan(o, path, &keep, err);
    if (!rc && keep < st.st_size) {
        o->cut_bytes = (int64_t)(st.st_size - keep);
        if (ftruncate(fd, keep))
            rc = fl_err_set(err, -errno, "%s: cannot cut the partial last line: %s", path,
                            strerror(errno));
    }
    if (!rc && fcntl(fd, F_SETFL, O_APPEND) < 0)
        rc = fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    if (rc) {
        close(fd);
        return rc;
    }
    o->fd = fd;
    return 0;
}

void batch_out_close(struct batch_out *o)
{
    if (o->fd >= 0)
        close(o->fd);
    json_decref(o->done_ids);
    json_decref(o->done_lines);
    memset(o, 0, sizeof(*o));
    o->fd = -1;
}

bool batch_out_is_done(const struct batch_out *o, const char *custom_id, int line_no)
{
    if (custom_id)
        return json_object_get(o->done_ids, custom_id) != NULL;
    char key[24];
    snprintf(key, sizeof(key), "%d", line_no);
    return json_object_get(o->done_lines, key) != NULL;
}

int batch_out_write(struct batch_out *o, json_t *v)
{
    char *s = fl_json_line(v);
    json_decref(v);
    if (!s)
        return -ENOMEM;
    const size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps' NUL becomes the newline: one write */
    size_t off = 0;
    int rc = 0;
    while (off < n + 1 && !rc) {
        ssize_t w = write(o->fd, s + off, n + 1 - off);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EINTR)
            rc = -errno;
    }
    free(s);
    return rc;
}

/* gguf-split.c: a model split into several GGUF files (llama.cpp's
 * gguf-split) joined into one table of tensors (see gguf_open).
 *
 * The rules are llama.cpp's loader's (src/llama-model-loader.cpp): the
 * first file says how many there are ("split.count") and must be the first
 * ("split.no" 0); the others are named after it, PREFIX-%05d-of-%05d.gguf,
 * each says its own index, no tensor name is in two of them, and when the
 * first gives "split.tensors.count" the parts hold exactly that many. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf-impl.h"

#define SPLIT_MAX 65535 /* split.count is a u16 in llama.cpp's files */

/* path's prefix when it ends as part `no` (0-based) of n is named: its
 * length, or 0 when the name does not end so. */
static size_t split_prefix(const char *path, int no, int n)
{
    char tail[32];
    snprintf(tail, sizeof(tail), "-%05d-of-%05d.gguf", no + 1, n);
    const size_t pn = strlen(path), tn = strlen(tail);
    return pn > tn && !strcmp(path + pn - tn, tail) ? pn - tn : 0;
}

/* A split key of f as an integer; -1 when absent. */
static int64_t split_key(const struct gguf_file *f, const char *key)
{
    int64_t v = -1;
    return gguf_get_int(f, key, &v) ? -1 : v;
}

/* Opens part i of n (its name after the prefix) and checks it says so. */
static int open_other(const char *prefix, size_t pn, int i, int n, struct gguf_file **out,
                      struct fl_err *err)
{
    char *path = malloc(pn + 32);
    if (!path)
        return fl_err_set(err, -ENOMEM, "out of memory");
    snprintf(path, pn + 32, "%.*s-%05d-of-%05d.gguf", (int)pn, prefix, i + 1, n);
    int rc = gguf_open_part(path, out, err);
    if (!rc && (split_key(*out, "split.no") != i || split_key(*out, "split.count") != n)) {
        rc = fl_err_set(err, -EINVAL, "%s: not part %d of %d of %.*s (its split.no and "
                        "split.count say %" PRId64 " of %" PRId64 ")", path, i + 1, n, (int)pn,
                        prefix, split_key(*out, "split.no") + 1, split_key(*out, "split.count"));
        gguf_close(*out);
        *out = NULL;
    }
    free(path);
    return rc;
}

/* Appends part i's tensors to f's table, their offsets moved to its base. */
static int append_tensors(struct gguf_file *f, const struct gguf_file *part, uint64_t base)
{
    const int64_t n = f->n_tensors + part->n_tensors;
    struct gguf_tensor *t = realloc(f->tensors, (size_t)(n ? n : 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    f->tensors = t;
    for (int64_t k = 0; k < part->n_tensors; k++) {
        t[f->n_tensors + k] = part->tensors[k];
        t[f->n_tensors + k].offset += base;
    }
    f->n_tensors = n;
    return 0;
}

/* The parts after the first, opened and appended, and the table's checks. */
static int join(struct gguf_file *f, int n, struct fl_err *err)
{
    const size_t pn = split_prefix(f->name, 0, n);
    if (!pn)
        return fl_err_set(err, -EINVAL, "%s: the first of %d split files, but not named as one "
                          "(PREFIX-00001-of-%05d.gguf), so the others cannot be found", f->name, n,
                          n);
    f->parts = calloc((size_t)n, sizeof(*f->parts));
    f->shards = calloc((size_t)n, sizeof(*f->shards));
    if (!f->parts || !f->shards)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", f->name);
    f->n_parts = n;
    f->parts[0] = f->one;
    f->shards[0] = f;
    int rc = 0;
    for (int i = 1; i < n && !rc; i++) {
        const struct gguf_part *prev = &f->parts[i - 1];
        const uint64_t base = (prev->base + prev->size + GGUF_PART_ALIGN - 1) / GGUF_PART_ALIGN *
                              GGUF_PART_ALIGN;
        if ((rc = open_other(f->name, pn, i, n, &f->shards[i], err)))
            break;
        f->parts[i] = (struct gguf_part){ f->shards[i]->name, base, f->shards[i]->file_size };
        if (append_tensors(f, f->shards[i], base))
            rc = fl_err_set(err, -ENOMEM, "%s: out of memory", f->name);
    }
    const char *dup = NULL;
    if (!rc && (rc = gguf_index_tensors(f, &dup)))
        return rc == -EEXIST ? fl_err_set(err, -EINVAL, "%s: tensor '%s' is in two of its %d "
                                          "split files", f->name, dup, n)
                             : fl_err_set(err, rc, "%s: out of memory", f->name);
    const int64_t want = split_key(f, "split.tensors.count");
    if (!rc && want >= 0 && want != f->n_tensors)
        rc = fl_err_set(err, -EINVAL, "%s: its %d split files hold %" PRId64 " tensors, "
                        "split.tensors.count says %" PRId64, f->name, n, f->n_tensors, want);
    if (!rc) {
        const struct gguf_part *last = &f->parts[n - 1];
        f->file_size = last->base + last->size;
    }
    return rc;
}

int gguf_split_join(struct gguf_file *f, struct fl_err *err)
{
    const int64_t n = split_key(f, "split.count"), no = split_key(f, "split.no");
    if (n <= 1)
        return 0;
    if (n > SPLIT_MAX)
        return fl_err_set(err, -EINVAL, "%s: split.count %" PRId64 " is more than %d files",
                          f->name, n, SPLIT_MAX);
    if (no != 0)
        return fl_err_set(err, -EINVAL, "%s: not the first of the %" PRId64 " files of a split "
                          "model (split.no %" PRId64 "): open PREFIX-00001-of-%05" PRId64 ".gguf",
                          f->name, n, no, n);
    return join(f, (int)n, err);
}

/* fuzz-prompt-state: libFuzzer target for the prompt-state (FLPS) reader
 * (record/prompt-state.h), which `faultline run --prompt-cache FILE` runs
 * on whatever FILE holds.
 *
 * The input is the file, read through a memfd against fixed expectations
 * (signatures, a vocabulary of 4096, 24 bytes a position and 8 more). What
 * opens is read to its end in pieces of changing size and checked; what
 * passes the checksum is written again from its tokens and body, which
 * must give the input's bytes exactly. A refusal must be one line naming
 * the file. A broken contract aborts, which libFuzzer reports as a crash. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "record/prompt-state.h"

static const struct flps_expect expect = { .model_sig = 0x0123456789abcdefull,
                                           .settings_sig = 0xfedcba9876543210ull,
                                           .n_vocab = 4096, .pos_bytes = 24, .fixed_bytes = 8 };

static void die(const char *what)
{
    fprintf(stderr, "fuzz-prompt-state: %s\n", what);
    abort();
}

static int memfd(const char *name)
{
    const int fd = memfd_create(name, 0);
    if (fd < 0)
        die("memfd_create failed");
    return fd;
}

/* The accepted file written again: the same bytes. */
static void roundtrip(const struct flps_reader *r, const uint8_t *body, size_t n_body,
                      const uint8_t *data, size_t size)
{
    const int fd = memfd("fuzz-prompt-state-out");
    FILE *f = fdopen(fd, "w+b");
    if (!f)
        die("fdopen failed");
    struct flps_writer w;
    int rc = flps_begin(&w, f, expect.model_sig, expect.settings_sig, r->tokens, r->n_tokens);
    if (!rc && n_body)
        rc = flps_write(&w, (void *)body, n_body);
    if (!rc)
        rc = flps_end(&w);
    if (rc)
        die("writing an accepted file failed");
    uint8_t *back = malloc(size ? size : 1);
    if (!back || fseek(f, 0, SEEK_END) || (size_t)ftell(f) != size ||
        pread(fd, back, size, 0) != (ssize_t)size || memcmp(back, data, size))
        die("an accepted file written again differs");
    free(back);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd("fuzz-prompt-state");
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        die("cannot write the memfd");
    struct flps_reader r;
    struct fl_err err = { "" };
    int rc = flps_open(path, &expect, &r, &err);
    if (rc) {
        if (!strstr(err.msg, path) || strchr(err.msg, '\n'))
            die("a refusal without one line naming the file");
        return 0;
    }
    const size_t n_body = (size_t)r.left;
    uint8_t *body = malloc(n_body ? n_body : 1);
    if (!body)
        die("out of memory");
    size_t at = 0;
    for (size_t piece = 1; !rc && at < n_body; piece = piece % 17 + 1) {
        const size_t len = n_body - at < piece ? n_body - at : piece;
        rc = flps_read(&r, body + at, len);
        at += len;
    }
    if (rc)
        die("a body whose size checked could not be read");
    if (flps_read(&r, body, 1) != -EINVAL)
        die("a read past the body was taken");
    if (!flps_check(&r, &err))
        roundtrip(&r, body, n_body, data, size);
    free(body);
    flps_close(&r);
    return 0;
}

/* prompt-state.h: prompt-state files (FLPS), which keep a prompt's start
 * across runs: `faultline run --prompt-cache FILE` (llama-completion's).
 *
 * A file holds a sequence's first n_tokens positions as the KV cache held
 * them (app/prompt-file.h fills and reads the body), so a later run reads
 * those rows instead of computing them and its logits keep every bit. Such
 * rows are only the same bits for the same model under the same settings:
 * the header carries a signature of each, and the reader compares them
 * before it believes anything else; a crc32 over the tokens and the body
 * catches a file damaged since.
 *
 * Layout, little-endian:
 *   "FLPS", u32 version (1),
 *   u64 model signature, u64 settings signature,
 *   u32 n_tokens, u32 crc32 (zlib's) of the tokens' bytes and then the body,
 *   u64 body bytes,
 *   i32 tokens[n_tokens], then the body.
 * The file's size is exactly FLPS_HEADER_BYTES + 4 n_tokens + body bytes. */
#ifndef FL_PROMPT_STATE_H
#define FL_PROMPT_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

#define FLPS_HEADER_BYTES 40
#define FLPS_VERSION 1
/* More positions than any context holds (-c's largest value). */
#define FLPS_MAX_TOKENS (1 << 24)

/* 64-bit FNV-1a of len bytes, continued from h (start: FLPS_FNV_START);
 * signatures are built from it. */
#define FLPS_FNV_START 0xcbf29ce484222325ull
uint64_t flps_fnv(uint64_t h, const void *buf, size_t len);

/* What a reader requires of a file: both signatures, token ids below
 * n_vocab, and a body of fixed_bytes + pos_bytes per token. */
struct flps_expect {
    uint64_t model_sig, settings_sig;
    int64_t n_vocab;
    uint64_t pos_bytes, fixed_bytes;
};

struct flps_reader {
    FILE *f;
    char name[256];
    int32_t *tokens;
    uint32_t n_tokens;
    uint32_t crc, want_crc;
    uint64_t left; /* body bytes not read yet */
    int error;     /* flps_read's first failure (0: none) */
};

/* Opens path and checks its header and tokens against e: 0; -ENOENT when
 * there is no such file (err says so); -EINVAL with one line naming the
 * file and what is wrong (not FLPS, another version, another model or
 * settings, a size or token out of place); -errno for I/O. */
int flps_open(const char *path, const struct flps_expect *e, struct flps_reader *r,
              struct fl_err *err);
/* The next len body bytes (an eng_kv_io_fn: arg is the reader): 0,
 * -EINVAL past the body, -EIO when the file ends early (kept in error). */
int flps_read(void *reader, void *buf, size_t len);
/* After the whole body: 0, or -EINVAL when bytes are left or the crc32
 * differs (the file changed since it was written). */
int flps_check(const struct flps_reader *r, struct fl_err *err);
void flps_close(struct flps_reader *r);

struct flps_writer {
    FILE *f;
    uint32_t crc;
    uint64_t body;
    uint64_t model_sig, settings_sig;
    uint32_t n_tokens;
    int error; /* the first write's -errno */
};

/* Starts a file on f (open for writing, at its start): a provisional
 * header and the tokens. */
int flps_begin(struct flps_writer *w, FILE *f, uint64_t model_sig, uint64_t settings_sig,
               const int32_t *tokens, uint32_t n_tokens);
/* Body bytes (an eng_kv_io_fn: arg is the writer). */
int flps_write(void *writer, void *buf, size_t len);
/* The header made final (crc, body size) and f flushed: 0 or -errno. The
 * caller closes f. */
int flps_end(struct flps_writer *w);

#endif

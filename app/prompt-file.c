/* prompt-file.c: prompt states in files for a session (prompt-file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/prompt-file.h"
#include "backend/cpu/cpu.h"
#include "gguf/gguf.h"
#include "model/kv-cache.h"

/* Samples of the model's data the signature reads: a fine-tune of the same
 * shape and type has the same header, and differs in nearly every block. */
#define SIG_SAMPLES 16
#define SIG_SAMPLE_BYTES 4096

/* SIG_SAMPLE_BYTES of the model at byte `at` of its parts' space, from the
 * part (file) that holds it (*n: how many; none between parts). 0, or
 * -errno with *path the file that failed. */
static int sample_at(const struct gguf_file *f, uint64_t at, uint8_t *buf, ssize_t *n,
                     const char **path)
{
    *n = 0;
    uint64_t in_file;
    const int i = gguf_part_at(f, at, &in_file);
    if (i < 0)
        return 0;
    *path = gguf_part(f, i)->path;
    const int fd = open(*path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    *n = pread(fd, buf, SIG_SAMPLE_BYTES, (off_t)in_file);
    const int rc = *n < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* The model file (all its parts when split): its size, its header
 * (hyperparameters, vocabulary, tensor table), the start of every later
 * part (its tensor table) and samples spread over its data. */
static int model_sig(const struct eng_session *s, uint64_t *out, struct fl_err *err)
{
    const struct gguf_file *f = eng_session_gguf(s);
    const uint64_t size = gguf_file_size(f), head = gguf_header_size(f);
    const uint64_t data = gguf_data_offset(f);
    const char *path = gguf_name(f);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    uint8_t *buf = malloc(head > SIG_SAMPLE_BYTES ? head : SIG_SAMPLE_BYTES);
    uint64_t h = flps_fnv(FLPS_FNV_START, &size, sizeof(size));
    int rc = buf ? 0 : -ENOMEM;
    if (!rc && pread(fd, buf, head, 0) != (ssize_t)head)
        rc = -EIO;
    close(fd);
    if (!rc)
        h = flps_fnv(h, buf, head);
    const int parts = gguf_n_parts(f);
    for (int i = 1 - parts; !rc && i < SIG_SAMPLES && size > data; i++) {
        ssize_t n; /* i < 0: a later part's start; then the data's samples */
        const uint64_t at = i < 0 ? gguf_part(f, parts + i)->base
                                  : data + (size - data) / SIG_SAMPLES * (uint64_t)i;
        rc = sample_at(f, at, buf, &n, &path);
        if (!rc)
            h = flps_fnv(h, buf, (size_t)n);
    }
    free(buf);
    *out = h;
    return rc ? fl_err_set(err, rc, "%s: cannot read it: %s", path, strerror(-rc)) : 0;
}

/* What decides the cache's bits beside the model: the rows' types and
 * rotations, the chunks prompts are cut into (-b), the CPU's kernels. */
static uint64_t settings_sig(const struct eng_session *s)
{
    const struct eng_kv *kv = eng_session_kv(s);
    const int64_t v[] = { eng_session_n_batch(s), eng_kv_type_k(kv), eng_kv_type_v(kv),
                          eng_kv_rot_k(kv), eng_kv_rot_v(kv),
                          (int64_t)eng_kv_seq_bytes(kv, 0), (int64_t)eng_kv_seq_bytes(kv, 1) };
    const char *cpu = fl_cpu_features();
    uint64_t h = flps_fnv(FLPS_FNV_START, "faultline prompt state", 22);
    h = flps_fnv(h, v, sizeof(v));
    int n;
    const char *const *kvo = eng_session_kv_overrides(s, &n);
    for (int i = 0; i < n; i++) /* metadata the file does not say (its hyperparameters) */
        h = flps_fnv(h, kvo[i], strlen(kvo[i]) + 1);
    char rope[256]; /* --rope-* / --yarn-*: the keys' rotation; nothing when unset */
    yarn_context_describe(&eng_session_model(s)->rope_ctx, rope, sizeof(rope));
    h = flps_fnv(h, rope, strlen(rope));
    return flps_fnv(h, cpu, strlen(cpu));
}

static int expect(const struct eng_session *s, struct flps_expect *e, struct fl_err *err)
{
    if (eng_session_gpu(s))
        return fl_err_set(err, -ENOTSUP, "with a GPU the KV cache is in VRAM: prompt states "
                          "are kept for the CPU's cache only");
    const struct eng_kv *kv = eng_session_kv(s);
    *e = (struct flps_expect){ .settings_sig = settings_sig(s),
                               .n_vocab = eng_session_model(s)->hp.n_vocab,
                               .fixed_bytes = eng_kv_seq_bytes(kv, 0) };
    e->pos_bytes = eng_kv_seq_bytes(kv, 1) - e->fixed_bytes;
    return model_sig(s, &e->model_sig, err);
}

int eng_prompt_file_open(struct eng_session *s, const char *path, struct flps_reader *r,
                         struct fl_err *err)
{
    struct flps_expect e;
    memset(r, 0, sizeof(*r));
    int rc = expect(s, &e, err);
    return rc ? rc : flps_open(path, &e, r, err);
}

int eng_prompt_file_load(struct eng_session *s, struct flps_reader *r, int seq, int n_keep,
                         struct fl_err *err)
{
    int rc = eng_session_seq_load(s, seq, (int)r->n_tokens, n_keep, flps_read, r, err);
    if (rc && r->error) /* the file changed since it was opened */
        return fl_err_set(err, -EINVAL, "%s: cannot read its body: %s", r->name,
                          strerror(-r->error));
    if (!rc && (rc = flps_check(r, err))) {
        if (seq == 0)
            eng_session_reset(s);
        else
            eng_session_seq_free(s, seq);
    }
    return rc;
}

int eng_prompt_file_save(const struct eng_session *s, int seq, const int32_t *tokens, int n,
                         struct fl_out *out, struct fl_err *err)
{
    struct flps_expect e;
    int rc = expect(s, &e, err);
    FILE *f = rc ? NULL : fopen(out->tmp, "wb");
    if (!rc && !f)
        rc = fl_err_set(err, -errno, "%s: %s", out->tmp, strerror(errno));
    struct flps_writer w;
    if (!rc && !(rc = flps_begin(&w, f, e.model_sig, e.settings_sig, tokens, (uint32_t)n)) &&
        !(rc = eng_kv_seq_save(eng_session_kv(s), seq, n, flps_write, &w)))
        rc = flps_end(&w);
    if (f && fclose(f) && !rc)
        rc = -errno;
    if (rc && !err->msg[0])
        fl_err_set(err, rc, "%s: cannot write it: %s", out->path, strerror(-rc));
    if (rc) {
        fl_out_abort(out);
        return rc;
    }
    return fl_out_commit(out, err);
}

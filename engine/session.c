/* session.c: model + KV cache + tokenizer + threads, glued for the CLI. */
#include "engine/session.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/cpu/threadpool.h"
#include "engine/gguf.h"
#include "engine/ops.h"
#include "engine/tensor-types.h"
#include "engine/tokenizer.h"

struct eng_session {
    struct gguf_file *gguf;
    const uint8_t *base;
    size_t map_len;
    struct eng_model *model;
    struct eng_kv *kv;
    struct fl_tokenizer *tok;
    struct fl_pool *pool;
    struct eng_arena *arena;
    struct eng_ctx ctx;
    int n_batch, n_past;
};

/* The weights region: a read-only private mapping of the whole file, so
 * offset in memory = offset in file. TEMPORARY: the pager replaces this with
 * its region (userfaultfd + io_uring); nothing else here maps or reads the
 * model file. */
static int session_map_file_TEMPORARY(const char *path, size_t size, const uint8_t **base,
                                      struct fl_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fl_err_set(err, -errno, "%s: %s", path, strerror(errno));
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return fl_err_set(err, -e, "%s: mmap: %s", path, strerror(e));
    *base = p;
    return 0;
}

/* Physical cores this process may run on: distinct (package, core) pairs of
 * the CPUs in its affinity mask; all of them when topology is unreadable. */
static int physical_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    int n_cpu = CPU_COUNT(&set), n_core = 0;
    long seen[CPU_SETSIZE];
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        char path[128];
        long pkg = 0, core = -1;
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (!f || fscanf(f, "%ld", &core) != 1)
            core = -1;
        if (f)
            fclose(f);
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%ld", &pkg) != 1)
                pkg = 0;
            fclose(f);
        }
        if (core < 0)
            return n_cpu > 0 ? n_cpu : 1;
        long id = pkg * 1000000 + core;
        int dup = 0;
        for (int i = 0; i < n_core && !dup; i++)
            dup = seen[i] == id;
        if (!dup)
            seen[n_core++] = id;
    }
    return n_core > 0 ? n_core : 1;
}

static int open_parts(struct eng_session *s, const struct eng_session_params *p,
                      struct fl_err *err)
{
    int rc = gguf_open(p->model_path, &s->gguf, err);
    if (rc)
        return rc;
    s->map_len = gguf_file_size(s->gguf);
    if ((rc = session_map_file_TEMPORARY(p->model_path, s->map_len, &s->base, err)))
        return rc;
    if ((rc = eng_model_load(s->gguf, s->base, &s->model, err)))
        return rc;
    if ((rc = fl_tokenizer_load(s->gguf, &s->tok, err)))
        return rc == -ENOENT ? fl_err_set(err, -EINVAL, "%s: the file has no tokenizer", p->model_path)
                             : rc;
    int n_ctx = p->n_ctx > 0 ? p->n_ctx : 4096;
    if (p->n_ctx <= 0 && s->model->hp.n_ctx_train < n_ctx)
        n_ctx = (int)s->model->hp.n_ctx_train;
    if ((rc = eng_kv_create(s->model, n_ctx, &s->kv, err)))
        return rc;
    int nt = p->n_threads > 0 ? p->n_threads : physical_cores();
    if (!(s->pool = fl_pool_create(nt)))
        return fl_err_set(err, -errno, "cannot start %d threads: %s", nt, strerror(errno));
    if (eng_arena_create(&s->arena))
        return fl_err_set(err, -ENOMEM, "out of memory");
    s->ctx = (struct eng_ctx){ .m = s->model, .pool = s->pool, .n_threads = nt, .kv = s->kv,
                               .arena = s->arena };
    return 0;
}

int eng_session_open(const struct eng_session_params *p, struct eng_session **out,
                     struct fl_err *err)
{
    if (!p->model_path)
        return fl_err_set(err, -EINVAL, "no model file given (-m FILE)");
    if (p->n_ctx < 0 || p->n_batch < 0 || p->n_threads < 0 || p->n_threads > 1024)
        return fl_err_set(err, -EINVAL, "bad context/batch/thread count");
    fl_types_init();
    struct eng_session *s = calloc(1, sizeof(*s));
    if (!s)
        return fl_err_set(err, -ENOMEM, "out of memory");
    s->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    int rc = open_parts(s, p, err);
    if (rc) {
        eng_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void eng_session_close(struct eng_session *s)
{
    if (!s)
        return;
    fl_pool_destroy(s->pool);
    eng_arena_destroy(s->arena);
    eng_kv_destroy(s->kv);
    fl_tokenizer_free(s->tok);
    eng_model_free(s->model);
    if (s->base)
        munmap((void *)s->base, s->map_len);
    gguf_close(s->gguf);
    free(s);
}

const struct eng_model *eng_session_model(const struct eng_session *s) { return s->model; }
const struct fl_tokenizer *eng_session_tokenizer(const struct eng_session *s) { return s->tok; }
const struct gguf_file *eng_session_gguf(const struct eng_session *s) { return s->gguf; }
int eng_session_n_ctx(const struct eng_session *s) { return eng_kv_n_ctx(s->kv); }
int eng_session_n_past(const struct eng_session *s) { return s->n_past; }
int eng_session_n_threads(const struct eng_session *s) { return s->ctx.n_threads; }
uint64_t eng_session_file_size(const struct eng_session *s) { return gguf_file_size(s->gguf); }
void eng_session_reset(struct eng_session *s) { s->n_past = 0; }

int64_t eng_session_n_params(const struct eng_session *s)
{
    int64_t n = 0;
    for (int64_t i = 0; i < s->model->n_tensors; i++) {
        const struct eng_tensor *t = &s->model->tensors[i];
        n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return n;
}

void eng_session_set_experts(struct eng_session *s, const struct eng_expert_source *src)
{
    s->ctx.experts = src;
}

void eng_session_set_routing(struct eng_session *s, const struct eng_routing_sink *sink)
{
    s->ctx.routing = sink;
}

int eng_session_eval(struct eng_session *s, const int32_t *tokens, int n, bool all_logits,
                     float *logits, struct fl_err *err)
{
    if (n < 1)
        return fl_err_set(err, -EINVAL, "nothing to evaluate");
    if (n > eng_kv_n_ctx(s->kv) - s->n_past)
        return fl_err_set(err, -ENOSPC, "%d tokens at position %d do not fit the context of %d",
                          n, s->n_past, eng_kv_n_ctx(s->kv));
    const int64_t n_vocab = s->model->hp.n_vocab;
    for (int done = 0; done < n;) {
        const int chunk = n - done < s->n_batch ? n - done : s->n_batch;
        float *rows = all_logits ? logits + (int64_t)done * n_vocab : logits;
        struct eng_batch b = { .tokens = tokens + done, .n_tok = chunk, .pos0 = s->n_past + done,
                               .all_logits = all_logits, .logits = rows };
        /* without all_logits each chunk overwrites the one row: the last wins */
        int rc = eng_forward(&s->ctx, &b, err);
        if (rc)
            return rc;
        done += chunk;
    }
    s->n_past += n;
    return 0;
}

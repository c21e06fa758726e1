/* sched-slots.c: llama-server's slot files on the scheduler's prompt
 * cache (scheduler.h's eng_sched_slot_*): a slot's newest held prefix
 * written with app/prompt-file.h, a file read back into a held entry of
 * the slot's, or the slot's entries dropped. On the scheduler's thread,
 * between steps, as every other use of the cache. */
#include <errno.h>
#include <sys/stat.h>

#include "app/prompt-cache.h"
#include "app/prompt-file.h"
#include "app/sched-impl.h"

static int check_slot(const struct eng_sched *q, int slot, struct fl_err *err)
{
    if (slot < 0 || slot >= q->n_seq)
        return fl_err_set(err, -EINVAL, "slot %d: this server has slots 0 to %d (-np)", slot,
                          q->n_seq - 1);
    return 0;
}

static uint64_t size_of(const char *path)
{
    struct stat st;
    return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

int eng_sched_slot_save(struct eng_sched *q, int slot, struct fl_out *out, int *n,
                        uint64_t *bytes, struct fl_err *err)
{
    int seq = -1, rc = check_slot(q, slot, err);
    const int32_t *tokens = NULL;
    *n = 0, *bytes = 0;
    if (!rc && !(*n = eng_pcache_of(q->pc, slot, &seq, &tokens)))
        rc = fl_err_set(err, -EINVAL, "slot %d holds no prompt cache: a request it ran keeps "
                        "its prompt's whole -b chunks", slot);
    if (!rc)
        rc = eng_prompt_file_save(q->s, seq, tokens, *n, out, err);
    if (rc) {
        fl_out_abort(out);
        return rc;
    }
    *bytes = size_of(out->path);
    return 0;
}

struct fill {
    struct eng_session *s;
    struct flps_reader *r;
};

static int fill_from_file(void *arg, int seq, struct fl_err *err)
{
    struct fill *f = arg;
    return eng_prompt_file_load(f->s, f->r, seq, (int)f->r->n_tokens, err);
}

int eng_sched_slot_restore(struct eng_sched *q, int slot, const char *path, int *n,
                           uint64_t *bytes, struct fl_err *err)
{
    struct flps_reader r = { 0 };
    struct fill f = { q->s, &r };
    *n = 0, *bytes = 0;
    int rc = check_slot(q, slot, err);
    if (!rc)
        rc = eng_prompt_file_open(q->s, path, &r, err);
    if (!rc)
        rc = eng_pcache_put(q->pc, slot, r.tokens, (int)r.n_tokens, fill_from_file, &f, err);
    if (!rc)
        *n = (int)r.n_tokens, *bytes = size_of(path);
    flps_close(&r);
    return rc;
}

int eng_sched_slot_erase(struct eng_sched *q, int slot, int *n, struct fl_err *err)
{
    int rc = check_slot(q, slot, err);
    *n = rc ? 0 : eng_pcache_forget(q->pc, slot);
    return rc;
}

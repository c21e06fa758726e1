/* run-cache.c: `faultline run --prompt-cache FILE`, llama-completion's
 * prompt cache: the rows of a prompt's start kept in a file, so a later run
 * whose prompt starts the same reads them instead of computing them (a long
 * document or system prompt asked several questions, each run a new
 * process). app/prompt-file.h says which rows (whole units of
 * lcm(-b, 16) positions from the start, a recurrent model's all or none)
 * and why the logits stay the same bits; this is the command's part. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "app/cli/run.h"
#include "app/prompt-cache.h"
#include "app/prompt-file.h"
#include "base/out-file.h"

/* What the file gives this prompt: how many leading positions it holds
 * that the prompt may read (0: none or no file), read into sequence 0. */
static int read_file(struct run_gen *g, struct eng_pcache *pc, const int32_t *ids, int n,
                     int *n_file, struct fl_err *err)
{
    const struct run_opts *o = g->o;
    struct flps_reader r;
    int rc = eng_prompt_file_open(g->s, o->prompt_cache, &r, err);
    *n_file = 0;
    if (rc == -ENOENT)
        return 0;
    if (rc)
        return rc;
    *n_file = (int)r.n_tokens;
    const int use = eng_pcache_usable(pc, r.tokens, (int)r.n_tokens, ids, n);
    if (use > 0)
        rc = eng_prompt_file_load(g->s, &r, 0, use, err);
    flps_close(&r);
    if (!rc && n > 0 && !o->compat.log_disable)
        fprintf(stderr, "faultline run: prompt cache %s: %d of the prompt's %d tokens read "
                "(the file holds %d)\n", o->prompt_cache, use, n, *n_file);
    return rc ? rc : use;
}

/* The file holds the prompt's first n positions from now on. */
static int write_file(struct run_gen *g, const int32_t *ids, int n, struct fl_out *out,
                      struct fl_err *err)
{
    int rc = eng_prompt_file_save(g->s, 0, ids, n, out, err);
    if (!rc && !g->o->compat.log_disable)
        fprintf(stderr, "faultline run: prompt cache %s: the prompt's first %d tokens kept\n",
                g->o->prompt_cache, n);
    return rc;
}

/* Feeds ids[from, to) (nothing when empty), adding to the prompt's time
 * and count. */
static int feed_part(struct run_gen *g, const int32_t *ids, int from, int to, double *t,
                     int *count, struct fl_err *err)
{
    if (to <= from)
        return 0;
    int rc = run_gen_feed(g, ids + from, to - from, err);
    *t += g->t_prompt;
    *count = g->n_prompt < 0 || *count < 0 ? -1 : *count + g->n_prompt;
    return rc;
}

int run_cache_read(struct run_gen *g, struct run_cache *c, const int32_t *ids, int n,
                   struct fl_err *err)
{
    const int rc = read_file(g, c->pc, ids, n, &c->n_file, err);
    c->have = rc > 0 ? rc : 0;
    return rc < 0 ? rc : 0;
}

int run_cache_begin(struct run_gen *g, struct run_cache *c, const int32_t *ids, int n,
                    struct fl_err *err)
{
    const struct run_opts *o = g->o;
    const char *inputs[] = { o->sp.model_path };
    *c = (struct run_cache){ .out = FL_OUT_NONE };
    /* the file is claimed before any work: a path that cannot be written,
     * or the model itself, fails now */
    int rc = o->prompt_cache_ro ? 0 : fl_out_begin(&c->out, o->prompt_cache, inputs, 1, false, err);
    if (!rc)
        rc = eng_pcache_create(g->s, &c->pc, err);
    return rc ? rc : run_cache_read(g, c, ids, n, err);
}

int run_cache_feed(struct run_gen *g, struct run_cache *c, const int32_t *ids, int n,
                   struct fl_err *err)
{
    /* the positions a later prompt may read: whole units of this one's */
    const int keep = eng_pcache_reusable(c->pc, n);
    double t = 0;
    int count = 0;
    int rc = run_gen_skip(g, ids, c->have, err);
    if (!rc)
        rc = feed_part(g, ids, c->have, keep, &t, &count, err);
    /* nothing new to say when the file holds exactly these positions */
    const bool same = c->have == keep && c->n_file == keep;
    if (!rc && !g->o->prompt_cache_ro && keep > 0 && !same)
        rc = write_file(g, ids, keep, &c->out, err);
    if (!rc) /* have <= keep (both whole units, have of n - 1 at most) */
        rc = feed_part(g, ids, keep, n, &t, &count, err);
    g->t_prompt = t, g->n_prompt = count;
    return rc;
}

void run_cache_end(struct run_cache *c)
{
    fl_out_abort(&c->out); /* not written (or committed already: then a no-op) */
    eng_pcache_free(c->pc);
    c->pc = NULL;
}

/* test-prompt-file: prompt states kept in files (app/prompt-file.h, run's
 * --prompt-cache), on every tests/data model.
 *   - A prompt's first whole units written by one session and read by
 *     another: the rest of the prompt and greedy decodes after it give the
 *     logits a fresh session gives, bit for bit; a second prompt sharing
 *     only a start reads the whole units of the common start (a recurrent
 *     model: nothing, its state is that of the whole file) and still gives
 *     a fresh session's bits.
 *   - Refusals, each leaving the sequence empty: no file (-ENOENT), a body
 *     byte changed (checksum), a file cut short, another model file,
 *     another -b, something that is not a prompt state (-EINVAL). */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/prompt-cache.h"
#include "app/prompt-file.h"
#include "tests/check.h"

#define N_PROMPT 100
#define N_BATCH 16
#define N_DECODE 4

static char file[64];

static int open_session(const char *model, int n_batch, struct eng_session **s,
                        struct fl_err *err)
{
    struct eng_session_params p;
    eng_session_params_init(&p);
    p.model_path = model;
    p.n_ctx = 256;
    p.n_batch = n_batch;
    p.n_threads = 2;
    return eng_session_open(&p, s, err);
}

/* Logits of the prompt's positions from `from` on and of N_DECODE greedy
 * decodes after it, from session s holding ids[0, from) already. */
static float *rows_after(struct eng_session *s, const int32_t *ids, int n, int from,
                         struct fl_err *err)
{
    const size_t V = (size_t)eng_session_model(s)->hp.n_vocab;
    float *rows = malloc(sizeof(float) * V * (size_t)(n - from + N_DECODE));
    if (!rows || eng_session_eval(s, ids + from, n - from, true, rows, err)) {
        free(rows);
        return NULL;
    }
    for (int d = 0; d < N_DECODE; d++) {
        const float *last = rows + V * (size_t)(n - from - 1 + d);
        int32_t best = 0;
        for (size_t v = 1; v < V; v++)
            best = last[v] > last[best] ? (int32_t)v : best;
        if (eng_session_eval(s, &best, 1, false, rows + V * (size_t)(n - from + d), err)) {
            free(rows);
            return NULL;
        }
    }
    return rows;
}

static bool same_rows(struct eng_session *s, const float *a, const float *b, int n_rows)
{
    const size_t V = (size_t)eng_session_model(s)->hp.n_vocab;
    return a && b && !memcmp(a, b, sizeof(float) * V * (size_t)n_rows);
}

/* A session that ran ids[0, keep) writes them to `file`. */
static void write_state(const char *model, const int32_t *ids, int keep)
{
    struct eng_session *s = NULL;
    struct fl_err err = { "" };
    float *row = NULL;
    struct fl_out out = FL_OUT_NONE;
    int rc = open_session(model, N_BATCH, &s, &err);
    if (!rc && !(row = malloc(sizeof(float) * (size_t)eng_session_model(s)->hp.n_vocab)))
        rc = -ENOMEM;
    if (!rc)
        rc = eng_session_eval(s, ids, keep, false, row, &err);
    if (!rc)
        rc = fl_out_begin(&out, file, NULL, 0, false, &err);
    if (!rc)
        rc = eng_prompt_file_save(s, 0, ids, keep, &out, &err);
    CHECK(!rc, "%s: writing %d positions: %s", model, keep, err.msg);
    free(row);
    eng_session_close(s);
}

/* A fresh session's rows for prompt ids, and a session's that read the
 * file first: equal bits; *used: positions read. */
static void read_and_compare(const char *model, const int32_t *ids, int n, int want_used)
{
    struct eng_session *fresh = NULL, *s = NULL;
    struct eng_pcache *pc = NULL;
    struct fl_err err = { "" };
    struct flps_reader r = { 0 };
    int used = -1;
    float *want = NULL, *got = NULL;
    int rc = open_session(model, N_BATCH, &fresh, &err);
    if (!rc && !(want = rows_after(fresh, ids, n, 0, &err)))
        rc = -1;
    if (!rc)
        rc = open_session(model, N_BATCH, &s, &err);
    if (!rc)
        rc = eng_pcache_create(s, &pc, &err);
    if (!rc)
        rc = eng_prompt_file_open(s, file, &r, &err);
    if (!rc) {
        used = eng_pcache_usable(pc, r.tokens, (int)r.n_tokens, ids, n);
        rc = used ? eng_prompt_file_load(s, &r, 0, used, &err) : 0;
    }
    CHECK(!rc && used == want_used && eng_session_n_past(s) == used,
          "%s: %d positions read (want %d), n_past %d: %s", model, used, want_used,
          s ? eng_session_n_past(s) : -1, err.msg);
    if (!rc && !(got = rows_after(s, ids, n, used, &err)))
        CHECK(0, "%s: evaluating after the file: %s", model, err.msg);
    const size_t V = fresh ? (size_t)eng_session_model(fresh)->hp.n_vocab : 0;
    CHECK(got && want && same_rows(s, want + V * (size_t)used, got, n - used + N_DECODE),
          "%s: the rows after %d positions read differ from a fresh session's", model, used);
    flps_close(&r);
    free(want);
    free(got);
    eng_pcache_free(pc);
    eng_session_close(s);
    eng_session_close(fresh);
}

/* Opening (and, when it opens, reading) `file` in a session of model
 * with n_batch: want_rc, and the sequence empty. */
static void refused(const char *what, const char *model, int n_batch, int want_rc)
{
    struct eng_session *s = NULL;
    struct fl_err err = { "" };
    struct flps_reader r = { 0 };
    int rc = open_session(model, n_batch, &s, &err);
    CHECK(!rc, "%s: session: %s", model, err.msg);
    if (rc)
        return;
    rc = eng_prompt_file_open(s, file, &r, &err);
    if (!rc)
        rc = eng_prompt_file_load(s, &r, 0, (int)r.n_tokens, &err);
    CHECK(rc == want_rc && eng_session_n_past(s) == 0 && err.msg[0],
          "%s: %s: rc %d (want %d), n_past %d, '%s'", model, what, rc, want_rc,
          eng_session_n_past(s), err.msg);
    if (rc == want_rc)
        printf("  %s: %s\n", what, err.msg);
    flps_close(&r);
    eng_session_close(s);
}

static void change_byte(off_t at_from_end)
{
    const int fd = open(file, O_RDWR);
    const off_t end = lseek(fd, 0, SEEK_END);
    unsigned char b = 0;
    CHECK(fd >= 0 && pread(fd, &b, 1, end - at_from_end) == 1, "reading %s", file);
    b ^= 0x40;
    CHECK(pwrite(fd, &b, 1, end - at_from_end) == 1, "writing %s", file);
    close(fd);
}

static void one_model(const char *model, const char *other)
{
    int32_t ids[N_PROMPT], ids2[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) /* ordinary ids, past the special ones */
        ids[i] = ids2[i] = 300 + (int32_t)((i * 7919u + 13) % 600u);
    for (int i = 40; i < N_PROMPT; i++)
        ids2[i] = 300 + (int32_t)((i * 104729u + 5) % 600u);
    const int keep = N_PROMPT / N_BATCH * N_BATCH; /* whole units: lcm(16, 16) */
    unlink(file);
    refused("no file", model, N_BATCH, -ENOENT);
    write_state(model, ids, keep);
    read_and_compare(model, ids, N_PROMPT, keep);
    struct eng_session *s = NULL;
    struct fl_err err = { "" };
    bool recurrent = !open_session(model, N_BATCH, &s, &err) && eng_session_recurrent(s);
    eng_session_close(s);
    /* the common start is 40 tokens: 32 in whole units, none of a state */
    read_and_compare(model, ids2, N_PROMPT, recurrent ? 0 : 32);
    refused("another -b", model, 2 * N_BATCH, -EINVAL);
    refused("another model file", other, N_BATCH, -EINVAL);
    change_byte(1);
    refused("a body byte changed", model, N_BATCH, -EINVAL);
    CHECK(truncate(file, 100) == 0, "truncating %s", file);
    refused("cut short", model, N_BATCH, -EINVAL);
    CHECK(truncate(file, 0) == 0, "truncating %s", file);
    refused("an empty file", model, N_BATCH, -EINVAL);
    printf("%s: rows read from a file equal a fresh session's; refusals hold\n", model);
}

int main(void)
{
    snprintf(file, sizeof(file), "/tmp/test-prompt-file.%d", (int)getpid());
    glob_t g;
    if (glob("tests/data/*.gguf", 0, NULL, &g) || g.gl_pathc < 2) {
        printf("no models in tests/data: skipped\n");
        return 77;
    }
    for (size_t i = 0; i < g.gl_pathc; i++)
        one_model(g.gl_pathv[i], g.gl_pathv[(i + 1) % g.gl_pathc]);
    globfree(&g);
    unlink(file);
    return check_summary("test-prompt-file");
}

/* test-sampler-llama.c: DRY, top-n-sigma, XTC, dynamic temperature and
 * mirostat against llama.cpp's own samplers (tests/data/sampler/README.md).
 *
 * Each case of tests/data/sampler/llama-samplers.txt is one llama.cpp
 * sampler applied once to a row of logits after a history of accepted
 * tokens; the file says which candidates it removed and the logits it
 * changed. The same sampler here, as a chain of that one step, must keep
 * exactly the candidates llama.cpp kept with the same logits bit for bit
 * (DRY's penalties, top-n-sigma's and XTC's cuts, the dynamic temperature's
 * division) and, for mirostat, the same number of candidates after its
 * first truncation. DRY's breakers are spelled by the vocabulary of
 * tests/data/qwen3moe-tiny-F16.gguf, as llama.cpp's were. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gguf/gguf.h"
#include "text/dry.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "tests/check.h"

#define MAX_N 2048

struct ref_case {
    char name[32], params[160];
    int32_t hist[600], n_hist;
    float logits[MAX_N], want[MAX_N]; /* want: -inf where removed */
    int32_t n;
};

static int read_ints(FILE *f, const char *tag, int32_t *v, int32_t max)
{
    char t[16];
    int32_t n;
    if (fscanf(f, "%15s %d", t, &n) != 2 || strcmp(t, tag) || n < 0 || n > max)
        return -1;
    for (int32_t i = 0; i < n; i++)
        if (fscanf(f, "%d", &v[i]) != 1)
            return -1;
    return n;
}

/* One case; 0 at the end of the file, -1 on a malformed one. */
static int read_case(FILE *f, struct ref_case *c)
{
    char line[256];
    if (!fgets(line, sizeof(line), f))
        return 0;
    if (sscanf(line, "case %31s %159[^\n]", c->name, c->params) != 2)
        return -1;
    if ((c->n_hist = read_ints(f, "hist", c->hist, 600)) < 0)
        return -1;
    char t[16];
    if (fscanf(f, "%15s %d", t, &c->n) != 2 || strcmp(t, "logits") || c->n < 1 || c->n > MAX_N)
        return -1;
    for (int32_t i = 0; i < c->n; i++) {
        char v[48];
        if (fscanf(f, "%47s", v) != 1)
            return -1;
        c->logits[i] = c->want[i] = strtof(v, NULL);
    }
    static int32_t ids[MAX_N];
    int32_t nr = read_ints(f, "removed", ids, MAX_N);
    if (nr < 0)
        return -1;
    for (int32_t i = 0; i < nr; i++)
        c->want[ids[i]] = -INFINITY;
    int32_t nc;
    if (fscanf(f, "%15s %d", t, &nc) != 2 || strcmp(t, "changed") || nc < 0 || nc > c->n)
        return -1;
    for (int32_t i = 0; i < nc; i++) {
        int32_t id;
        char v[48];
        if (fscanf(f, " %d:%47s", &id, v) != 2 || id < 0 || id >= c->n)
            return -1;
        c->want[id] = strtof(v, NULL);
    }
    return fgets(line, sizeof(line), f) ? 1 : -1; /* the rest of the line */
}

static const char *const multi_breakers[] = { "\n", "the end", "x;" };

/* The case's sampler as a one-step chain (mirostat: its own chain, at
 * temperature 1). */
static int params_of(const struct ref_case *c, struct fl_sampler_params *p)
{
    fl_sampler_defaults(p, 1);
    p->temperature = 1.0f;
    p->n_order = 1;
    float a, b, e;
    int x, y;
    char set[16];
    if (!strncmp(c->name, "dry", 3)) {
        if (sscanf(c->params, "%a %a %d %d %15s", &a, &b, &x, &y, set) != 5)
            return -1;
        p->order[0] = FL_SAMPLER_DRY;
        p->dry_multiplier = a;
        p->dry_base = b;
        p->dry_allowed_length = x;
        p->dry_penalty_last_n = y;
        if (!strcmp(set, "multi")) {
            p->n_dry_breakers = 3;
            memcpy(p->dry_breakers, multi_breakers, sizeof(multi_breakers));
        }
    } else if (!strncmp(c->name, "sigma", 5)) {
        if (sscanf(c->params, "%a", &a) != 1)
            return -1;
        p->order[0] = FL_SAMPLER_TOP_N_SIGMA;
        p->top_n_sigma = a;
    } else if (!strncmp(c->name, "xtc", 3)) {
        if (sscanf(c->params, "%a %d", &a, &x) != 2)
            return -1;
        p->order[0] = FL_SAMPLER_XTC;
        p->xtc_probability = 1.0f;
        p->xtc_threshold = a;
        p->min_keep = x;
    } else if (!strncmp(c->name, "dyntemp", 7)) {
        if (sscanf(c->params, "%a %a %a", &a, &b, &e) != 3)
            return -1;
        p->order[0] = FL_SAMPLER_TEMPERATURE;
        p->temperature = a;
        p->dynatemp_range = b;
        p->dynatemp_exponent = e;
    } else if (!strncmp(c->name, "mirostat", 8)) {
        if (sscanf(c->params, "%d %a %a", &x, &a, &b) != 3)
            return -1;
        p->mirostat = x;
        p->mirostat_tau = a;
        p->mirostat_eta = b;
    } else {
        return -1;
    }
    return 0;
}

static struct fl_candidate cand[MAX_N];

/* DRY's breakers for a case: none (built by the sampler), a table built
 * before for the same strings (the server's way; let go of right after the
 * sampler takes it, which must keep its own reference), or one for other
 * strings (not used). */
enum table_mode { TABLE_NONE, TABLE_SHARED, TABLE_OTHER };

/* Whether the survivors are llama.cpp's, logits bit for bit (mirostat:
 * how many). */
static bool run_case(const struct ref_case *c, const struct fl_tokenizer *tok, enum table_mode mode)
{
    struct fl_sampler_params p;
    CHECK(params_of(c, &p) == 0, "%s: bad params '%s'", c->name, c->params);
    struct fl_sampler *s = NULL;
    static const char *const other[] = { "zzz" };
    if (mode != TABLE_NONE)
        CHECK(fl_dry_breakers_new(mode == TABLE_SHARED ? p.dry_breakers : other,
                                  mode == TABLE_SHARED ? p.n_dry_breakers : 1, tok,
                                  &p.dry_table) == 0, "%s: fl_dry_breakers_new", c->name);
    int rc = fl_sampler_new(&p, c->n, p.dry_multiplier != 0.0f ? tok : NULL, &s);
    fl_dry_breakers_unref(p.dry_table);
    CHECK(rc == 0, "%s: fl_sampler_new: %d", c->name, rc);
    if (rc)
        return false;
    for (int32_t i = 0; i < c->n_hist; i++)
        fl_sampler_accept(s, c->hist[i]);
    int n = fl_sampler_candidates(s, c->logits, cand, MAX_N);
    fl_sampler_free(s);
    int32_t kept = 0;
    for (int32_t i = 0; i < c->n; i++)
        kept += c->want[i] != -INFINITY;
    if (p.mirostat) {
        CHECK(n == kept, "%s: mirostat kept %d, llama.cpp %d", c->name, n, (int)kept);
        return n == kept;
    }
    bool ok = n == kept;
    CHECK(ok, "%s: %d survivors, llama.cpp %d", c->name, n, (int)kept);
    for (int i = 0; ok && i < n; i++) {
        const float w = c->want[cand[i].id];
        ok = w == cand[i].logit;
        CHECK(ok, "%s: token %d: logit %a, llama.cpp %a", c->name, (int)cand[i].id,
              cand[i].logit, w);
    }
    return ok;
}

int main(void)
{
    struct fl_err err = { "" };
    struct gguf_file *g = NULL;
    struct fl_tokenizer *tok = NULL;
    CHECK(gguf_open("tests/data/qwen3moe-tiny-F16.gguf", &g, &err) == 0, "%s", err.msg);
    CHECK(g && fl_tokenizer_load(g, &tok, &err) == 0, "%s", err.msg);
    FILE *f = fopen("tests/data/sampler/llama-samplers.txt", "r");
    CHECK(f != NULL, "tests/data/sampler/llama-samplers.txt: %s", strerror(errno));
    if (!f || !tok)
        return 1;
    static struct ref_case c;
    int rc, n = 0, ok = 0, kinds[5] = { 0 }, tabled = 0, n_tabled = 0;
    while ((rc = read_case(f, &c)) == 1) {
        n++;
        ok += run_case(&c, tok, TABLE_NONE);
        if (c.name[0] == 'd' && c.name[1] == 'r') {
            tabled += run_case(&c, tok, TABLE_SHARED) && run_case(&c, tok, TABLE_OTHER);
            n_tabled++;
        }
        kinds[c.name[0] == 'd' ? (c.name[1] == 'r' ? 0 : 3) : c.name[0] == 's' ? 1
              : c.name[0] == 'x' ? 2 : 4]++;
    }
    CHECK(rc == 0, "case %d of the reference file is malformed", n + 1);
    CHECK(n >= 60 && kinds[0] && kinds[1] && kinds[2] && kinds[3] && kinds[4],
          "only %d cases (dry %d, top-n-sigma %d, xtc %d, dynatemp %d, mirostat %d)", n,
          kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]);
    printf("%d of %d cases as llama.cpp's samplers (dry %d, top-n-sigma %d, xtc %d, "
           "dynamic temperature %d, mirostat %d)\n", ok, n, kinds[0], kinds[1], kinds[2],
           kinds[3], kinds[4]);
    CHECK(tabled == n_tabled, "%d of %d DRY cases with a shared breaker table", tabled, n_tabled);
    printf("%d of %d DRY cases the same with a breaker table built before (and with one of other "
           "strings)\n", tabled, n_tabled);
    fclose(f);
    fl_tokenizer_free(tok);
    gguf_close(g);
    return check_summary("test-sampler-llama");
}

/* test-predict-logits: prediction and cache policy never change what is
 * computed. For each model, `faultline eval` (prompt + greedy tokens, logits
 * and routing) runs fully resident, then paged with every --prefetch and
 * --cache (pinned-hot with the profile of an earlier paged run's
 * --stats-json, and pinned-hot after a --calibrate pass) at the smallest budget the plan allows (most eviction);
 * every FLRF/FLRT must equal the resident run's byte for byte, and the
 * paged runs must really page (loads > 0 in --stats-json). Two threads, so
 * that prefill runs the engine's waves of pinned experts too. Each run's
 * --stats-json "prediction" counts must fit together (precision = hits /
 * predicted, recall = hits / chosen). */
#include <inttypes.h>
#include <math.h>

#include "tests/test-paged-util.h"

#define PROMPT "The river runs past old stone walls where children play"
#define LIMIT_S 60.0
#define CALIBRATION_TEXT "Rain fell on the harbour all night. In the morning the boats went " \
    "out again, and the market filled with fish, bread and the noise of gulls.\n"

static const char *models[] = { "tests/data/qwen3moe-tiny-Q8_0.gguf",
                                "tests/data/mixtral-tiny-Q4_K_M.gguf",
                                "tests/data/deepseek2-tiny-F16.gguf" };
static const char *predictors[] = { "none", "router", "lookahead:2", "history" };

/* eval with extra flags (NULL-terminated); 0 or the child's status. */
static int eval(const char *cli, const char *model, char **extra, const char *dir,
                const char *tag)
{
    char out[512], rt[512], err[512];
    snprintf(out, sizeof(out), "%s/%s.flrf", dir, tag);
    snprintf(rt, sizeof(rt), "%s/%s.flrt", dir, tag);
    snprintf(err, sizeof(err), "%s/%s.err", dir, tag);
    char *argv[40] = { (char *)cli, "eval", "-m", (char *)model, "-p", PROMPT, "-n", "12",
                       "-t", "2", "--logits-out", out, "--routing-out", rt };
    int n = 14;
    for (int i = 0; extra && extra[i] && n < 39; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    struct t_run r = t_run_cmd(argv, NULL, err, LIMIT_S);
    if (r.status != 0) {
        char *b = check_read_file(err, NULL);
        fprintf(stderr, "%s %s: exit %d: %s", model, tag, r.status, b ? b : "");
        free(b);
    }
    return r.status;
}

/* The number after "key": in a JSON file, as a double; NAN when absent or null. */
static double json_number(const char *path, const char *key)
{
    char *b = check_read_file(path, NULL), pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = b ? strstr(b, pat) : NULL;
    char *end = NULL;
    double v = p ? strtod(p + strlen(pat), &end) : NAN;
    if (p && end == p + strlen(pat))
        v = NAN;
    free(b);
    return v;
}

/* --stats-json's "prediction" member: precision = hits / predicted and
 * recall = hits / chosen, from counts that fit together; where nothing
 * was guessed (none, router: it reads what was chosen) both are null. */
static void check_prediction_json(const char *json, bool predicts)
{
    double pred = json_number(json, "predicted"), hits = json_number(json, "hits");
    double chosen = json_number(json, "chosen"), prec = json_number(json, "precision");
    double rec = json_number(json, "recall"), routed = json_number(json, "routed");
    CHECK(!isnan(pred) && !isnan(hits) && !isnan(chosen) && !isnan(routed),
          "%s: no prediction counts", json);
    CHECK(hits <= pred && hits <= chosen && chosen <= routed, "%s: counts do not fit", json);
    if (!predicts) {
        CHECK(pred == 0 && isnan(prec) && isnan(rec), "%s: a predictor that does not guess predicted something", json);
        return;
    }
    CHECK(pred > 0 && fabs(prec - hits / pred) < 1e-6 && fabs(rec - hits / chosen) < 1e-6,
          "%s: precision %g recall %g, not %g/%g and %g/%g", json, prec, rec, hits, pred, hits,
          chosen);
}

static bool same_as_ref(const char *dir, const char *tag)
{
    char a[512], b[512], c[512], d[512];
    snprintf(a, sizeof(a), "%s/ref.flrf", dir);
    snprintf(b, sizeof(b), "%s/%s.flrf", dir, tag);
    snprintf(c, sizeof(c), "%s/ref.flrt", dir);
    snprintf(d, sizeof(d), "%s/%s.flrt", dir, tag);
    return t_cmp(a, b) == 0 && t_cmp(c, d) == 0;
}

static void one_model(const char *cli, const char *model, const char *dir)
{
    char *disk[] = { "--disk-moe" };
    struct t_plan plan;
    if (t_plan_for(model, disk, 1, &plan)) {
        CHECK(0, "%s: no plan", model);
        return;
    }
    char budget[32], prof[512], cache_hot[600];
    snprintf(budget, sizeof(budget), "%" PRIu64, plan.min_budget);
    snprintf(prof, sizeof(prof), "%s/profile.json", dir);
    snprintf(cache_hot, sizeof(cache_hot), "pinned-hot:%s", prof);
    CHECK(eval(cli, model, NULL, dir, "ref") == 0, "%s: resident eval failed", model);
    char *mk[] = { "--disk-moe", "--ram-budget", budget, "--stats-json", prof, NULL };
    CHECK(eval(cli, model, mk, dir, "profile") == 0, "%s: profile run failed", model);
    char cal[512];
    snprintf(cal, sizeof(cal), "%s/calibrate.txt", dir);
    FILE *f = fopen(cal, "w");
    CHECK(f && fputs(CALIBRATION_TEXT, f) >= 0 && fclose(f) == 0, "cannot write %s", cal);
    /* pinned-hot twice: a --stats-json profile, and a --calibrate pass */
    const char *caches[] = { "lru", "lfu-decay", cache_hot, "pinned-hot", "lfu-step", "lfu-next" };
    int runs = 0, same = 0;
    for (int pi = 0; pi < 4; pi++)
        for (int ci = 0; ci < (int)(sizeof(caches) / sizeof(caches[0])); ci++) {
            char json[512], tag[64];
            snprintf(tag, sizeof(tag), "p%d-c%d", pi, ci);
            snprintf(json, sizeof(json), "%s/%s.json", dir, tag);
            char *fl[] = { "--disk-moe", "--ram-budget", budget, "--prefetch",
                           (char *)predictors[pi], "--cache", (char *)caches[ci],
                           "--stats-json", json, ci == 3 ? "--calibrate" : NULL, cal, NULL };
            if (eval(cli, model, fl, dir, tag) != 0) {
                CHECK(0, "%s --prefetch %s --cache %s: eval failed", model, predictors[pi],
                      caches[ci]);
                continue;
            }
            uint64_t loads = 0;
            bool ok = same_as_ref(dir, tag);
            CHECK(ok, "%s --prefetch %s --cache %s: logits/routing differ from the resident run",
                  model, predictors[pi], caches[ci]);
            CHECK(t_json_u64(json, "loads", &loads) == 0 && loads > 0,
                  "%s --prefetch %s --cache %s: nothing paged", model, predictors[pi], caches[ci]);
            check_prediction_json(json, pi >= 2); /* none and router guess nothing */
            runs++;
            same += ok;
        }
    printf("%s: %d/%d paged runs (4 predictors x 6 policies, budget %s B) bit-identical\n",
           model, same, runs, budget);
}

int main(void)
{
    t_chdir_source();
    const char *cli = t_cli();
    char dir[] = "/tmp/test-predict-logits-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        one_model(cli, models[i], dir);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    if (failures)
        fprintf(stderr, "test-predict-logits: %d failures\n", failures);
    else
        printf("test-predict-logits: ok\n");
    return failures ? 1 : 0;
}

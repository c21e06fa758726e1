/* test-scratch-bound: eng_cpu_scratch_bound (backend/cpu/cpu-backend.h),
 * what the start-up memory check adds for the forward pass's scratch, is
 * at least what passes take and not far above it, on every architecture in
 * tests/data:
 *   - one sequence: a decode step, prompts of 64 and 200 tokens in chunks,
 *     and a chunk reading a long context (the attention's F32 copies of
 *     keys and values grow with it);
 *   - four sequences' 64-token chunks in one step, each reading ~1,000
 *     positions: the attention's copies are one span's at a time, not
 *     four.
 * "Taken" is the arena's high water (model/scratch.h), in a fresh session
 * per case; and the arena, reserved at open for the session's largest
 * step, never grows (so what it holds is what passes touch). Before the bound, a memory cgroup that fitted the weights and
 * the KV cache could still kill a long prompt's pass. */
#include <stdlib.h>
#include <string.h>

#include "app/session.h"
#include "backend/cuda/gpu.h"
#include "backend/cpu/cpu-backend.h"
#include "model/arch.h"
#include "model/model.h"
#include "tests/check.h"

#define N_CTX 4096
#define N_BATCH 128
#define N_SEQ 4
#define N_THREADS 2

/* The session, and *held0 the bytes its arena reserved at open. */
static struct eng_session *open_cpu(const char *path, const char *label, size_t *held0)
{
    struct eng_session_params p;
    eng_session_params_init(&p);
    p.model_path = path;
    p.n_ctx = N_CTX;
    p.n_batch = N_BATCH;
    p.n_seq = N_SEQ;
    p.n_threads = N_THREADS;
    p.no_prompt_cache = true;
    p.placement.n_gpu_layers = 0; /* a GPU keeps its scratch in VRAM */
    p.gpu_experts = ENG_GPU_EXPERTS_NONE;
    struct eng_session *s = NULL;
    struct fl_err err;
    if (eng_session_open(&p, &s, &err)) {
        CHECK(0, "%s: %s", label, err.msg);
        return NULL;
    }
    *held0 = eng_session_scratch_held(s);
    return s;
}

static void tokens(int32_t *t, int n, int64_t n_vocab, int salt)
{
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)((i * 7 + salt * 13 + 3) % n_vocab);
}

/* The bound for a step against what the session's arena took. */
static void compare(const char *label, const char *what, struct eng_session *s, size_t held0,
                    int64_t n_tok, int64_t n_kv, int64_t n_out)
{
    /* the session reserved the bound of its largest step: no pass grew it */
    CHECK(held0 > 0 && eng_session_scratch_held(s) == held0,
          "%s %s: the arena grew from the %zu bytes reserved at open to %zu", label, what, held0,
          eng_session_scratch_held(s));
    const uint64_t bound = eng_cpu_scratch_bound(eng_session_model(s), n_tok, n_kv, n_out, N_THREADS);
    const uint64_t took = eng_session_scratch_high_water(s);
    CHECK(took > 0 && took <= bound, "%s %s: the pass took %llu bytes, the bound says %llu", label,
          what, (unsigned long long)took, (unsigned long long)bound);
    /* loose enough for every arch's own buffers, tight enough to refuse
     * nothing that fits by much */
    CHECK(bound <= 2 * took + (256 << 10), "%s %s: bound %llu bytes for %llu taken", label, what,
          (unsigned long long)bound, (unsigned long long)took);
    printf("%-28s %-34s took %8.1f KiB, bound %8.1f KiB (%.2fx)\n", label, what, took / 1024.0,
           bound / 1024.0, (double)bound / (double)(took ? took : 1));
}

/* One sequence: n_past tokens in chunks of N_BATCH, then the last chunk
 * measured with the context read so far. */
static void one_sequence(const char *path, const char *label, int n, const char *what)
{
    size_t held0;
    struct eng_session *s = open_cpu(path, label, &held0);
    if (!s)
        return;
    struct fl_err err;
    const int64_t n_vocab = eng_session_model(s)->hp.n_vocab;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)n);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    tokens(t, n, n_vocab, 0);
    if (eng_session_eval(s, t, n, false, logits, &err))
        CHECK(0, "%s %s: %s", label, what, err.msg);
    else
        compare(label, what, s, held0, n < N_BATCH ? n : N_BATCH, n, 1);
    free(t);
    free(logits);
    eng_session_close(s);
}

/* Four sequences with 960-token prompts, then one step of a 64-token chunk
 * of each. */
static void four_spans(const char *path, const char *label)
{
    enum { PAST = 960, CHUNK = 64 };
    size_t held0;
    struct eng_session *s = open_cpu(path, label, &held0);
    if (!s)
        return;
    struct fl_err err;
    const int64_t n_vocab = eng_session_model(s)->hp.n_vocab;
    int32_t t[N_SEQ * CHUNK];
    float *logits = malloc(sizeof(float) * (size_t)(n_vocab * N_SEQ));
    struct eng_span spans[N_SEQ];
    int rc = 0;
    for (int pos = 0; !rc && pos <= PAST; pos += CHUNK) {
        for (int i = 0; i < N_SEQ; i++) {
            tokens(t + i * CHUNK, CHUNK, n_vocab, i + pos);
            spans[i] = (struct eng_span){ .seq = i, .pos0 = pos, .n_tok = CHUNK, .logits = true };
        }
        /* the prompts' chunks two sequences at a time; the last step all four */
        const int n_span = pos == PAST ? N_SEQ : 2;
        for (int j = 0; !rc && j < N_SEQ; j += n_span) {
            const struct eng_batch b = { .tokens = t + j * CHUNK, .n_tok = n_span * CHUNK,
                                         .spans = spans + j, .n_spans = n_span, .logits = logits };
            rc = eng_session_forward(s, &b, &err);
        }
    }
    if (rc)
        CHECK(0, "%s four spans: %s", label, err.msg);
    else
        compare(label, "4 spans x 64 at 960..1023", s, held0, N_SEQ * CHUNK, PAST + CHUNK, N_SEQ);
    free(logits);
    eng_session_close(s);
}

int main(void)
{
    const char *dir = getenv("FL_SOURCE_DIR") ? getenv("FL_SOURCE_DIR") : ".";
    static const char *const models[] = { "qwen3moe-tiny-Q8_0", "mixtral-tiny-Q4_K_M",
                                          "deepseek2-tiny-F16", "gpt-oss-tiny-MXFP4",
                                          "glm4moe-tiny-Q8_0", "minimax-m2-tiny-Q8_0",
                                          "qwen35moe-tiny-Q8_0", "qwen3next-tiny-F16",
                                          "qwen3next-ssm-in-tiny-F16", "deepseek32-tiny-F16",
                                          "glm-dsa-tiny-F16", "kimi-linear-tiny-F16",
                                          "kimi-k3-tiny-F16", "minimax-m3-tiny-F16" };
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/tests/data/%s.gguf", dir, models[i]);
        one_sequence(path, models[i], 1, "decode");
        one_sequence(path, models[i], 64, "64-token prompt");
        one_sequence(path, models[i], 200, "200-token prompt");
        one_sequence(path, models[i], 2000, "128-token chunks to 2,000");
        four_spans(path, models[i]);
    }
    return check_summary("test-scratch-bound");
}

/* test-inspect: the MoE layout (gguf/moe-layout.h) and `faultline inspect`.
 *
 * The expected layout of each reference model is derived here from the
 * shapes and formats tests/data/ref/README.md states (n_embd, expert n_ff,
 * weight types) and ggml's block sizes, not from the code under test. The
 * CLI runs in a child process (cli_inspect directly, and the faultline
 * binary too when FL_CLI names one): text output, --json parsed by
 * python3 -m json.tool, and corrupt input giving one line on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/cli/commands.h"
#include "gguf/gguf.h"
#include "gguf/moe-layout.h"
#include "gguf/tensor-types.h"
#define CHECK_OUT stderr
#include "tests/check.h"

/* Bytes of a [ne0, ne1] matrix of a block type. */
#define MAT(ne0, ne1, blk, qk) ((uint64_t)(ne0) / (qk) * sizeof(blk) * (ne1))
#define F16MAT(ne0, ne1) ((uint64_t)(ne0) * (ne1) * 2)

struct model_moe {
    const char *file;
    int n_tensors, n_layer, n_expert, n_used;
    int moe_first;              /* first MoE layer (README: FLRT layer_idx) */
    uint64_t per_expert[3];     /* bytes of one expert, per layer */
};

/* Per expert: gate + up ([n_embd, n_ff]) + down ([n_ff, n_embd]) (+ biases). */
static const struct model_moe models[] = {
    { "qwen3moe-tiny-F16.gguf", 27, 2, 16, 4, 0,
      { 3 * F16MAT(128, 64), 3 * F16MAT(128, 64) } },
    { "qwen3moe-tiny-Q8_0.gguf", 27, 2, 16, 4, 0,
      { 3 * MAT(128, 64, struct fl_block_q8_0, 32), 3 * MAT(128, 64, struct fl_block_q8_0, 32) } },
    /* Q4_K_M: experts Q4_K, except layer 1's ffn_down_exps in Q6_K. */
    { "mixtral-tiny-Q4_K_M.gguf", 23, 2, 8, 2, 0,
      { 3 * MAT(256, 256, struct fl_block_q4_K, 256),
        2 * MAT(256, 256, struct fl_block_q4_K, 256) + MAT(256, 256, struct fl_block_q6_K, 256) } },
    { "deepseek2-tiny-F16.gguf", 52, 3, 8, 2, 1,
      { 0, 3 * F16MAT(128, 64), 3 * F16MAT(128, 64) } },
    /* Experts MXFP4 (n_ff 128) with F32 biases [128] for gate, up and down. */
    { "gpt-oss-tiny-MXFP4.gguf", 41, 2, 8, 2, 0,
      { 3 * MAT(128, 128, struct fl_block_mxfp4, 32) + 3 * 128 * 4,
        3 * MAT(128, 128, struct fl_block_mxfp4, 32) + 3 * 128 * 4 } },
};
#define N_MODELS (sizeof(models) / sizeof(models[0]))

static const char *data_path(const char *file)
{
    static char path[4096];
    const char *dir = getenv("FL_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/tests/data/%s", dir ? dir : ".", file);
    return path;
}

static uint64_t expected_per_token(const struct model_moe *m)
{
    uint64_t sum = 0;
    for (int il = 0; il < m->n_layer; il++)
        sum += (uint64_t)m->n_used * m->per_expert[il];
    return sum;
}

static void check_slices(const struct moe_layer *ly, int il, const char *file)
{
    for (int r = 0; r < MOE_N_ROLES; r++) {
        const struct moe_expert_tensor *et = &ly->role[r];
        if (!et->t)
            continue;
        CHECK(et->expert_bytes * (uint64_t)ly->n_expert == et->t->nbytes, "%s: layer %d %s slices", file, il,
              moe_role_name(r));
        CHECK(moe_expert_offset(et, 0) == et->t->offset &&
              moe_expert_offset(et, ly->n_expert - 1) + et->expert_bytes == et->t->offset + et->t->nbytes,
              "%s: layer %d %s: first and last expert do not tile the tensor", file, il, moe_role_name(r));
    }
}

static void test_layout(const struct model_moe *m)
{
    struct gguf_file *f = NULL;
    struct moe_layout *l = NULL;
    struct fl_err err = { { 0 } };
    if (gguf_open(data_path(m->file), &f, &err) || moe_layout_compute(f, &l, &err)) {
        CHECK(0, "%s: %s", m->file, err.msg);
        gguf_close(f);
        return;
    }
    CHECK(l->n_layer == m->n_layer && l->n_expert == m->n_expert && l->n_expert_used == m->n_used,
          "%s: layers/experts %d/%d/%d", m->file, l->n_layer, l->n_expert, l->n_expert_used);
    CHECK(l->n_leading_dense == m->moe_first && l->n_moe_layers == m->n_layer - m->moe_first,
          "%s: %d leading dense, %d MoE layers", m->file, l->n_leading_dense, l->n_moe_layers);
    for (int il = 0; il < l->n_layer && il < 3; il++) {
        const struct moe_layer *ly = &l->layers[il];
        CHECK(ly->is_moe == (il >= m->moe_first), "%s: layer %d kind", m->file, il);
        CHECK(ly->bytes_per_expert == m->per_expert[il], "%s: layer %d: %" PRIu64 " bytes per expert, want %"
              PRIu64, m->file, il, ly->bytes_per_expert, m->per_expert[il]);
        CHECK(!ly->is_moe || (ly->role[MOE_GATE].t && ly->role[MOE_UP].t && ly->role[MOE_DOWN].t),
              "%s: layer %d lacks gate/up/down", m->file, il);
        check_slices(ly, il, m->file);
    }
    CHECK(l->bytes_per_token == expected_per_token(m), "%s: %" PRIu64 " expert bytes per token, want %" PRIu64,
          m->file, l->bytes_per_token, expected_per_token(m));
    uint64_t experts = 0, total = 0;
    for (int il = 0; il < m->n_layer; il++)
        experts += m->per_expert[il] * (uint64_t)m->n_expert;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++)
        total += gguf_tensor(f, i)->nbytes;
    CHECK(l->expert_bytes == experts && l->non_expert_bytes == total - experts, "%s: expert/non-expert bytes",
          m->file);
    printf("ok   layout %s: %d MoE layers from layer %d, %" PRIu64 " expert bytes per token\n", m->file,
           l->n_moe_layers, l->n_leading_dense, l->bytes_per_token);
    moe_layout_free(l);
    gguf_close(f);
}

/* --- layouts that contradict themselves --------------------------------------------- */

struct gb {
    uint8_t buf[1024];
    size_t len;
};

static void put(struct gb *b, const void *p, size_t n) { memcpy(b->buf + b->len, p, n); b->len += n; }
static void u32(struct gb *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct gb *b, uint64_t v) { put(b, &v, 8); }
static void str(struct gb *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void kv_u32(struct gb *b, const char *k, uint32_t v) { str(b, k); u32(b, GGUF_VT_UINT32); u32(b, v); }

/* qwen3moe, 2 blocks, expert_count n_exp (0: absent), top-k used, and one
 * F32 expert tensor of the given name and shape. */
static void build_moe(struct gb *b, uint32_t n_exp, uint32_t used, const char *name, uint32_t nd,
                      const uint64_t *ne)
{
    b->len = 0;
    put(b, "GGUF", 4);
    u32(b, 3);
    u64(b, 1);
    u64(b, n_exp ? 4 : 3);
    str(b, "general.architecture"); u32(b, GGUF_VT_STRING); str(b, "qwen3moe");
    kv_u32(b, "qwen3moe.block_count", 2);
    if (n_exp)
        kv_u32(b, "qwen3moe.expert_count", n_exp);
    kv_u32(b, "qwen3moe.expert_used_count", used);
    str(b, name);
    u32(b, nd);
    for (uint32_t d = 0; d < nd; d++)
        u64(b, ne[d]);
    u32(b, FL_TYPE_F32);
    u64(b, 0);
    while (b->len % 32)
        b->buf[b->len++] = 0;
    memset(b->buf + b->len, 0, 256);
    b->len += 256;
}

static void expect_layout_error(struct gb *b, const char *what, const char *expect)
{
    struct gguf_file *f = NULL;
    struct moe_layout *l = NULL;
    struct fl_err err = { { 0 } };
    int rc = gguf_parse(b->buf, b->len, b->len, "moe.gguf", &f, &err);
    CHECK(rc == 0, "%s: the file itself should parse: %s", what, err.msg);
    if (rc)
        return;
    rc = moe_layout_compute(f, &l, &err);
    CHECK(rc == -EINVAL && l == NULL && strstr(err.msg, expect) && !strncmp(err.msg, "moe.gguf: ", 10),
          "%s: rc %d, message \"%s\", want \"%s\"", what, rc, err.msg, expect);
    if (rc == -EINVAL)
        printf("ok   layout rejects %-28s -> %s\n", what, err.msg);
    moe_layout_free(l);
    gguf_close(f);
}

static void test_bad_layouts(void)
{
    struct gb b;
    build_moe(&b, 4, 2, "blk.0.ffn_up_exps.weight", 3, (uint64_t[]){ 4, 2, 3 });
    expect_layout_error(&b, "last dim != expert_count", "last dimension is not expert_count but 3");
    build_moe(&b, 0, 2, "blk.0.ffn_up_exps.weight", 3, (uint64_t[]){ 4, 2, 4 });
    expect_layout_error(&b, "no expert_count", "but no qwen3moe.expert_count");
    build_moe(&b, 4, 5, "blk.0.ffn_up_exps.weight", 3, (uint64_t[]){ 4, 2, 4 });
    expect_layout_error(&b, "top-k above expert_count", "expert_used_count 5 is not in 1..4");
    build_moe(&b, 4, 2, "blk.7.ffn_down_exps.weight", 3, (uint64_t[]){ 4, 2, 4 });
    expect_layout_error(&b, "block past block_count", "block index beyond block_count");
    build_moe(&b, 4, 2, "blk.1.ffn_gate_exps.bias", 3, (uint64_t[]){ 4, 2, 4 });
    expect_layout_error(&b, "3-D expert bias", "wrong number of dimensions: 3");

    /* And a valid one: a lone expert tensor with biases absent. */
    struct gguf_file *f = NULL;
    struct moe_layout *l = NULL;
    struct fl_err err = { { 0 } };
    build_moe(&b, 4, 2, "blk.1.ffn_gate_up_exps.weight", 3, (uint64_t[]){ 4, 2, 4 });
    int rc = gguf_parse(b.buf, b.len, b.len, "moe.gguf", &f, &err);
    if (!rc)
        rc = moe_layout_compute(f, &l, &err);
    CHECK(rc == 0 && l->n_moe_layers == 1 && l->n_leading_dense == 1 && l->layers[1].role[MOE_GATE_UP].t &&
          l->layers[1].bytes_per_expert == 4 * 2 * 4, "fused gate_up layout: %s", err.msg);
    moe_layout_free(l);
    gguf_close(f);
}

/* --- the CLI --------------------------------------------------------------------------- */

struct run {
    int status;        /* exit status, or -1 if it did not exit */
    char out[1 << 16]; /* stdout (first 64 KiB) */
    char err[4096];
};

static void slurp_fd(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    lseek(fd, 0, SEEK_SET);
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    close(fd);
}

/* Runs `faultline inspect ARGS...` in a child: through cli_inspect, or by
 * exec'ing exe when given. Output goes to temporary files (no pipe limits). */
static void run_inspect(struct run *r, const char *exe, char *const *args, const char *save_json)
{
    char out_path[] = "/tmp/test-inspect-out-XXXXXX", err_path[] = "/tmp/test-inspect-err-XXXXXX";
    int out = mkstemp(out_path), err = mkstemp(err_path);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out, 1);
        dup2(err, 2);
        int argc = 0;
        char *argv[8] = { "inspect" };
        for (; args[argc]; argc++)
            argv[argc + 1] = args[argc];
        if (exe) {
            char *eargv[9] = { (char *)exe };
            memcpy(eargv + 1, argv, sizeof(argv));
            execv(exe, eargv);
            _exit(127);
        }
        int rc = cli_inspect(argc + 1, argv);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (save_json) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "cp %s %s", out_path, save_json);
        CHECK(system(cmd) == 0, "copy json");
    }
    slurp_fd(out, r->out, sizeof(r->out));
    slurp_fd(err, r->err, sizeof(r->err));
    unlink(out_path);
    unlink(err_path);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static bool have_python(void)
{
    return system("python3 -c 'import json' >/dev/null 2>&1") == 0;
}

/* The JSON document parses, and says what the README implies. */
static void check_json(const char *path, const struct model_moe *m)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "python3 -m json.tool %s >/dev/null", path);
    CHECK(system(cmd) == 0, "%s: --json output is not valid JSON", m->file);
    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "assert d[\"n_tensors\"] == %d and len(d[\"tensors\"]) == %d, \"tensors\"; "
             "assert d[\"moe\"][\"expert_bytes_per_token\"] == %" PRIu64 ", \"per token\"; "
             "assert d[\"moe\"][\"n_expert\"] == %d' %s",
             m->n_tensors, m->n_tensors, expected_per_token(m), m->n_expert, path);
    CHECK(system(cmd) == 0, "%s: JSON content", m->file);
}

static void test_cli_model(const struct model_moe *m, const char *exe, bool python)
{
    static struct run r;
    char want[64];
    const char *label = exe ? "faultline binary" : "cli_inspect";
    run_inspect(&r, exe, (char *[]){ (char *)data_path(m->file), NULL }, NULL);
    snprintf(want, sizeof(want), "\ntensors:          %d, ", m->n_tensors);
    CHECK(r.status == 0 && r.err[0] == 0, "%s %s: status %d, stderr %s", label, m->file, r.status, r.err);
    CHECK(strstr(r.out, want) != NULL, "%s %s: no \"%s\" line in:\n%s", label, m->file, want + 1, r.out);
    if (exe) {
        printf("ok   %s %s: exit 0, %d tensors\n", label, m->file, m->n_tensors);
        return;
    }
    char json[] = "/tmp/test-inspect-json-XXXXXX";
    close(mkstemp(json));
    run_inspect(&r, NULL, (char *[]){ (char *)data_path(m->file), "--json", "--tensors", NULL }, json);
    CHECK(r.status == 0 && r.err[0] == 0, "%s --json: status %d, stderr %s", m->file, r.status, r.err);
    if (python)
        check_json(json, m);
    unlink(json);
    printf("ok   %s %s: exit 0, %d tensors%s\n", label, m->file, m->n_tensors, python ? ", JSON valid" : "");
}

/* Bad input: non-zero exit and exactly one line on stderr. */
static void expect_one_line_error(const char *exe, char *const *args, const char *what)
{
    static struct run r;
    run_inspect(&r, exe, args, NULL);
    CHECK(r.status != 0 && r.status != -1, "%s: status %d", what, r.status);
    CHECK(count_lines(r.err) == 1 && r.err[strlen(r.err) - 1] == '\n', "%s: stderr is not one line: %s", what,
          r.err);
    if (r.status > 0 && count_lines(r.err) == 1)
        printf("ok   %s: exit %d, %s", what, r.status, r.err);
}

static void test_cli_errors(const char *exe)
{
    char corrupt[] = "/tmp/test-inspect-corrupt-XXXXXX";
    int fd = mkstemp(corrupt);
    FILE *src = fopen(data_path(models[0].file), "rb");
    char buf[4096];
    size_t n = src ? fread(buf, 1, sizeof(buf), src) : 0;
    if (src)
        fclose(src);
    /* The real header cut at 4 KiB, with its tensor count made huge. */
    buf[15] = 0x7f;
    CHECK(n == sizeof(buf) && write(fd, buf, n) == (ssize_t)n, "write corrupt file");
    close(fd);
    expect_one_line_error(exe, (char *[]){ corrupt, NULL }, "corrupt file");
    expect_one_line_error(exe, (char *[]){ corrupt, "--json", NULL }, "corrupt file --json");
    expect_one_line_error(exe, (char *[]){ "/nonexistent/model.gguf", NULL }, "missing file");
    expect_one_line_error(exe, (char *[]){ "--bogus", NULL }, "unknown option");
    expect_one_line_error(exe, (char *[]){ NULL }, "no model");
    unlink(corrupt);
}

/* glm4moe's nextn block: its experts are in the file, a token never runs
 * them; qwen35moe's shared experts are non-expert bytes. */
static void test_nextn_and_shared(void)
{
    struct gguf_file *f = NULL, *g = NULL;
    struct moe_layout *l = NULL, *q = NULL;
    struct fl_err err = { { 0 } };
    const uint64_t per_expert = 3 * F16MAT(128, 64);
    if (gguf_open(data_path("glm4moe-tiny-F16.gguf"), &f, &err) || moe_layout_compute(f, &l, &err) ||
        gguf_open(data_path("qwen35moe-tiny-F16.gguf"), &g, &err) || moe_layout_compute(g, &q, &err)) {
        CHECK(0, "%s", err.msg);
    } else {
        CHECK(l->n_layer == 4 && l->n_nextn == 1 && l->n_moe_layers == 2 && l->layers[3].is_nextn &&
                  l->layers[3].is_moe && !l->layers[2].is_nextn,
              "glm4moe: %d blocks, %d nextn, %d MoE run", l->n_layer, l->n_nextn, l->n_moe_layers);
        CHECK(l->bytes_per_token == 2 * 4 * per_expert && l->expert_bytes == 3 * 16 * per_expert,
              "glm4moe: %" PRIu64 " expert bytes per token, %" PRIu64 " in all", l->bytes_per_token,
              l->expert_bytes);
        CHECK(q->n_moe_layers == 4 && q->n_nextn == 0 && q->expert_bytes == 4 * 16 * per_expert,
              "qwen35moe: %d MoE layers, %" PRIu64 " expert bytes (shared experts excluded)",
              q->n_moe_layers, q->expert_bytes);
        printf("ok   glm4moe's nextn block not run (%" PRIu64 " expert bytes per token), qwen35moe's "
               "shared experts outside the experts\n", l->bytes_per_token);
    }
    moe_layout_free(l);
    moe_layout_free(q);
    gguf_close(f);
    gguf_close(g);
}

/* DeepSeek sparse attention: the layers with an indexer and the top-k
 * (glm-dsa-tiny: full indexers in blocks 0 and 2 of 4; deepseek2: none). */
static void test_sparse(void)
{
    static struct run r;
    run_inspect(&r, NULL, (char *[]){ (char *)data_path("glm-dsa-tiny-F16.gguf"), NULL }, NULL);
    CHECK(r.status == 0 && strstr(r.out, "sparse attention: a lightning indexer in 2 layers, each "
                                         "query reads its top 8 positions\n"),
          "glm-dsa-tiny: no sparse attention line in:\n%s", r.out);
    run_inspect(&r, NULL, (char *[]){ (char *)data_path("deepseek2-tiny-F16.gguf"), NULL }, NULL);
    CHECK(r.status == 0 && !strstr(r.out, "sparse attention"), "deepseek2-tiny: a sparse line");
    run_inspect(&r, NULL, (char *[]){ (char *)data_path("minimax-m3-tiny-F16.gguf"), NULL }, NULL);
    CHECK(r.status == 0 && strstr(r.out, "sparse attention: MiniMax's block selection in 2 layers, "
                                         "each query reads its top 2 blocks of 4 positions\n"),
          "minimax-m3-tiny: no block selection line in:\n%s", r.out);
    printf("ok   sparse attention: glm-dsa-tiny's 2 indexer layers, top 8; none in deepseek2; "
           "minimax-m3-tiny's 2 layers, 2 blocks of 4\n");
}

/* Linear attention's kind, layers and state per sequence: kimi-linear-tiny
 * has 3 KDA blocks of 4 heads x 32 with 4-wide convs: each keeps 3 rows of
 * q, k and v (3 x 3 x 128 floats) and 4 x 32 x 32 of state. */
static void test_linear(void)
{
    static struct run r;
    const long bytes = 3L * 4 * (3 * 3 * 128 + 4 * 32 * 32);
    char want[160];
    snprintf(want, sizeof(want), "linear attention: 3 Kimi Delta Attention layers, recurrent "
             "state %ld bytes", bytes);
    run_inspect(&r, NULL, (char *[]){ (char *)data_path("kimi-linear-tiny-F16.gguf"), NULL }, NULL);
    CHECK(r.status == 0 && strstr(r.out, want), "kimi-linear-tiny: no \"%s\" in:\n%s", want, r.out);
    run_inspect(&r, NULL, (char *[]){ (char *)data_path("qwen3next-tiny-F16.gguf"), NULL }, NULL);
    CHECK(r.status == 0 && strstr(r.out, "Gated DeltaNet layers"), "qwen3next-tiny: %s", r.out);
    printf("ok   linear attention: kimi-linear-tiny's 3 KDA layers, %ld bytes a sequence\n", bytes);
}

int main(void)
{
    for (size_t i = 0; i < N_MODELS; i++)
        test_layout(&models[i]);
    test_sparse();
    test_linear();
    test_nextn_and_shared();
    test_bad_layouts();

    bool python = have_python();
    if (!python)
        printf("skip JSON validation: python3 not found\n");
    for (size_t i = 0; i < N_MODELS; i++)
        test_cli_model(&models[i], NULL, python);
    test_cli_errors(NULL);

    const char *exe = getenv("FL_CLI");
    if (exe && access(exe, X_OK) == 0) {
        for (size_t i = 0; i < N_MODELS; i++)
            test_cli_model(&models[i], exe, false);
        test_cli_errors(exe);
    } else {
        printf("skip the faultline binary: FL_CLI=%s is not built\n", exe ? exe : "(unset)");
    }
    return check_summary("test-inspect");
}

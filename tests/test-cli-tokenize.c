/* test-cli-tokenize: `faultline tokenize` against llama.cpp's own output.
 *
 * For every tests/data/ref/<model>.<p>.txt, the prompt is tokenized from a
 * file (as llama-tokenize -f was run) and the --ids-only output must be the
 * "llama-tokenize --ids:" line byte for byte; the default output's pieces
 * must be the "pieces:" line. -p, --no-bos and escapes are checked on p1,
 * and bad input must give exit status != 0, one line on stderr and nothing
 * on stdout. cli_tokenize is called in-process with stdout/stderr
 * redirected to files. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/cli/commands.h"

/* printf("%.*s", LINE1(s)): the first line of s */
#define LINE1(s) (int)strcspn(s, "\n"), (s)

static int failures;
static char dir[] = "/tmp/test-cli-tokenize-XXXXXX";

struct result {
    int rc;
    char out[65536], err[4096];
};

static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures += !ok;
}

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
}

/* Runs cli_tokenize(args...) with stdout and stderr captured. */
static void run(struct result *r, int argc, char **argv)
{
    char out_path[64], err_path[64];
    snprintf(out_path, sizeof(out_path), "%s/out", dir);
    snprintf(err_path, sizeof(err_path), "%s/err", dir);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    if (so < 0 || se < 0 || !freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr)) {
        fprintf(stderr, "test-cli-tokenize: cannot redirect output\n");
        exit(1);
    }
    r->rc = cli_tokenize(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    slurp(out_path, r->out, sizeof(r->out));
    slurp(err_path, r->err, sizeof(r->err));
}

#define RUN(r, ...)                                                              \
    do {                                                                         \
        char *argv_[] = { "tokenize", __VA_ARGS__ };                             \
        run(r, (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);                 \
    } while (0)

/* The value of "key: " in a reference summary, without the newline. */
static int field(const char *text, const char *key, char *out, size_t cap)
{
    const char *p = text;
    size_t kl = strlen(key);
    while (p && *p) {
        if (!strncmp(p, key, kl) && p[kl] == ':' && p[kl + 1] == ' ') {
            p += kl + 2;
            size_t n = strcspn(p, "\n");
            if (n >= cap)
                return -1;
            memcpy(out, p, n);
            out[n] = 0;
            return 0;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return -1;
}

/* Turns "%6d -> 'piece'" lines into "[piece] [piece]". */
static void pieces_of(const char *out, char *dst, size_t cap)
{
    size_t n = 0;
    dst[0] = 0;
    for (const char *l = out; l && *l;) {
        const char *q = strstr(l, " -> '"), *end = strchr(l, '\n');
        if (!q || !end || end[-1] != '\'')
            return;
        q += 5;
        n += (size_t)snprintf(dst + n, n < cap ? cap - n : 0, "%s[%.*s]", n ? " " : "",
                              (int)(end - 1 - q), q);
        l = end + 1;
    }
}

static void check_ref(const char *model, const char *p)
{
    char path[512], txt[8192], prompt[1024], ids[2048], pieces[4096], got[8192];
    snprintf(path, sizeof(path), "tests/data/ref/%s.%s.txt", model, p);
    slurp(path, txt, sizeof(txt));
    if (field(txt, "prompt", prompt, sizeof(prompt)) ||
        field(txt, "llama-tokenize --ids", ids, sizeof(ids)) || field(txt, "pieces", pieces, sizeof(pieces))) {
        check(0, "%s: prompt, ids and pieces present", path);
        return;
    }
    char prompt_path[64], gguf[512];
    snprintf(prompt_path, sizeof(prompt_path), "%s/prompt", dir);
    snprintf(gguf, sizeof(gguf), "tests/data/%s.gguf", model);
    FILE *f = fopen(prompt_path, "wb");
    if (!f || fwrite(prompt, 1, strlen(prompt), f) != strlen(prompt) || fclose(f)) {
        check(0, "write %s", prompt_path);
        return;
    }
    struct result r;
    RUN(&r, "-m", gguf, "-f", prompt_path, "--ids-only");
    size_t n = strlen(r.out);
    check(r.rc == 0 && n && r.out[n - 1] == '\n' && !strncmp(r.out, ids, n - 1) && strlen(ids) == n - 1,
          "%s %s: ids %.*s (llama-tokenize: %s)", model, p, LINE1(r.rc ? r.err : r.out), ids);
    RUN(&r, "-m", gguf, "-f", prompt_path);
    pieces_of(r.out, got, sizeof(got));
    check(r.rc == 0 && !strcmp(got, pieces), "%s %s: pieces %s", model, p, got);
}

static void check_p1_options(void)
{
    struct result r;
    const char *bpe = "[464, 269, 499, 270, 282, 286, 376, 81, 590, 318]\n"; /* ref/README.md */
    RUN(&r, "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "The capital of France is", "--ids-only");
    check(r.rc == 0 && !strcmp(r.out, bpe), "qwen3moe p1 with -p: %.*s", LINE1(r.out));
    RUN(&r, "--ids", "-p", "The capital of France is", "--model", "tests/data/qwen3moe-tiny-F16.gguf");
    check(r.rc == 0 && !strcmp(r.out, bpe), "options in any order, --ids alias");
    RUN(&r, "-m", "tests/data/mixtral-tiny-Q4_K_M.gguf", "-p", "The capital of France is", "--ids-only");
    check(r.rc == 0 && !strcmp(r.out, "[1, 450, 274, 481, 277, 284, 310, 383, 661, 346, 338]\n"),
          "mixtral p1 adds BOS: %.*s", LINE1(r.out));
    RUN(&r, "-m", "tests/data/mixtral-tiny-Q4_K_M.gguf", "-p", "The capital of France is", "--ids-only",
        "--no-bos");
    check(r.rc == 0 && !strcmp(r.out, "[450, 274, 481, 277, 284, 310, 383, 661, 346, 338]\n"),
          "mixtral p1 --no-bos: %.*s", LINE1(r.out));
    RUN(&r, "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "<|endoftext|>", "--ids-only", "--parse-special");
    check(r.rc == 0 && !strcmp(r.out, "[1024]\n"), "--parse-special makes <|endoftext|> id 1024: %.*s",
          LINE1(r.out));
    RUN(&r, "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "<|endoftext|>", "--ids-only");
    check(r.rc == 0 && strcmp(r.out, "[1024]\n") && r.out[0] == '[', "without it, plain text: %.*s",
          LINE1(r.out));
    /* "\x54he" is "The": escapes processed as llama-tokenize does, unless --no-escape. */
    RUN(&r, "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "\\x54he capital of France is", "--ids-only");
    check(r.rc == 0 && !strcmp(r.out, bpe), "escapes: %.*s", LINE1(r.out));
    RUN(&r, "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "\\x54he", "--ids-only", "--no-escape");
    check(r.rc == 0 && strncmp(r.out, "[464]", 5) && r.out[0] == '[', "--no-escape: %.*s",
          LINE1(r.out));
    RUN(&r, "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "The capital", "--show-count");
    int lines = 0;
    for (const char *q = r.out; (q = strstr(q, " -> '")); q++)
        lines++;
    char total[64];
    snprintf(total, sizeof(total), "\nTotal number of tokens: %d\n", lines);
    check(r.rc == 0 && !strncmp(r.out, "   464 -> 'The'\n", 16) && lines > 1 && strstr(r.out, total),
          "default output and --show-count (%d tokens)", lines);
}

static void expect_error(const char *what, int argc, char **argv)
{
    struct result r;
    run(&r, argc, argv);
    size_t n = strlen(r.err);
    check(r.rc != 0 && !r.out[0] && n > 1 && strchr(r.err, '\n') == r.err + n - 1,
          "%s: exit %d, one-line error: %.*s", what, r.rc, LINE1(r.err));
}

#define ERR(what, ...)                                                           \
    do {                                                                         \
        char *argv_[] = { "tokenize", __VA_ARGS__ };                             \
        expect_error(what, (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);     \
    } while (0)

static void check_errors(void)
{
    char empty[64], notok[64];
    snprintf(empty, sizeof(empty), "%s/empty.gguf", dir);
    snprintf(notok, sizeof(notok), "%s/notok.gguf", dir);
    FILE *f = fopen(empty, "wb");
    if (f)
        fclose(f);
    /* A valid GGUF v3 header with no tensors and no metadata: no tokenizer. */
    static const unsigned char hdr[24] = { 'G', 'G', 'U', 'F', 3 };
    f = fopen(notok, "wb");
    if (f) {
        fwrite(hdr, 1, sizeof(hdr), f);
        fclose(f);
    }
    ERR("no model", "-p", "hi");
    ERR("no text", "-m", "tests/data/qwen3moe-tiny-F16.gguf");
    ERR("both -p and -f", "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "hi", "-f", "x");
    ERR("-m without a value", "-p", "hi", "-m");
    ERR("unknown option", "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-p", "hi", "--bogus");
    ERR("missing model", "-m", "tests/data/no-such-model.gguf", "-p", "hi");
    ERR("missing text file", "-m", "tests/data/qwen3moe-tiny-F16.gguf", "-f", "tests/data/no-such-file");
    ERR("empty file as model", "-m", empty, "-p", "hi");
    ERR("text file as model", "-m", "tests/data/ref/README.md", "-p", "hi");
    ERR("GGUF without tokenizer", "-m", notok, "-p", "hi");
    ERR("directory as model", "-m", "tests/data", "-p", "hi");
}

int main(void)
{
    const char *src = getenv("FL_SOURCE_DIR");
    if (src && chdir(src)) {
        perror(src);
        return 1;
    }
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const char *models[] = { "qwen3moe-tiny-F16", "qwen3moe-tiny-Q8_0", "mixtral-tiny-Q4_K_M",
                                    "deepseek2-tiny-F16", "gpt-oss-tiny-MXFP4" };
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++)
        for (int p = 1; p <= 3; p++) {
            char name[4];
            snprintf(name, sizeof(name), "p%d", p);
            check_ref(models[m], name);
        }
    check_p1_options();
    check_errors();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    printf("%s (%d failure%s)\n", failures ? "FAILED" : "passed", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}

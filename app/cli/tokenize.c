/* tokenize.c: `faultline tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos]
 * [--parse-special] [--ids-only] [--no-escape] [--show-count]`.
 *
 * Prints what llama.cpp's llama-tokenize prints for the same arguments, so
 * the two can be diffed: "%6d -> 'piece'" per token, or "[1, 2, 3]" with
 * --ids-only (llama-tokenize's --ids, also accepted). As there, escapes
 * (\n \t \xNN ...) in the text are processed unless --no-escape, BOS (and
 * EOS, for files that add it) is added when the file asks for BOS and
 * --no-bos is absent, and pieces render special tokens' text.
 *
 * Only the GGUF header and the tokenizer are read, never the weights, so it
 * is instant on a model of any size. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/commands.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

#define TOK_MAX_FILE ((size_t)256 << 20) /* a prompt file, not a corpus */

struct tok_args {
    const char *model, *prompt, *file;
    bool no_bos, parse_special, ids_only, escape, show_count;
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: faultline tokenize -m MODEL (-p TEXT | -f FILE) [options]\n"
        "  -m, --model PATH     GGUF file (only its header and tokenizer are read)\n"
        "  -p, --prompt TEXT    text to tokenize\n"
        "  -f, --file PATH      read the text from a file, byte for byte\n"
        "  --no-bos             do not add BOS even if the file asks for it\n"
        "  --parse-special      turn control-token texts (<|im_start|>, ...) into their tokens\n"
        "  --ids-only, --ids    print only the ids, as [1, 2, 3]\n"
        "  --no-escape          take \\n, \\t, \\xNN ... literally\n"
        "  --show-count         print the number of tokens at the end\n");
}

static int bad(const char *msg, const char *arg)
{
    fprintf(stderr, "faultline tokenize: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    return 2;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct tok_args *a)
{
    *a = (struct tok_args){ .escape = true };
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char **val = NULL;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(s, "-m") || !strcmp(s, "--model")) {
            val = &a->model;
        } else if (!strcmp(s, "-p") || !strcmp(s, "--prompt")) {
            val = &a->prompt;
        } else if (!strcmp(s, "-f") || !strcmp(s, "--file")) {
            val = &a->file;
        } else if (!strcmp(s, "--no-bos")) {
            a->no_bos = true;
        } else if (!strcmp(s, "--parse-special")) {
            a->parse_special = true;
        } else if (!strcmp(s, "--ids-only") || !strcmp(s, "--ids")) {
            a->ids_only = true;
        } else if (!strcmp(s, "--no-escape")) {
            a->escape = false;
        } else if (!strcmp(s, "-e") || !strcmp(s, "--escape")) {
            a->escape = true;
        } else if (!strcmp(s, "--show-count")) {
            a->show_count = true;
        } else {
            return bad(s[0] == '-' ? "unknown option (see --help):" : "unexpected argument:", s);
        }
        if (val) {
            if (i + 1 >= argc)
                return bad("option needs a value:", s);
            *val = argv[++i];
        }
    }
    if (!a->model)
        return bad("no model (-m MODEL)", NULL);
    if (!a->prompt == !a->file)
        return bad("give exactly one of -p TEXT and -f FILE", NULL);
    return -1;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

static char escaped(char c)
{
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\'': case '"': case '\\': return c;
    default: return 0;
    }
}

/* llama.cpp's escape processing (common's string_process_escapes), in
 * place: unknown escapes and a trailing backslash stay as they are. */
static size_t unescape(char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 >= len) {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        if (escaped(c)) {
            s[o++] = escaped(c);
        } else if (c == 'x' && i + 2 < len && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            s[o++] = (char)(hex_digit(s[i + 1]) << 4 | hex_digit(s[i + 2]));
            i += 2;
        } else {
            s[o++] = '\\';
            s[o++] = c;
        }
    }
    return o;
}

static int read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *more = cap < TOK_MAX_FILE ? realloc(buf, cap * 2) : NULL;
        if (!more) {
            rc = cap < TOK_MAX_FILE ? -ENOMEM : -EFBIG;
            break;
        }
        buf = more;
        cap *= 2;
    }
    if (!buf)
        rc = -ENOMEM;
    else if (!rc && ferror(f))
        rc = -EIO;
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

static int get_text(const struct tok_args *a, char **text, size_t *len)
{
    if (a->file) {
        int rc = read_file(a->file, text, len);
        if (rc) {
            fprintf(stderr, "faultline tokenize: %s: %s\n", a->file, strerror(-rc));
            return 1;
        }
    } else {
        *len = strlen(a->prompt);
        *text = malloc(*len + 1);
        if (!*text) {
            fprintf(stderr, "faultline tokenize: out of memory\n");
            return 1;
        }
        memcpy(*text, a->prompt, *len + 1);
    }
    if (a->escape)
        *len = unescape(*text, *len);
    return 0;
}

static void print_piece(const struct fl_tokenizer *tok, int32_t id)
{
    char small[256];
    int n = fl_token_to_piece(tok, id, small, sizeof(small), false, true);
    printf("%6d -> '", (int)id);
    if (n >= 0) {
        fwrite(small, 1, (size_t)n, stdout);
    } else if (n == -ENOSPC) {
        n = fl_token_to_piece(tok, id, NULL, 0, false, true);
        char *big = n > 0 ? malloc((size_t)n) : NULL;
        if (big && fl_token_to_piece(tok, id, big, (size_t)n, false, true) == n)
            fwrite(big, 1, (size_t)n, stdout);
        free(big);
    }
    printf("'\n");
}

static void print_tokens(const struct tok_args *a, const struct fl_tokenizer *tok,
                         const int32_t *ids, int n)
{
    if (a->ids_only) {
        putchar('[');
        for (int i = 0; i < n; i++)
            printf("%s%d", i ? ", " : "", (int)ids[i]);
        printf("]\n");
    } else {
        for (int i = 0; i < n; i++)
            print_piece(tok, ids[i]);
    }
    if (a->show_count)
        printf("Total number of tokens: %d\n", n);
}

static int tokenize_text(const struct tok_args *a, const struct fl_tokenizer *tok, const char *text,
                         size_t len)
{
    const bool add_special = fl_tokenizer_add_bos(tok) && !a->no_bos;
    int32_t *ids = NULL;
    int n = fl_tokenize_alloc(tok, text, len, add_special, a->parse_special, &ids);
    if (n < 0) {
        fprintf(stderr, "faultline tokenize: %s: cannot tokenize the text: %s\n", a->model,
                n == -EILSEQ ? "a byte has neither a byte token nor an unknown token" : strerror(-n));
        return 1;
    }
    print_tokens(a, tok, ids, n);
    free(ids);
    return fflush(stdout) ? 1 : 0;
}

int cli_tokenize(int argc, char **argv)
{
    struct tok_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    char *text = NULL;
    size_t len = 0;
    if (get_text(&a, &text, &len))
        return 1;
    struct gguf_file *f = NULL;
    struct fl_tokenizer *tok = NULL;
    struct fl_err err;
    if (gguf_open(a.model, &f, &err) || fl_tokenizer_load(f, &tok, &err)) {
        fprintf(stderr, "faultline tokenize: %s\n", err.msg);
        rc = 1;
    } else {
        if (fl_tokenizer_warning(tok))
            fprintf(stderr, "faultline tokenize: warning: %s\n", fl_tokenizer_warning(tok));
        rc = tokenize_text(&a, tok, text, len);
    }
    fl_tokenizer_free(tok);
    gguf_close(f);
    free(text);
    return rc;
}

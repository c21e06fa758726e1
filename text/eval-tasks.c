/* eval-tasks.c: see eval-tasks.h. */
#include "text/eval-tasks.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Room for one more entry of size bytes in *v (n used, *cap allocated). */
static int grow(void **v, int n, int *cap, size_t size)
{
    if (n < *cap)
        return 0;
    void *g = realloc(*v, size * (size_t)(*cap = *cap ? 2 * *cap : 256));
    if (!g)
        return -ENOMEM;
    *v = g;
    return 0;
}

/* Every line as std::getline splits it (the last one too, without a
 * newline after it), cut in place: pointers into text. */
static int split_lines(char *text, size_t len, char ***out)
{
    int n = 0, cap = 0;
    char **lines = NULL;
    for (size_t at = 0; len && at <= len;) {
        char *nl = memchr(text + at, '\n', len - at);
        const size_t end = nl ? (size_t)(nl - text) : len;
        if (grow((void **)&lines, n, &cap, sizeof(*lines))) {
            free(lines);
            return -ENOMEM;
        }
        text[end] = 0;
        lines[n++] = text + at;
        at = end + 1;
        if (!nl)
            break;
    }
    *out = lines;
    return n;
}

int fl_hellaswag_parse(char *text, size_t len, struct fl_hellaswag_task **out,
                       struct fl_err *err)
{
    *out = NULL;
    if (len && text[len - 1] == '\n')
        text[--len] = 0;
    char **l = NULL;
    const int n_lines = split_lines(text, len, &l);
    if (n_lines < 0)
        return fl_err_set(err, -ENOMEM, "out of memory");
    if (n_lines == 0 || n_lines % 6) {
        free(l);
        return fl_err_set(err, -EINVAL, "the file has %d lines, not a multiple of 6 (HellaSwag's "
                          "context, gold index and four endings a task)", n_lines);
    }
    struct fl_hellaswag_task *t = malloc(sizeof(*t) * (size_t)(n_lines / 6));
    int rc = t ? 0 : fl_err_set(err, -ENOMEM, "out of memory");
    for (int i = 0; !rc && i < n_lines / 6; i++) {
        char *const *q = l + 6 * i, *end;
        const long gold = strtol(q[1], &end, 10);
        if (end == q[1] || *end || gold < 0 || gold > 3)
            rc = fl_err_set(err, -EINVAL, "line %d: the gold ending's index is '%.40s', not 0-3",
                            6 * i + 2, q[1]);
        t[i] = (struct fl_hellaswag_task){ .context = q[0], .ending = { q[2], q[3], q[4], q[5] },
                                           .gold = (int)gold, .line = 6 * i + 1 };
    }
    free(l);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return n_lines / 6;
}

/* A CSV line as llama.cpp reads it: the first four commas outside quotes;
 * a quoted sentence loses its quotes; one '_' splits it. 0, or -1 to skip. */
static int winogrande_line(char *line, struct fl_winogrande_task *w)
{
    char *comma[4];
    int n = 0;
    bool quoted = false;
    for (char *c = line; *c && n < 4; c++) {
        if (quoted)
            quoted = *c != '"';
        else if (*c == ',')
            comma[n++] = c;
        else if (*c == '"')
            quoted = true;
    }
    if (n != 4)
        return -1;
    char *sentence = comma[0] + 1, *send = comma[1];
    if (*sentence == '"') /* llama.cpp drops the quote and the byte before the comma */
        sentence++, send--;
    if (send < sentence)
        return -1;
    char *end;
    const long answer = strtol(comma[3] + 1, &end, 10);
    char *blank = memchr(sentence, '_', (size_t)(send - sentence));
    if (!blank || end == comma[3] + 1 || answer < 1 || answer > 2)
        return -1;
    *send = *blank = *comma[2] = *comma[3] = 0;
    *w = (struct fl_winogrande_task){ .first = sentence, .second = blank + 1,
                                      .choice = { comma[1] + 1, comma[2] + 1 },
                                      .answer = (int)answer };
    return 0;
}

int fl_winogrande_parse(char *text, size_t len, struct fl_winogrande_task **out, int *skipped,
                        int *first_skip)
{
    if (len && text[len - 1] == '\n') /* as llama.cpp's -f */
        text[--len] = 0;
    int n = 0, cap = 0, line_no = 0;
    struct fl_winogrande_task *w = NULL;
    *out = NULL;
    *skipped = *first_skip = 0;
    for (char *at = text, *nl; (nl = memchr(at, '\n', len - (size_t)(at - text))); at = nl + 1) {
        *nl = 0;
        line_no++;
        if (grow((void **)&w, n, &cap, sizeof(*w))) {
            free(w);
            return -ENOMEM;
        }
        if (winogrande_line(at, &w[n]) == 0)
            w[n++].line = line_no;
        else if ((*skipped)++ == 0)
            *first_skip = line_no;
    }
    *out = w;
    return n;
}

/* ---- --multiple-choice's binary file ------------------------------------ */

static bool rd_u32(const uint8_t *buf, size_t len, uint64_t *at, uint32_t *v)
{
    if (*at > len || len - *at < 4)
        return false;
    memcpy(v, buf + *at, 4);
    *at += 4;
    return true;
}

static bool rd_str(const uint8_t *buf, size_t len, uint64_t *at, char **s)
{
    uint32_t n;
    if (!rd_u32(buf, len, at, &n) || len - *at < n || !(*s = malloc((size_t)n + 1)))
        return false;
    memcpy(*s, buf + *at, n);
    (*s)[n] = 0;
    *at += n;
    return true;
}

int fl_mc_header(const uint8_t *buf, size_t len, uint32_t **pos, struct fl_err *err)
{
    uint64_t at = 0;
    uint32_t n;
    *pos = NULL;
    if (!rd_u32(buf, len, &at, &n) || n == 0)
        return fl_err_set(err, -EINVAL, "no tasks (a multiple-choice file starts with their count)");
    if ((uint64_t)n > (len - 4) / 4 || n > (1u << 30))
        return fl_err_set(err, -EINVAL, "%u tasks, but the file is %zu bytes", n, len);
    if (!(*pos = malloc(sizeof(uint32_t) * n)))
        return fl_err_set(err, -ENOMEM, "out of memory");
    memcpy(*pos, buf + 4, sizeof(uint32_t) * n);
    return (int)n;
}

/* One answer set: count, strings, labels. */
static int read_answers(const uint8_t *buf, size_t len, uint64_t *at, struct fl_mc_task *t,
                        bool keep)
{
    uint32_t n;
    if (!rd_u32(buf, len, at, &n))
        return -EINVAL;
    if (n > FL_MC_MAX_ANSWERS)
        return -E2BIG;
    char **a = calloc(n ? n : 1, sizeof(char *));
    int32_t *l = malloc(sizeof(int32_t) * (n ? n : 1));
    bool ok = a && l;
    for (uint32_t i = 0; ok && i < n; i++)
        ok = rd_str(buf, len, at, &a[i]);
    ok = ok && *at <= len && (len - *at) / 4 >= n;
    if (ok) {
        memcpy(l, buf + *at, sizeof(int32_t) * n);
        *at += 4 * (uint64_t)n;
    }
    if (ok && keep) {
        t->n_answers = (int)n;
        t->answer = a;
        t->label = l;
        return 0;
    }
    for (uint32_t i = 0; a && i < n; i++)
        free(a[i]);
    free(a);
    free(l);
    return ok ? 0 : -EINVAL;
}

int fl_mc_task_at(const uint8_t *buf, size_t len, uint64_t at, struct fl_mc_task *t,
                  struct fl_err *err)
{
    memset(t, 0, sizeof(*t));
    const uint64_t start = at;
    int rc = rd_str(buf, len, &at, &t->question) ? 0 : -EINVAL;
    if (!rc)
        rc = read_answers(buf, len, &at, t, true);
    if (!rc)
        rc = read_answers(buf, len, &at, t, false); /* mc2: read past, as llama.cpp */
    if (rc)
        fl_mc_task_free(t);
    if (rc == -E2BIG)
        return fl_err_set(err, -EINVAL, "the task at byte %llu has more than %d answers",
                          (unsigned long long)start, FL_MC_MAX_ANSWERS);
    return rc ? fl_err_set(err, -EINVAL, "the task at byte %llu runs past the end of the file",
                           (unsigned long long)start) : 0;
}

void fl_mc_task_free(struct fl_mc_task *t)
{
    for (int i = 0; t->answer && i < t->n_answers; i++)
        free(t->answer[i]);
    free(t->answer);
    free(t->label);
    free(t->question);
    memset(t, 0, sizeof(*t));
}

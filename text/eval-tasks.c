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

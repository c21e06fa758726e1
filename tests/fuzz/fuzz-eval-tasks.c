/* fuzz-eval-tasks: libFuzzer target for the HellaSwag, Winogrande and
 * multiple-choice data file readers (text/eval-tasks.h), all fed every
 * input. Whatever they accept must hold together: gold indexes 0-3 and
 * answers 1-2, every string inside the text and without a newline, lines
 * in file order; a multiple-choice task read at each recorded offset has
 * 0-100 answers, each a string of its own. A broken contract aborts, which
 * libFuzzer reports as a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/eval-tasks.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz-eval-tasks: %s\n", what);
    abort();
}

/* s lies in buf[0..n] and ends there without a newline. */
static void check_str(const char *s, const char *buf, size_t n)
{
    if (s < buf || s > buf + n)
        die("a string outside the text");
    const size_t len = strlen(s);
    if (s + len > buf + n || memchr(s, '\n', len))
        die("a string past the text or holding a newline");
}

static char *copy(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        die("out of memory");
    memcpy(buf, data, size);
    buf[size] = 0;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = copy(data, size);
    struct fl_hellaswag_task *h = NULL;
    struct fl_err err = { { 0 } };
    const int nh = fl_hellaswag_parse(buf, size, &h, &err);
    if (nh < 0 && (!err.msg[0] || strchr(err.msg, '\n')))
        die("a refusal without a one-line message");
    for (int i = 0; i < nh; i++) {
        if (h[i].gold < 0 || h[i].gold > 3 || h[i].line != 6 * i + 1)
            die("a HellaSwag task out of range");
        check_str(h[i].context, buf, size);
        for (int e = 0; e < 4; e++)
            check_str(h[i].ending[e], buf, size);
    }
    free(h);
    free(buf);

    buf = copy(data, size);
    struct fl_winogrande_task *w = NULL;
    int skipped, first_skip;
    const int nw = fl_winogrande_parse(buf, size, &w, &skipped, &first_skip);
    if (nw < 0 || skipped < 0 || (skipped > 0) != (first_skip > 0))
        die("Winogrande counts out of range");
    for (int i = 0; i < nw; i++) {
        if (w[i].answer < 1 || w[i].answer > 2 || w[i].line < 1 ||
            (i > 0 && w[i].line <= w[i - 1].line))
            die("a Winogrande task out of range");
        check_str(w[i].first, buf, size);
        check_str(w[i].second, buf, size);
        check_str(w[i].choice[0], buf, size);
        check_str(w[i].choice[1], buf, size);
    }
    free(w);
    free(buf);

    uint32_t *pos = NULL;
    const int nm = fl_mc_header(data, size, &pos, &err);
    if (nm == 0 || (nm < 0 && (!err.msg[0] || strchr(err.msg, '\n'))))
        die("a multiple-choice header without tasks or a one-line refusal");
    for (int i = 0; i < nm && i < 64; i++) {
        struct fl_mc_task t;
        if (fl_mc_task_at(data, size, pos[i], &t, &err) == 0) {
            if (!t.question || t.n_answers < 0 || t.n_answers > FL_MC_MAX_ANSWERS)
                die("a multiple-choice task out of range");
            for (int a = 0; a < t.n_answers; a++)
                if (!t.answer[a] || strlen(t.answer[a]) > size)
                    die("an answer longer than the file");
        }
        fl_mc_task_free(&t);
    }
    free(pos);
    return 0;
}

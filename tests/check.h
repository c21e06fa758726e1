/* check.h: the assertion macro every test suite shares. Header-only, one
 * failure counter per test program (each test is its own executable).
 *
 * CHECK(cond, fmt, ...) counts a failure and prints "FAIL file:line: msg"
 * without stopping, so one run reports every broken expectation.
 * Define CHECK_OUT (e.g. stderr) before including to pick the stream. */
#ifndef FL_TESTS_CHECK_H
#define FL_TESTS_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef CHECK_OUT
#define CHECK_OUT stdout
#endif

static int failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(CHECK_OUT, "FAIL %s:%d: ", __FILE__, __LINE__);        \
            fprintf(CHECK_OUT, __VA_ARGS__);                               \
            fputc('\n', CHECK_OUT);                                        \
        }                                                                  \
    } while (0)

/* Prints the suite's verdict and returns main's exit status. */
static inline int check_summary(const char *suite)
{
    if (failures)
        fprintf(CHECK_OUT, "%s: %d check(s) FAILED\n", suite, failures);
    else
        printf("%s: all checks passed\n", suite);
    return failures ? 1 : 0;
}

/* A whole file, malloc'ed and NUL-terminated (so text can be used as a
 * string); *len (when len is not NULL) gets its size. NULL when it cannot
 * be read. */
static inline char *check_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return b;
}

/* Marsaglia's xorshift64 step (13, 7, 17): the seeded, platform-independent
 * stream tests draw random inputs from; each test keeps its own state and
 * maps the output to the range it needs. */
static inline uint64_t check_xorshift64(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

#endif

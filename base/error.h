/* fl-error.h: how errors travel in faultline.
 *
 * Functions return 0 (or a count) on success and a negative errno on failure,
 * as liburing does. Where a caller needs to say *what* went wrong, the function
 * also takes a `struct fl_err *` and writes one line into it: the file, the
 * problem and, for parsers, the byte offset. Nothing deep inside prints; the
 * CLI prints err.msg once and exits non-zero. */
#ifndef FL_ERROR_H
#define FL_ERROR_H

#include <stdarg.h>
#include <stdio.h>

struct fl_err {
    char msg[512];
};

/* Formats one line into err (when err is non-NULL) and returns code, so a
 * failing path reads `return fl_err_set(err, -EINVAL, "%s: ...", path);`. */
static inline __attribute__((format(printf, 3, 4)))
int fl_err_set(struct fl_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

#endif

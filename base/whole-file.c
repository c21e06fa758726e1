/* whole-file.c: see base/whole-file.h. */
#include "base/whole-file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int fl_read_whole_file(const char *path, size_t max, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    /* grown as read rather than sized by stat: pipes and /proc report 0 */
    size_t cap = 0, n = 0;
    char *b = NULL;
    int rc = 0;
    for (;;) {
        if (n + 1 >= cap) {
            size_t want = cap ? 2 * cap : 8192;
            char *nb = realloc(b, want);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            b = nb;
            cap = want;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (n > max) {
            rc = -EFBIG;
            break;
        }
        if (got == 0) {
            rc = ferror(f) ? -EIO : 0;
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(b);
        return rc;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

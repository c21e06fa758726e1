#include "base/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static int suffix_shift(const char *s, int *shift)
{
    static const char units[] = "KMGT";
    if (*s == '\0') {
        *shift = 0;
        return 0;
    }
    const char *u = NULL;
    for (int i = 0; units[i]; i++)
        if (toupper((unsigned char)*s) == units[i])
            u = &units[i];
    if (!u) {
        if (!strcasecmp(s, "b")) {
            *shift = 0;
            return 0;
        }
        return -EINVAL;
    }
    s++;
    if (*s && strcasecmp(s, "i") && strcasecmp(s, "b") && strcasecmp(s, "ib"))
        return -EINVAL;
    *shift = 10 * (int)(u - units + 1);
    return 0;
}

int fl_parse_size(const char *text, uint64_t *out)
{
    if (!text || !isdigit((unsigned char)text[0]))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    int shift = 0;
    if (errno || end == text || suffix_shift(end, &shift))
        return -EINVAL;
    double bytes = ldexp(value, shift);
    if (!(bytes >= 0) || bytes >= 18446744073709551616.0)
        return -EINVAL;
    *out = (uint64_t)bytes;
    return 0;
}

const char *fl_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *names[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, names[i]);
    return buf;
}

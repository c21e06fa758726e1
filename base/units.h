/* units.h: byte sizes as people write them on command lines ("48G", "512M",
 * "1.5GiB", "123456") and as faultline prints them. Powers of 1024 throughout,
 * as llama.cpp and the kernel's own tools use. */
#ifndef FL_UNITS_H
#define FL_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses a size: a non-negative number (decimals allowed) with an optional
 * suffix K, M, G, T (optionally followed by "i", "B" or "iB", any case).
 * Returns 0, or -EINVAL for anything else or a value that overflows. */
int fl_parse_size(const char *text, uint64_t *out);

/* Formats bytes as "1.50 GiB" into buf; returns buf. */
const char *fl_format_size(uint64_t bytes, char *buf, size_t len);

#endif

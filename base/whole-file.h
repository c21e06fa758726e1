/* whole-file.h: reading a small outside file (prompts, profiles, reference
 * data) into memory in one call. */
#ifndef FL_WHOLE_FILE_H
#define FL_WHOLE_FILE_H

#include <stddef.h>

/* Reads all of path into a malloc'ed buffer with a NUL after the last byte
 * (*len excludes it). Works on pipes and /proc files as well as regular
 * files. -errno from open/read, -EFBIG past max bytes, -ENOMEM. */
int fl_read_whole_file(const char *path, size_t max, char **buf, size_t *len);

#endif

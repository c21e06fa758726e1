/* trace-file.h: the file a saved trace lives in, plain or gzip (zlib).
 *
 * A trace of a long run is mostly its event stream (0.6 MB per second of a
 * paged decode, docs/trace.md), which gzip makes ten times smaller: a name
 * ending in ".gz" is written compressed. Reading inflates any file that
 * starts with gzip's magic, whatever its name, so a renamed or piped trace
 * still loads. */
#ifndef FL_TRACE_FILE_H
#define FL_TRACE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Whether path names a gzip file (ends in ".gz"). */
bool tr_file_is_gz_name(const char *path);

/* A new file at path for writing, through zlib when gz (callers pass
 * tr_file_is_gz_name of the name the file will end up with):
 * the FILE compresses what it is given, and fclose finishes the gzip stream
 * (its result is the write's: EOF when the stream could not be finished).
 * NULL with *rc = -errno. */
FILE *tr_file_create(const char *path, bool gz, int *rc);

/* All of path in a malloc'ed buffer with a NUL after the last byte (*len
 * excludes it), inflated when the file is gzip. -errno from open/read,
 * -EFBIG past max bytes (inflated), -EINVAL for a damaged or truncated gzip
 * stream, -ENOMEM. */
int tr_file_read(const char *path, size_t max, char **buf, size_t *len);

#endif

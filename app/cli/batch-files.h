/* batch-files.h: the output file of `faultline batch` — what a previous
 * run finished, and lines appended so that a crash never corrupts one.
 *
 * Every result is one line written with one append (O_APPEND); a process
 * killed in the middle of a write leaves at most a partial last line, which
 * the next run cuts off before it appends. The lines already there say
 * which requests are done: their custom_id, or for an input line that had
 * none, its "line" number. */
#ifndef FL_CLI_BATCH_FILES_H
#define FL_CLI_BATCH_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"

struct batch_out {
    int fd;
    json_t *done_ids;   /* custom_id -> true: finished in an earlier run */
    json_t *done_lines; /* "N" -> true: id-less input lines answered */
    int n_done;
    int64_t cut_bytes;  /* a partial last line removed at open */
    int bad_lines;      /* earlier lines that are not JSON objects (kept) */
};

/* Opens (creates) path for appending after reading what is done; refuses
 * an output that is one of the inputs (same file) or a GGUF model. 0 or
 * -errno with "PATH: problem" in err. */
int batch_out_open(struct batch_out *o, const char *path, const char *const *inputs, int n_inputs,
                   struct fl_err *err);
void batch_out_close(struct batch_out *o);

/* Whether an earlier run finished custom_id (NULL: input line line_no). */
bool batch_out_is_done(const struct batch_out *o, const char *custom_id, int line_no);

/* Appends v as one line (takes v's reference). 0 or -errno. */
int batch_out_write(struct batch_out *o, json_t *v);

#endif

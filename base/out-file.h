/* out-file.h: the files a command writes appear whole or not at all.
 *
 * A command claims each output before its work starts (fl_out_begin):
 * that checks the output would not replace one of the command's inputs
 * (same inode, whatever the path says) nor an existing GGUF model unless
 * forced, and creates a temporary file beside it, in the same folder, so a
 * folder that does not exist or cannot be written fails at once and not
 * after an hour of work. The command writes to o->tmp; fl_out_commit
 * renames it over the final name (atomic on one file system), fl_out_abort
 * removes it. Temporary files of claims still open are listed where a
 * signal handler can remove them (fl_out_remove_pending), so Ctrl-C or
 * SIGTERM leaves neither a partial file under the final name nor a
 * temporary one beside it. A device or pipe (/dev/null, /dev/stdout) is
 * written in place; through a symbolic link, the file it names is
 * replaced (the link stays). */
#ifndef FL_OUT_FILE_H
#define FL_OUT_FILE_H

#include <limits.h>
#include <stdbool.h>

#include "base/error.h"

struct fl_out {
    char path[PATH_MAX]; /* the final name */
    char tmp[PATH_MAX];  /* where to write until fl_out_commit; "" when not claimed */
    int slot;            /* in the pending table; -1 when none */
    bool direct;         /* a device or pipe: written in place (tmp = path) */
};

/* The most claims open at once (per process). */
#define FL_OUT_MAX_PENDING 8

/* Claims path (see above). inputs: the command's input files (NULL entries
 * are skipped); force: an existing GGUF file may be replaced. Returns 0,
 * -EEXIST (would replace an input, or a GGUF model without force), -errno
 * from creating the temporary file, -ENAMETOOLONG, -EMFILE (too many
 * claims open); err says which path and why in one line. */
int fl_out_begin(struct fl_out *o, const char *path, const char *const *inputs, int n_inputs,
                 bool force, struct fl_err *err);

/* Renames the temporary file over the final name (after the writer closed
 * it) and ends the claim. -errno with err on failure (the temporary file
 * is removed then). */
int fl_out_commit(struct fl_out *o, struct fl_err *err);

/* Removes the temporary file and ends the claim; a claim never begun or
 * already ended is fine (o zeroed with slot -1, or after commit). */
void fl_out_abort(struct fl_out *o);

/* A claim that was never begun: abort and commit are no-ops on it. */
#define FL_OUT_NONE { .path = "", .tmp = "", .slot = -1, .direct = false }

/* Unlinks the temporary files of every open claim. Async-signal-safe: for
 * signal handlers just before the process exits. */
void fl_out_remove_pending(void);

/* Whether path names an existing file that starts with GGUF's magic. */
bool fl_out_is_gguf(const char *path);

#endif

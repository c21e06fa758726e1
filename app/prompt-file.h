/* prompt-file.h: a prompt's start kept in a file across runs, as
 * llama-completion's --prompt-cache keeps it (record/prompt-state.h's FLPS
 * files: the KV rows, and a recurrent model's state, exactly as the cache
 * held them).
 *
 * faultline's promise holds here too: a run that reads a file gives the
 * logits a run without it gives, bit for bit. So only positions whose rows
 * are those a fresh run computes are kept and read (app/prompt-cache.h's
 * rule: whole units of lcm(-b, 16) positions from the start, a recurrent
 * model's all or none), and a file is read only by a session of the same
 * model file and the same settings that decide those bits (the signatures
 * below); any other gets a one-line refusal, never a wrong answer. */
#ifndef FL_PROMPT_FILE_H
#define FL_PROMPT_FILE_H

#include <stdint.h>

#include "app/session.h"
#include "base/error.h"
#include "base/out-file.h"
#include "record/prompt-state.h"

/* Opens path for session s: its tokens in r->tokens / r->n_tokens.
 * -ENOENT when there is no such file; -EINVAL (one line in err) when it is
 * not a prompt state of this model under these settings, or is damaged;
 * -ENOTSUP with a GPU (its cache is in VRAM); -errno. Close with
 * flps_close. */
int eng_prompt_file_open(struct eng_session *s, const char *path, struct flps_reader *r,
                         struct fl_err *err);
/* Reads r's body: its first n_keep positions into the empty sequence seq
 * (for sequence 0: n_past), the rest read for the checksum and dropped.
 * A failure (also a checksum that differs) leaves seq empty. */
int eng_prompt_file_load(struct eng_session *s, struct flps_reader *r, int seq, int n_keep,
                         struct fl_err *err);
/* Writes sequence seq's first n positions, whose tokens are tokens[0..n),
 * into out's temporary file and commits it (out was claimed with
 * fl_out_begin): 0, or -errno with err (the claim is then aborted). */
int eng_prompt_file_save(const struct eng_session *s, int seq, const int32_t *tokens, int n,
                         struct fl_out *out, struct fl_err *err);

#endif

/* prompt-cache.h: prompts' prefixes kept in the KV cache for later
 * requests (llama-server's cache_prompt), without changing a bit.
 *
 * A chat's next turn, an agent's next call, a batch's shared instructions:
 * a new prompt often starts with tokens an earlier request already ran. The
 * KV rows of those positions can be shared (model/kv-cache.h's whole-block
 * sharing) instead of computed again. faultline's promise is that a
 * request's logits are the same bits however it runs, so only positions
 * whose rows are the bits a fresh run would compute are reused: the backends
 * may choose their arithmetic by the length of a position's span (docs/
 * batching.md), and a fresh run cuts a prompt into chunks at multiples of
 * n_batch from its start. So the rows of a whole chunk [k*n_batch,
 * (k+1)*n_batch) of a prompt are a fresh run's rows for every prompt that
 * starts with those tokens; those of a last, shorter chunk or of generated
 * tokens (spans of 1) are not. A prefix is thus reused in units of
 * lcm(n_batch, ENG_KV_BLOCK) positions, and the rest of the prompt is run
 * in chunks from there, as a fresh run would.
 *
 * A recurrent model's state (Qwen3-Next, Qwen3.5) sums every position and
 * cannot be cut back, so its entries are read whole: an entry holds the
 * state at its end (eng_session_seq_share copies it), a prompt that starts
 * with all of an entry's tokens reads them, and no shorter part of one is
 * used. The scheduler keeps such an entry when a prompt's last whole unit
 * has just run (the state is there then), not when the request ends.
 *
 * Entries are the session's held sequences (eng_session_n_held): each
 * holds one prefix's cells and tokens; the least recently used goes first
 * when an entry or a cell is needed. An entry whose tokens start another
 * entry's is dropped (the longer one holds its cells too). Not
 * thread-safe: the scheduler's thread uses it. */
#ifndef FL_PROMPT_CACHE_H
#define FL_PROMPT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "app/session.h"
#include "base/error.h"

struct eng_pcache;

/* Held entries of s (none when eng_session_n_held is 0: then every call
 * below finds nothing and keeps nothing). -ENOMEM. */
int eng_pcache_create(struct eng_session *s, struct eng_pcache **out, struct fl_err *err);
/* Gives every entry's cells back. */
void eng_pcache_free(struct eng_pcache *pc);

/* Of a prompt's first n_done positions (run in chunks from 0), how many a
 * later prompt may reuse: whole units. */
int eng_pcache_reusable(const struct eng_pcache *pc, int n_done);
/* How many positions of prompt (n tokens) may be read from a sequence
 * holding tokens[0 .. n_have-1]: the common start, less the prompt's last
 * token (its logits are needed), in whole units; for a recurrent model
 * n_have (a whole unit count) or 0. */
int eng_pcache_usable(const struct eng_pcache *pc, const int32_t *have, int n_have,
                      const int32_t *prompt, int n);

/* Whether entries are read whole (a recurrent model). */
bool eng_pcache_whole(const struct eng_pcache *pc);

/* The entry that holds most of prompt's start: its sequence in *seq and
 * the positions usable (0: none; *seq is then -1). */
int eng_pcache_match(struct eng_pcache *pc, const int32_t *prompt, int n, int *seq);
/* Entry seq was read (it goes after the others); other ids are ignored. */
void eng_pcache_used(struct eng_pcache *pc, int seq);
/* Keeps the first n positions of sequence seq, whose tokens they are, in
 * an entry (before seq gives its cells back); n a multiple of the unit.
 * Nothing when an entry holds them already or none can be had. */
void eng_pcache_keep(struct eng_pcache *pc, int seq, const int32_t *tokens, int n);
/* Drops the least recently used entry that gives cells back (holds blocks
 * no running request shares); false when there is none. */
bool eng_pcache_evict(struct eng_pcache *pc);
/* Cells dropping every entry would give back, at least. */
int eng_pcache_owned(const struct eng_pcache *pc);

/* --- slots (serve's /slots/{id}?action=save|restore|erase) ---------------------
 * llama-server saves and restores "a slot's prompt cache". Here entries are
 * not a slot's, but each remembers the running sequence (the slot) whose
 * request kept it last, or that a file was read back for; a slot's prompt
 * cache is the newest of those. */
/* Sequence `from`'s newest entry: its positions (0: none), its held
 * sequence in *seq (-1: none) and its tokens. */
int eng_pcache_of(const struct eng_pcache *pc, int from, int *seq, const int32_t **tokens);
/* Drops every entry of sequence `from`: the positions they held. */
int eng_pcache_forget(struct eng_pcache *pc, int from);
/* An entry for sequence `from` holding tokens[0, n) (whole units: -EINVAL
 * otherwise), whose cells fill (a prompt-state file's body) writes into
 * the empty held sequence it is given; room is made by dropping the least
 * recently used entries. fill's error leaves no entry. -ENOTSUP when the
 * cache holds no entries. */
typedef int (*eng_pcache_fill_fn)(void *arg, int seq, struct fl_err *err);
int eng_pcache_put(struct eng_pcache *pc, int from, const int32_t *tokens, int n,
                   eng_pcache_fill_fn fill, void *arg, struct fl_err *err);

struct eng_pcache_stats {
    int entries;     /* held now */
    int64_t tokens;  /* positions the entries hold (shared ones counted once per entry) */
    uint64_t evicted;
};
void eng_pcache_get_stats(const struct eng_pcache *pc, struct eng_pcache_stats *out);

#endif

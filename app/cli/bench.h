/* bench.h: `faultline bench`'s options, parsed by bench-args.c and run by
 * bench.c. */
#ifndef FL_CLI_BENCH_H
#define FL_CLI_BENCH_H

#include <stdint.h>

#include "app/cli/bench-output.h"
#include "app/session.h"

#define BENCH_MAX_LIST 64

/* llama-bench's defaults for the lists the user left out */
#define BENCH_DEF_PROMPT 512
#define BENCH_DEF_GEN 128
#define BENCH_DEF_BATCH 2048
#define BENCH_DEF_UBATCH 512
#define BENCH_DEF_FA (-1) /* auto */

/* -p 64,128 / -t 1-4: a list of values, in the order given */
struct bench_list {
    int v[BENCH_MAX_LIST];
    int n;
};

struct bench_opts {
    struct eng_session_params sp;
    /* llama-bench's lists: every combination of batch, ubatch, fa and
     * threads runs every prompt and generation length. threads empty: the
     * session's default. */
    struct bench_list n_prompt, n_gen, batch, ubatch, fa, threads;
    struct bench_list depth;         /* -d: tokens already in the cache when a test starts */
    int reps;
    enum bench_format format;
    /* md's optional columns: a list other than llama-bench's default */
    bool col_batch, col_ubatch, col_fa;
    struct bench_list npp, ntg, npl; /* any given: the batched mode */
    int seed;                        /* --seed: the random token ids' stream */
    uint64_t disk_bw;                /* --disk-bw: bytes/s, for the I/O bound column */
};

/* Fills *o from the command line. -1: run; otherwise the exit status (0
 * after --help, 2 for a command-line mistake, said in one line). */
int bench_parse(int argc, char **argv, struct bench_opts *o);

#endif

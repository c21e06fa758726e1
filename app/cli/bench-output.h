/* bench-output.h: `faultline bench`'s results in llama-bench's formats —
 * its markdown table (md), and csv, json and jsonl with llama-bench's field
 * names and types for the fields that apply to faultline. One printer per
 * run: bench_out_begin, a bench_out_row per test as it ends, bench_out_end. */
#ifndef FL_CLI_BENCH_OUTPUT_H
#define FL_CLI_BENCH_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf/tensor-types.h"

#include "base/error.h"

enum bench_format { BENCH_MD = 0, BENCH_CSV, BENCH_JSON, BENCH_JSONL };

/* "md", "csv", "json", "jsonl"; false for anything else. */
bool bench_format_parse(const char *s, enum bench_format *out);

/* What every row says about the model and the machine. */
struct bench_model {
    const char *filename;           /* as given to -m */
    char type[160];                 /* llama-bench's model_type: "qwen3moe 30B.A3B Q4_K - Medium" */
    uint64_t size, n_params, n_active; /* tensor bytes, parameters, of those per token */
    const char *backend;            /* "CPU" or "CUDA" */
    char cpu_info[128];             /* /proc/cpuinfo's model name */
};

/* One test's results: samples_ns[reps], one per repetition. */
struct bench_result {
    int n_prompt, n_gen;            /* ppN: n_gen 0; tgN: n_prompt 0 */
    int n_depth;                    /* tokens in the cache before the test (-d) */
    int n_batch, n_ubatch, n_threads;
    int flash_attn;                 /* llama.cpp's values: -1 auto, 0 off, 1 on */
    enum fl_type type_k, type_v;    /* the KV cache's (-ctk/-ctv) */
    char test_time[32];             /* RFC 3339, UTC, when the test started */
    int reps;
    const uint64_t *samples_ns;
};

struct bench_printer {
    enum bench_format format;
    const struct bench_model *model;
    /* md: the columns llama-bench adds when a flag is given (n_batch,
     * n_ubatch, type_k, type_v, fa) */
    bool col_batch, col_ubatch, col_type_k, col_type_v, col_fa;
    json_t *rows;                   /* json: the rows, written at the end as one array */
    int rows_done;                  /* rows printed (csv's header goes before the first) */
};

int bench_out_begin(struct bench_printer *p, struct fl_err *err);
int bench_out_row(struct bench_printer *p, const struct bench_result *r, struct fl_err *err);
int bench_out_end(struct bench_printer *p, struct fl_err *err);
/* Frees what the printer holds (after an error too). */
void bench_out_free(struct bench_printer *p);

/* The CPU's name for cpu_info ("" when /proc/cpuinfo does not say). */
void bench_cpu_info(char *buf, size_t cap);

#endif

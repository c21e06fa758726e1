/* engine-args.h: option parsing shared by run, eval and bench. Values are
 * checked (numbers must parse completely and lie in range) and a bad option
 * is one line on stderr. */
#ifndef FL_CLI_ENGINE_ARGS_H
#define FL_CLI_ENGINE_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Whether option a is the short or the long form (either may be NULL). */
bool eng_arg_is(const char *a, const char *short_form, const char *long_form);

/* Parses argv[*i + 1] as an integer in [lo, hi] into *out and advances *i.
 * Returns false (message printed, naming cmd and the option) otherwise. */
bool eng_arg_int(const char *cmd, int argc, char **argv, int *i, long lo, long hi, int *out);
bool eng_arg_float(const char *cmd, int argc, char **argv, int *i, double lo, double hi,
                   float *out);
bool eng_arg_str(const char *cmd, int argc, char **argv, int *i, const char **out);

/* Takes a session flag (placement, paging, NUMA: see eng_session_parse_flag).
 * Returns 1 when taken, 0 when not a session flag, -1 after printing a bad
 * value's message. */
struct eng_session_params;
int eng_arg_session(const char *cmd, int argc, char **argv, int *i,
                    struct eng_session_params *sp);

/* llama.cpp flags a switching user types whose meaning here is a note
 * more than a setting (eng_args_finish says what each means, once). */
struct eng_compat {
    int batch;              /* -b/--batch-size: llama.cpp's logical batch; 0 unset */
    int ubatch;             /* -ub/--ubatch-size: tokens per forward call; 0 unset */
    int threads_batch;      /* -tb/--threads-batch; 0 unset */
    const char *flash_attn; /* -fa/--flash-attn on|off|auto */
    bool mlock, no_mmap, jinja;
    bool log_disable;       /* --log-disable: no notes or speed lines on stderr */
    uint64_t noted;         /* llama-server switches taken as they are here (bits of a
                             * table in engine-args.c: each gets its note at the end) */
};

/* The options run, eval and bench share: -m/--model, -t/--threads,
 * -c/--ctx-size, -b/--batch-size and the session flags into *sp, plus
 * -p/--prompt TEXT and -f/--file FILE (- for standard input) where the
 * command takes a prompt. A NULL prompt target leaves -p/-f to the command
 * (bench's -p is a token count); with_ctx false leaves -c unknown (bench
 * sizes the context itself). With compat, also -ub/-tb/-fa/--mlock/
 * --no-mmap/--log-disable/--jinja, and -b is llama.cpp's logical batch
 * (the forward call takes min(-b, -ub) tokens); without, -b and -ub both
 * set the tokens per forward call. */
struct eng_common_args {
    struct eng_session_params *sp;
    const char **prompt, **prompt_file;
    bool with_ctx;
    struct eng_compat *compat;
};

/* Takes argv[*i] if it is one of the common options. Returns 1 when taken,
 * 0 when not one of them, -1 after printing a bad value's message. */
int eng_arg_common(const char *cmd, int argc, char **argv, int *i,
                   const struct eng_common_args *t);
/* What ends every command's option loop: eng_arg_common's options, else
 * "unknown option" said. 1 taken, -1 a bad value or not an option. */
int eng_arg_last(const char *cmd, int argc, char **argv, int *i, const struct eng_common_args *t);

/* After the last option: applies -b/-ub, prints the notes compat's flags
 * call for (-fa under -v, --mlock, --no-mmap, -tb) and warns about -t
 * above the CPUs this process may use. Returns 0. */
int eng_args_finish(const char *cmd, const struct eng_common_args *t);

/* After the model is open: warns when -c exceeds its training context
 * (as llama.cpp does; the run goes on), unless the run's rope flags scale
 * the positions to reach it; with --verbose, says the rope those flags
 * gave. */
struct eng_model;
void eng_args_check_ctx(const char *cmd, const struct eng_session_params *sp,
                        const struct eng_model *m);

/* The sampler flags (--temp/--temperature --top-k --top-p --min-p
 * --repeat-penalty --repeat-last-n --presence-penalty --frequency-penalty
 * -s/--seed, and the ones llama.cpp has that faultline refuses with a
 * line saying so) into *s; --seed also sets *seed_given. 1 taken, 0 not
 * one, -1 bad value (said). */
struct fl_sampler_params;
int eng_arg_sampling(const char *cmd, int argc, char **argv, int *i, struct fl_sampler_params *s,
                     bool *seed_given);

/* Reads a whole file (prompt files; "-" is standard input);
 * NUL-terminated, *len without the NUL. NULL with a message on stderr on
 * failure. */
char *eng_read_file(const char *path, size_t *len);

/* The prompt of -p TEXT or -f FILE (exactly one is set): the text and its
 * length; for -f the file read whole into *file_text, which the caller
 * frees (NULL for -p). NULL with a message on stderr when the file cannot
 * be read. */
const char *eng_prompt_text(const char *prompt, const char *prompt_file, char **file_text,
                            size_t *len);

/* Tokenizes a prompt as llama.cpp's tools do (add_special, no special
 * parsing). Returns the count and a malloc'ed array, or -errno with a
 * message printed. */
struct fl_tokenizer;
int eng_tokenize_prompt(const struct fl_tokenizer *tok, const char *text, size_t len,
                        bool parse_special, int32_t **out);

/* The flags of the commands that take requests (batch, serve): -np /
 * --parallel into sp->n_seq, -n / --n-predict into *max_tokens (-1: up to the
 * context; 0 refused), --chat-template into *chat_template, --cache-prompt /
 * --no-cache-prompt into sp->no_prompt_cache, llama-server's reasoning flags
 * into *reasoning (--reasoning-format FMT; -rea / --reasoning on|off|auto and
 * --chat-template-kwargs '{"enable_thinking": BOOL}', whether the model
 * thinks; --reasoning-effort LEVEL, gpt-oss's; --reasoning-budget N and
 * --reasoning-budget-message TEXT), and the sampler flags. 1 taken, 0 not one, -1 bad value (said). */
struct api_reasoning_defaults;
struct eng_request_args {
    struct eng_session_params *sp;
    struct fl_sampler_params *samp;
    bool *seed_given;
    int *max_tokens;
    const char **chat_template;
    struct api_reasoning_defaults *reasoning;
    struct eng_constraint_args *constraint; /* NULL: not taken */
};
int eng_arg_requests(const char *cmd, int argc, char **argv, int *i,
                     const struct eng_request_args *t);
/* The reasoning flags alone (for run: whether and how hard the model
 * thinks: -rea, --chat-template-kwargs, --reasoning-effort). */
int eng_arg_reasoning(const char *cmd, int argc, char **argv, int *i,
                      struct api_reasoning_defaults *r);

/* llama-server's embedding flags: --pooling none|mean|cls|last (enum
 * eng_pooling) and --embd-normalize N (api/embeddings.h). 1 taken, 0 not
 * one, -1 bad value (said). */
int eng_arg_embd(const char *cmd, int argc, char **argv, int *i, int *pooling, int *normalize);

/* llama.cpp's speculative decoding flags (app/speculate.h): --spec-type
 * none|ngram-simple|draft-simple, --spec-ngram-simple-size-n N,
 * --spec-ngram-simple-size-m M, --spec-ngram-simple-min-hits H (taken:
 * ngram-simple reads it not); a draft model's (app/draft-model.h): -md /
 * --model-draft / --spec-draft-model FILE, --spec-draft-n-max N,
 * --spec-draft-n-min N, --spec-draft-p-min P, -td N, -ctkd / -ctvd TYPE.
 * 1 taken, 0 not one, -1 bad value (said). Its placement and device flags
 * are refused with the other flags faultline lacks (eng_arg_last). */
struct eng_spec_params;
int eng_arg_spec(const char *cmd, int argc, char **argv, int *i, struct eng_spec_params *p);

/* --chat-template-file FILE (llama.cpp's): the built-in format whose
 * markers FILE's Jinja text holds, as a name for --chat-template (faultline
 * runs no Jinja). 1 taken, -1 a file it cannot read or a template no
 * built-in format matches (said). */
int eng_arg_chat_template_file(const char *cmd, int argc, char **argv, int *i, const char **name);

/* llama.cpp's constraint flags: -j / --json-schema SCHEMA, -jf /
 * --json-schema-file FILE, --grammar GBNF, --grammar-file FILE (run: every
 * answer is held to it; serve and batch: every request that asks for no
 * format, schema, grammar or tools of its own). eng_arg_constraint takes
 * one (1 taken, 0 not one, -1 bad value, said); eng_constraint_load then
 * reads the file and the JSON and checks the schema (0, or -1 with one
 * line said: two given, a file it cannot read, JSON it cannot parse, a
 * schema it cannot hold). A grammar is compiled once the vocabulary is
 * known (its tokens are the model's). */
struct eng_constraint_args {
    const char *json_schema, *json_schema_file, *grammar, *grammar_file; /* as typed */
    json_t *schema;     /* loaded (owned) */
    char *grammar_text; /* loaded (owned) */
    size_t grammar_len;
};
int eng_arg_constraint(const char *cmd, int argc, char **argv, int *i,
                       struct eng_constraint_args *c);
struct api_constraint_defaults;
/* ... and, given defaults (serve and batch), what requests are held to by
 * default, pointing into c. */
int eng_constraint_load(const char *cmd, struct eng_constraint_args *c,
                        struct api_constraint_defaults *defaults);
void eng_constraint_free(struct eng_constraint_args *c);

/* llama.cpp's -e escapes, in place: backslash followed by n r t ' " or a
 * backslash, and \xHH; any other backslash stays as typed. Returns the new
 * length. */
size_t eng_process_escapes(char *s);

/* The exit status of a command-line mistake (documented in every --help). */
#define ENG_EXIT_USAGE 2

#endif

/* run.h: the parts of `faultline run` — its options (run.c), the token
 * loop that one-shot generation and the conversation share
 * (run-generate.c), and the conversation mode (run-chat.c). */
#ifndef FL_CLI_RUN_H
#define FL_CLI_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app/cli/engine-args.h"
#include "app/session.h"
#include "app/speculate.h"
#include "base/error.h"
#include "base/out-file.h"
#include "text/chat.h"
#include "text/json-mode.h"
#include "text/think-budget.h"
#include "text/sampler.h"

#define RUN_MAX_REVERSE 8
#define RUN_MAX_BIAS 64

struct run_opts {
    struct eng_session_params sp;
    struct fl_sampler_params samp;
    struct eng_compat compat;
    const char *prompt, *prompt_file, *system_prompt, *chat_template;
    const char *reverse[RUN_MAX_REVERSE]; /* -r: stop when the output shows one */
    int n_reverse;
    int n_gen;          /* -n: -1 until end of generation, -2 until the context is full */
    int conversation;   /* -1 auto (a chat format and a terminal), 0 off, 1 on */
    bool chat;          /* --chat / -st: one answer in the chat format */
    bool seed_given, ignore_eos, display_prompt, escape;
    bool special;        /* -sp: control tokens' text is printed too (the prompt's and the answer's) */
    bool verbose_prompt; /* --verbose-prompt: the prompt's tokens on stderr first */
    struct fl_logit_bias bias[RUN_MAX_BIAS]; /* -l TOKEN_ID(+|-)BIAS */
    int n_bias;
    int thinking;       /* -rea / --reasoning, --chat-template-kwargs: -1 the template's
                         * default, 0 enable_thinking=false (text/chat.h) */
    const char *reasoning_effort; /* --reasoning-effort: gpt-oss's (NULL: medium) */
    int keep_reasoning;           /* --chat-template-kwargs' clear_thinking false: 1 */
    int ds_thinking;              /* ... its thinking (DeepSeek V3.1's): 1, -1; 0 not given */
    int think_mode;               /* ... its thinking_mode (MiniMax-M3's): enum fl_chat_think_mode */
    const char *thinking_effort;  /* ... its thinking_effort (Kimi K3's), or NULL */
    int think_budget;             /* --reasoning-budget: -1 none, else the reasoning's tokens
                                   * in a chat answer before </think> is forced */
    const char *think_message;    /* --reasoning-budget-message: forced before it */
    struct eng_constraint_args cons; /* -j / -jf / --grammar / --grammar-file: every answer a
                                      * value of the schema or a sentence of the grammar
                                      * (compiled with the vocabulary) */
    struct fl_schema *schema;        /* ... the schema compiled (run.c owns it) */
    struct eng_spec_params spec;     /* --spec-type ngram-simple ... (app/speculate.h) */
    const char *prompt_cache;        /* --prompt-cache FILE (run-cache.c) */
    bool prompt_cache_ro, prompt_cache_all;
};

enum run_stop {
    RUN_STOP_LIMIT,     /* -n tokens made */
    RUN_STOP_EOG,       /* the model ended its turn */
    RUN_STOP_REVERSE,   /* a -r text appeared */
    RUN_STOP_INTERRUPT, /* Ctrl-C */
    RUN_STOP_CONTEXT,   /* the context is full */
    RUN_STOP_VALUE,     /* the answer is a whole value of the JSON schema (or a sentence of
                         * the grammar that nothing may follow) */
};

/* One sequence's sampling state across prompts and answers. */
struct run_gen {
    struct eng_session *s;
    const struct run_opts *o;
    struct fl_sampler *smp;
    float *logits;           /* the last evaluated position's */
    int n_vocab;
    int32_t *eog;            /* end-of-generation ids (masked by --ignore-eos) */
    int n_eog;
    bool unfed;              /* the last answer's last token is not in the KV yet */
    int32_t unfed_id;
    struct fl_mask_vocab *jv; /* with a JSON schema or a grammar: the vocabulary's pieces, */
    struct fl_grammar *grammar; /* the grammar compiled, */
    struct fl_constraint *cons; /* and the answer so far against either */
    bool think_on;              /* --reasoning-budget in a chat answer: ... */
    struct fl_think_budget think; /* ... its state */
    float *masked;
    char *answer;            /* the text of the current answer */
    size_t answer_len, answer_cap;
    int n_prompt, n_made;    /* of the last feed and the last answer */
    double t_prompt, t_gen;  /* seconds */
    /* speculative decoding (--spec-type): the tokens in the sequence (what a
     * draft is looked up in; n_past of them are), a draft's span's rows not
     * sampled yet and its tokens they check, and the counts */
    bool spec_on;
    int32_t *hist;
    int n_hist, cap_hist;
    float *rows;             /* [1 + ENG_SPEC_DRAFT_MAX][n_vocab] */
    struct eng_drafter *dr;  /* -md: the draft model's drafts (app/draft-model.h), or NULL */
    int32_t draft[ENG_SPEC_DRAFT_MAX];
    int n_draft, at;         /* draft[at .. n_draft) are unchecked; row at+1 is next */
    float *rs_snap;          /* a recurrent model's state before the draft's span, */
    int span_pos0;           /* and where the span starts */
    uint64_t drafted, kept;
};

int run_gen_init(struct run_gen *g, struct eng_session *s, const struct run_opts *o,
                 struct fl_err *err);
/* Chat answers in fmt: --reasoning-budget holds their reasoning (not with
 * a schema or a grammar, whose answers have none). 0 or -errno with err. */
int run_gen_think(struct run_gen *g, enum fl_chat_format fmt, struct fl_err *err);
void run_gen_free(struct run_gen *g);

/* Evaluates n tokens after what the sequence holds (and the last
 * answer's unfed token first); the logits of the last are ready.
 * -ENOSPC when they do not fit the context. */
int run_gen_feed(struct run_gen *g, const int32_t *ids, int n, struct fl_err *err);

/* Tokens the sequence holds already (a prompt cache read their rows): the
 * sampler's penalties and the drafts' history take them as run_gen_feed
 * would. */
int run_gen_skip(struct run_gen *g, const int32_t *ids, int n, struct fl_err *err);

/* --prompt-cache FILE (run-cache.c). run_cache_begin, before anything is
 * shown: FILE claimed (unless --prompt-cache-ro), and the rows it holds of
 * the prompt's start read into the sequence; a file of another model or
 * settings, or damaged, fails here. run_cache_feed: the prompt's n tokens
 * go in as run_gen_feed would take them, the rows read skipped, and the
 * file then holds the prompt's whole units. Same logits as run_gen_feed,
 * bit for bit. run_cache_end after either (also after a failure). */
struct eng_pcache;
struct run_cache {
    struct fl_out out;
    struct eng_pcache *pc;
    int have, n_file; /* positions read from the file; the file's */
};
int run_cache_begin(struct run_gen *g, struct run_cache *c, const int32_t *ids, int n,
                    struct fl_err *err);
/* The file read again for the prompt ids (begin with no prompt checked
 * it: a conversation's first turn comes later). */
int run_cache_read(struct run_gen *g, struct run_cache *c, const int32_t *ids, int n,
                   struct fl_err *err);
int run_cache_feed(struct run_gen *g, struct run_cache *c, const int32_t *ids, int n,
                   struct fl_err *err);
void run_cache_end(struct run_cache *c);

/* Samples, prints (when display) and evaluates up to limit tokens (< 0:
 * no limit); *why says what stopped it. The text is in g->answer. */
int run_gen_answer(struct run_gen *g, int limit, bool display, enum run_stop *why,
                   struct fl_err *err);

/* "prompt: N tokens in ... ; generation: ..." on stderr, for the last feed
 * and answer (nothing under --log-disable). */
void run_gen_print_speed(const struct run_gen *g);

/* How the options ask a conversation to be rendered (-rea off: no
 * thinking; the kwargs), the assistant's opening at its end. */
struct fl_chat_opts run_chat_opts(const struct run_opts *o);
/* The conversation rendered so. */
int run_chat_render(const struct run_opts *o, enum fl_chat_format fmt,
                    const struct fl_chat_msg *msgs, size_t n, char **out);

/* The chat format --chat-template names, else the model's (run.c). */
enum fl_chat_format run_chat_format(struct eng_session *s, const struct run_opts *o);

/* The conversation (-cnv): a REPL in the model's chat format. Returns 0
 * (/exit or end of input), 130 (Ctrl-C at the prompt), or -errno with
 * err. */
int run_chat(struct eng_session *s, const struct run_opts *o, struct fl_err *err);

#endif

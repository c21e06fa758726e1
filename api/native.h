/* native.h: llama-server's own completion API, /completion (and its
 * /completions), beside the OpenAI one of openai.h: the same request with
 * llama-server's fields, and its result objects, whole and streamed.
 *
 * A request is an openai.h completions request (api_request_parse_native
 * marks it native) with llama-server's own fields: "n_predict" (-1: up to
 * the context; 0: the prompt alone, its rows left for the prompt cache),
 * "n_probs" (each generated token's log-probability under the model and
 * its n_probs likeliest, in completion_probabilities), "return_tokens",
 * "samplers" (names or letters; llama.cpp's infill and adaptive_p, which
 * faultline lacks, are left out of the chain), "id_slot"
 * (accepted; a request takes whichever sequence is free). */
#ifndef FL_API_NATIVE_H
#define FL_API_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/openai.h"

/* api_request_parse for a /completion body. "response_fields" (paths of
 * the answer's fields, api_native_pick) picks what the answer holds. */
int api_request_parse_native(json_t *body, struct api_request *out, struct fl_err *err);

/* POST /slots/{id}?action=save|restore (serve/slots.c): the body's
 * "filename", a name by llama-server's rule for one under
 * --slot-save-path: one name (no folders), valid UTF-8 of at most 255
 * bytes, no control characters or characters some file systems forbid (or
 * their look-alikes), no leading or trailing space, no trailing '.', no
 * "..". 0 and *name (inside body), or -EINVAL. */
int api_slot_filename(const json_t *body, const char **name);

/* --- /infill (api/infill.c) ---
 * A /completion request with "input_prefix" and "input_suffix" (required:
 * a string, token ids, or both mixed), "input_extra" (other files' chunks,
 * [{"filename", "text"}]) and "prompt" (optional: the middle's start, a
 * string). Its prompt is llama-server's fill-in-the-middle prompt:
 *   [REP]myproject\n [SEP]file\n chunk ... [SEP]filename\n    (the extra context)
 *   [BOS] [PRE] prefix prompt [SUF] suffix [MID]
 * (without REP/SEP tokens each chunk follows "\n\n--- snippet ---\n\n";
 * --spm-infill puts the suffix part first), the prefix's last and the
 * suffix's first tokens kept so both fit a -b batch 3:1, the extra
 * context's last tokens in what the context leaves (n_ctx - n_batch -
 * 2 * n_predict). */
int api_request_parse_infill(json_t *body, struct api_request *out, struct fl_err *err);

struct fl_tokenizer;
/* Whether the vocabulary has the prefix, suffix and middle tokens. */
bool api_infill_supported(const struct fl_tokenizer *tok);

struct api_infill_limits {
    int n_batch;   /* llama.cpp's -b (default 2048) */
    int n_predict; /* the server's -n (-1: none) */
    int n_ctx;     /* a sequence's cells */
    bool spm;      /* --spm-infill: suffix/prefix/middle */
};
/* The prompt of an /infill request, or of a completions request with
 * OpenAI's "suffix" (the prompt's text before the gap, the suffix after
 * it, no extra context, the middle starting empty): *ids malloc'ed; the
 * count, or -errno with *why (-ENOTSUP: the model has no FIM tokens). */
int api_infill_tokens(const struct fl_tokenizer *tok, const struct api_request *r,
                      const struct api_infill_limits *lim, int32_t **ids, const char **why);
/* Any request's prompt: api_infill_tokens for /infill and a "suffix",
 * else api_request_tokens. */
int api_request_prompt_tokens(const struct fl_tokenizer *tok, enum fl_chat_format chat,
                              const struct api_request *r, const struct api_infill_limits *lim,
                              int32_t **ids, const char **why);

/* generation_settings: the settings a request ran with (also /props's
 * default_generation_settings.params, from a server's defaults). */
struct api_native_settings {
    const struct fl_sampler_params *sampling;
    int n_predict;           /* -1: up to the context */
    const char *const *stop;
    int n_stop;
    bool ignore_eos, stream, cache_prompt;
    int n_probs;
    const char *grammar;     /* NULL: none */
    size_t grammar_len;
    const char *model;       /* NULL: left out */
    int n_ctx;               /* 0: left out */
};
json_t *api_native_settings_json(const struct api_native_settings *s);

/* One result object: streamed events (final false: the text and tokens
 * since the last one) and the last event or a whole answer (final true:
 * every field llama-server writes). */
struct api_native_result {
    bool final;
    int index;               /* the prompt's (and choice's) place in the request */
    const char *content;
    size_t len;
    const int32_t *tokens;   /* the tokens' ids ([] when NULL) */
    int n_tokens;
    int tokens_predicted, tokens_evaluated;
    /* with n_probs (else NULL): these tokens' figures, pieces by tok */
    const struct fl_token_logprob *probs;
    int n_probs;
    const struct fl_tokenizer *tok;
    /* final only */
    const char *model;
    const char *prompt;      /* the prompt's text */
    size_t prompt_len;
    const char *stop_type;   /* "eos", "word", "limit", "none" */
    const char *stopping_word; /* "" when none */
    int tokens_cached;       /* the sequence's positions at its end */
    int cache_n;             /* prompt tokens read from the prompt cache */
    double prompt_s, predicted_s;
    int draft_n, draft_n_accepted; /* speculative decoding's draft tokens, and those kept */
    json_t *settings;        /* generation_settings (taken over; NULL: left out) */
};
json_t *api_native_json(const struct api_native_result *r);

/* llama-server's "response_fields": an object of just those paths' values
 * ("timings/prompt_n": res.timings.prompt_n; absent paths left out), keyed
 * by the paths. Takes res; fields NULL gives res back. */
json_t *api_native_pick(json_t *res, const json_t *fields);

/* llama-server's stop_type of an engine finish: finish "stop" with a stop
 * string's index (>= 0) is "word", without one "eos"; "length" is "limit";
 * anything else "none". */
const char *api_native_stop_type(const char *finish_reason, int stop_index);

#endif

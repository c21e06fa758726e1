/* openai.h: the OpenAI-compatible request and response documents, as
 * llama-server and the OpenAI Batch API shape them: a request body of
 * /v1/chat/completions or /v1/completions read into plain C, the
 * completion objects and the error object written back, and the lines of
 * a batch file (`faultline batch`; the server issue builds on the same).
 *
 * Every parser here takes outside input: it checks each field's type and
 * range and says which field is wrong, in one line, as a JSON path
 * ("messages[1].content: expected a string"). Strings in a parsed request
 * point into its JSON document; api_request_free releases both. */
#ifndef FL_API_OPENAI_H
#define FL_API_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "api/embeddings.h"
#include "text/chat.h"
#include "text/logprob.h"
#include "text/reasoning.h"
#include "text/sampler.h"
#include "text/tool-calls.h"

#define API_MAX_STOP 8
#define API_MAX_MESSAGES 4096
#define API_MAX_LOGIT_BIAS 1024
#define API_MAX_TOOLS 128
#define API_MAX_N 128         /* choices per request; a server holds them to its -np */
#define API_MAX_PROMPTS 1024  /* prompts in one completions request */

enum api_kind { API_CHAT, API_COMPLETION };

/* A chat answer's reasoning (text/reasoning.h), as llama-server's
 * "reasoning_format" (and --reasoning-format) asks for it. */
enum api_reasoning_format {
    API_REASONING_DEEPSEEK = 0, /* "deepseek", "auto" (the default): in the message's
                                 * reasoning_content (a stream's delta.reasoning_content) */
    API_REASONING_NONE,         /* "none": left in content as the model wrote it */
    API_REASONING_LEGACY,       /* "deepseek-legacy": in content as written, and also in
                                 * reasoning_content (not while streaming) */
};
/* The format of a name, or -1. */
int api_reasoning_format_from_name(const char *name);
/* Whether s is a thinking effort Kimi K3's template takes: low, high, max. */
bool api_thinking_effort_ok(const char *s);

/* What a request about reasoning does not say: a server's or a batch's
 * --reasoning-format, and --reasoning on|off / --chat-template-kwargs
 * '{"enable_thinking": false}'. */
struct api_reasoning_defaults {
    enum api_reasoning_format format;
    int thinking; /* -1: the template's default; 0: enable_thinking=false; 1: true */
    int budget;   /* --reasoning-budget: -1 no limit, else the reasoning's tokens at most */
    const char *effort; /* --reasoning-effort (gpt-oss's "Reasoning: X"; NULL: the template's) */
    const char *budget_message; /* --reasoning-budget-message (NULL: none) */
    bool no_prefill; /* --no-prefill-assistant: a last assistant message is not continued */
    int keep_reasoning; /* --chat-template-kwargs' clear_thinking false: 1 (-1 / 0: no) */
    int ds_thinking;    /* --chat-template-kwargs' thinking (DeepSeek V3.1's): 1, -1; 0 none */
    int think_mode;     /* ... its thinking_mode (MiniMax-M3's): enum fl_chat_think_mode */
    const char *thinking_effort; /* ... its thinking_effort (Kimi K3's), or NULL */
};

/* continue_final_message: true (the last message's content, or its
 * reasoning when it has no content). */
#define API_CONTINUE_AUTO 99

/* "tool_choice": "auto" (the default with tools), "none", "required", or
 * {"type": "function", "function": {"name": ...}}. */
enum api_tool_choice { API_TOOL_AUTO = 0, API_TOOL_NONE, API_TOOL_REQUIRED, API_TOOL_NAMED };

struct api_request {
    enum api_kind kind;
    struct fl_chat_msg *msgs; /* API_CHAT */
    size_t n_msgs;
    json_t *continued;        /* the last message's text parts joined as llama-server joins a
                               * continued answer's, a blank line between (NULL: its content
                               * was a string, or it is no assistant's) */
    const char *prompt;       /* API_COMPLETION, as text ... */
    int32_t *prompt_ids;      /* ... or as token ids: the prompt selected */
    int n_prompt_ids;
    int n_prompts;            /* completions: "prompt" may be a list (strings, or
                               * lists of token ids); 1 for chat */
    const json_t *prompt_list; /* ... that list (in doc), NULL for one prompt */
    const json_t *prompt_mixed; /* or the selected prompt as llama-server's ids and strings
                                 * mixed in one array (in doc; NULL: not) */
    const char *model;        /* NULL when not given */
    int max_tokens;           /* -1 when not given */
    int n;                    /* choices ("n", llama-server's "n_cmpl"): the prompt's
                               * answers, each its own sequence; choice i of a seeded
                               * request samples with seed + i */
    const char *stop[API_MAX_STOP];
    int n_stop;
    /* the sampling fields given (has[] says which) */
    struct fl_sampler_params sampling;
    bool has_temperature, has_top_k, has_top_p, has_min_p, has_seed;
    bool has_repeat, has_presence, has_frequency, has_last_n, has_typical, has_min_keep;
    bool has_order;           /* "samplers" (llama-server's): sampling.order */
    uint32_t has_samplers;    /* llama-server's DRY, XTC, ... fields given (api/sampler-fields.h) */
    bool ignore_eos;
    bool no_cache_prompt;     /* "cache_prompt": false (llama-server's): no prompt cache */
    int n_indent;             /* llama-server's: a line after the first newline indented less
                               * ends the answer before its text (0: off) */
    int t_max_predict_ms;     /* llama-server's: after so long generating, a newline ends the
                               * answer (0: off) */
    bool stream, include_usage; /* server-sent events; a usage chunk at the end */
    /* "logit_bias": {"ID": bias in [-100, 100] or false (a ban)}, or
     * llama.cpp's [[ID, bias], ...]; malloc'ed */
    struct fl_logit_bias *logit_bias;
    int n_logit_bias;
    /* ... and llama.cpp's text entries ({"TEXT": bias}, [["TEXT", bias]]):
     * each of the text's tokens gets the bias once the vocabulary is known
     * (api_request_check_vocab adds them to logit_bias); text in doc */
    struct api_bias_text { const char *text; size_t len; float bias; } *bias_text;
    int n_bias_text;
    bool echo;                /* completions: the prompt before the answer (and, with
                               * logprobs, its tokens' figures); max_tokens may be 0 */
    const char *suffix;       /* completions: OpenAI's "suffix", the text after the gap the
                               * answer fills (the prompt's text before it; NULL: none) */
    bool json_object;         /* "response_format": {"type": "json_object"}: JSON mode */
    const json_t *json_schema; /* or the answer is a value of this schema (in doc) */
    const char *grammar;       /* or a sentence of this GBNF grammar (in doc; NULL: none) */
    size_t grammar_len;
    /* chat: "logprobs": true and "top_logprobs": N; completions: "logprobs": N */
    bool logprobs;
    int top_logprobs;         /* 0..FL_MAX_TOP_LOGPROBS */
    /* chat: "tools", each as the JSON text the chat template writes
     * (owned) and its function's name; "tool_choice" (NAMED also for
     * "required" with one tool: its name); "parallel_tool_calls": false */
    char **tools_json;
    const char **tool_names;
    size_t n_tools;
    enum api_tool_choice tool_choice;
    const char *tool_name;
    bool one_call;
    /* chat: "reasoning_format" (-1 when not given), and whether the model
     * thinks: "chat_template_kwargs": {"enable_thinking": bool}, or
     * "reasoning_effort": "none" (off); -1 when neither says */
    int reasoning_format;
    int thinking;
    int keep_reasoning; /* chat_template_kwargs.clear_thinking false: 1, true: 0, -1 not given */
    int ds_thinking;    /* chat_template_kwargs.thinking (DeepSeek V3.1's): 1 true, -1 false, 0 */
    int think_mode;     /* chat_template_kwargs.thinking_mode (MiniMax-M3's): enum
                         * fl_chat_think_mode, 0 when not given */
    const char *thinking_effort; /* chat_template_kwargs.thinking_effort (Kimi K3's: low,
                                  * high or max; "" for null: none), or NULL */
    const char *reasoning_effort; /* "reasoning_effort" other than "none", or
                                   * chat_template_kwargs.reasoning_effort (NULL) */
    /* "reasoning_budget_tokens" (or "thinking_budget_tokens"; -1 when not
     * given) and "reasoning_budget_message" (NULL): after so many tokens of
     * reasoning the message and "</think>" are forced (eng_req.think_*) */
    int reasoning_budget;
    const char *reasoning_budget_message;
    /* chat: llama-server's "add_generation_prompt" (default true: the
     * assistant's opening ends the prompt) and "continue_final_message"
     * (-1 when not given: a last assistant message is continued unless
     * --no-prefill-assistant; else an fl_chat_continue, API_CONTINUE_AUTO
     * for true: in its reasoning when it has reasoning and no content) */
    bool add_generation_prompt;
    int continue_final;
    /* llama-server's own /completion (api/native.h): its answer's shape,
     * "n_probs" (logprobs is then on for every request: the tokens' ids and
     * bytes come with the figures) and "return_tokens" */
    bool native;
    int n_probs;
    bool return_tokens;
    const json_t *response_fields; /* the answer's fields to keep, as paths (in doc; NULL: all) */
    /* llama-server's /infill (api/native.h): the code before and after the
     * gap (strings, ids or both), and other files' chunks (in doc) */
    bool infill;
    const json_t *input_prefix, *input_suffix, *input_extra;
    json_t *doc;              /* owned: what the strings point into */
};

/* Reads a request body (an object; takes a reference to it). 0, or
 * -EINVAL with the field and the problem in err; -ENOMEM. On error *out
 * needs no api_request_free. Unknown fields are ignored, as the OpenAI
 * server does; known fields asking for what is not generated (grammars,
 * ...) are refused. */
int api_request_parse(json_t *body, enum api_kind kind, struct api_request *out,
                      struct fl_err *err);
void api_request_free(struct api_request *r);

/* Makes prompt i of a completions request's list the one its prompt /
 * prompt_ids say (prompt 0 is, after parsing). 0 or -ENOMEM. */
int api_request_select_prompt(struct api_request *r, int i);

/* Fills what r did not say about reasoning from d. */
void api_request_reasoning_defaults(struct api_request *r, const struct api_reasoning_defaults *d);

/* What a command's -j / -jf / --grammar / --grammar-file hold answers to
 * when a request asks for no format, schema, grammar or tools of its own
 * (as llama-server's flags are defaults for its requests). */
struct api_constraint_defaults {
    const json_t *schema; /* NULL: none */
    const char *grammar;  /* NULL: none */
    size_t grammar_len;
};
void api_request_constraint_defaults(struct api_request *r,
                                     const struct api_constraint_defaults *d);

struct fl_tokenizer;

/* What only the model's vocabulary can check or settle: logit_bias's text
 * entries tokenized (plain text: no BOS, control-token texts as text, as
 * llama-server) into logit_bias; 0, or -EINVAL naming the first logit_bias
 * token outside tok's vocabulary (or text making more than 1,024 biased
 * tokens), or why the grammar does not compile (its `<token>`s are tok's);
 * -ENOMEM. */
int api_request_check_vocab(struct api_request *r, const struct fl_tokenizer *tok,
                            struct fl_err *err);

/* The tokens to generate at most: the request's max_tokens, else dflt
 * (a command's -n), and when neither says (-1), up to the context. */
int api_request_max_tokens(const struct api_request *r, int dflt, int n_ctx);

/* defaults with the fields the request gave put over them */
void api_request_sampling(const struct api_request *r, const struct fl_sampler_params *defaults,
                          struct fl_sampler_params *out);

/* The request's prompt as token ids (*ids malloc'ed): the chat messages
 * through the model's chat format, or the prompt's text or ids. The count,
 * or -errno with *why. */
int api_request_tokens(const struct fl_tokenizer *tok, enum fl_chat_format chat,
                       const struct api_request *r, int32_t **ids, const char **why);

/* --- tool calls (api/tools.c) ---------------------------------------------------
 * With tools, the chat format offers them to the model (text/chat.h) and
 * the answer is read back as content and calls (text/tool-calls.h).
 * "tool_choice" "required" or a named function forces a call: the prompt
 * ends with the call's opening. chatml: `<tool_call>\n{"name": "NAME",
 * "arguments": ` for a name, `<tool_call>\n` for "required" among several
 * tools, and the answer runs in JSON mode (reader.json: the caller's
 * eng_req.json_object), so it is the arguments' object (or the call's) and
 * ends when that closes. glm-4.5: `\n<think></think>\n<tool_call>NAME\n`
 * (or without the name) and minimax-m2's opening, and the model writes the
 * arguments' pairs held to a grammar of the tools' parameters
 * (api_tool_grammar). openai-gpt-oss: `<|channel|>commentary to=functions.NAME
 * <|constrain|>json<|message|>` and the arguments in JSON mode, or for
 * "required" among several `<|channel|>commentary to=functions.` and the
 * model writes the rest, held to a grammar of the tools' names and a JSON
 * object (api_tool_grammar), as Kimi K2's "required" is. */
enum api_tool_mode {
    API_TOOLS_OFF = 0, /* no tools, or "tool_choice": "none" */
    API_TOOLS_BLOCKS,  /* "auto": calls where the model writes them */
    API_TOOLS_ARGS,    /* named: the answer is the arguments of name's call */
    API_TOOLS_CALL,    /* "required" among several: the answer is one call's object */
};
struct fl_tool_answer;
struct api_tool_reader {
    enum api_tool_mode mode;
    enum fl_chat_format fmt;
    bool one_call;            /* "parallel_tool_calls": false: the first call only */
    bool json;                /* the answer runs in JSON mode (a forced call in chatml) */
    char name[72];            /* API_TOOLS_ARGS */
};
/* How req's answer is read in chat format fmt. */
void api_tool_reader_init(const struct api_request *req, enum fl_chat_format fmt,
                          struct api_tool_reader *out);
/* The answer's content and calls (text/tool-calls.h; fl_tool_answer_free).
 * An answer that holds no well-formed call is all content. ended: the
 * model ended the answer (not max_tokens): a forced GLM call it ended
 * without writing </tool_call> is closed. 0 or -ENOMEM. */
int api_tool_read(const struct api_tool_reader *t, const char *text, size_t len, bool ended,
                  struct fl_tool_answer *out);
/* Leading bytes of a growing answer that are content for certain (a
 * stream holds the rest back until the answer ends). */
size_t api_tool_content_prefix(const struct api_tool_reader *t, const char *text, size_t len);
/* The calls a growing answer has begun (text/tool-calls.h's
 * fl_tool_calls_partial, a forced call's opening before the text, the
 * first only with parallel_tool_calls false): the count (*out:
 * fl_tool_partials_free), or -ENOMEM. */
int api_tool_partial(const struct api_tool_reader *t, const char *text, size_t len,
                     struct fl_tool_partial **out);
/* The schema a forced call's answer in JSON (t->json) is held to, a new
 * reference, or NULL for JSON mode's any object: a named tool's
 * "parameters", or for "required" among several tools, an anyOf of
 * {"name": that name, "arguments": its parameters} per tool. Parameters
 * this schema subset cannot hold (text/json-schema.h) are any object. */
json_t *api_tool_schema(const struct api_request *req, const struct api_tool_reader *t);
/* The GBNF grammar (text/grammar.h; malloc'ed) a forced call is held to
 * after the opening the prompt gave it (api/tool-grammar.c). GLM-4.5 and
 * MiniMax-M2: the named tool's parameters, or one call of any tool for
 * "required", as <arg_key>/<arg_value> or <parameter> pairs, the required
 * ones as declared then the optional ones, each value as its schema's type
 * allows (strings bare, without "</"; the rest as JSON; enums their
 * values), and the block's close. Kimi K2 and gpt-oss, "required": one of
 * the tools' names, the format's markers (as tokens of tok where they are
 * ones; tok may be NULL) and a JSON object. NULL for other formats and
 * modes, or when memory runs out. */
struct fl_tokenizer;
char *api_tool_grammar(const struct api_request *req, const struct api_tool_reader *t,
                       const struct fl_tokenizer *tok);

/* --- the answer: reasoning, content, calls (api/answer.c) ---------------------------
 * A chat answer is read in two steps: its reasoning split off (text/
 * reasoning.h; not for "reasoning_format": "none", nor for an answer held
 * to JSON or to a forced call from its first token), then its content read
 * for tool calls. */
struct api_answer_reader {
    struct api_tool_reader tools;
    const struct fl_reasoning_tags *tags; /* the format's (fl_chat_reasoning_tags) */
    bool split;    /* the reasoning is split off */
    bool legacy;   /* ... and content keeps it as written too ("deepseek-legacy") */
    bool opened;   /* the prompt left the model inside its reasoning */
    int budget;    /* the reasoning budget (-1: none); points into the request: */
    const char *budget_message;
};
void api_answer_reader_init(const struct api_request *req, enum fl_chat_format fmt,
                            struct api_answer_reader *out);

/* A finished answer's parts; reasoning and content point into the text. */
struct api_answer {
    const char *reasoning;     /* "" when none */
    size_t reasoning_len;
    const char *content;       /* the content; with tools, the text outside the calls
                                * (tools.content) */
    size_t content_len;
    bool has_tools;            /* with tools: the content and calls read */
    struct fl_tool_answer tools;
};
/* ended: as api_tool_read's. 0 or -ENOMEM; api_answer_free either way. */
int api_answer_read(const struct api_answer_reader *rd, const char *text, size_t len, bool ended,
                    struct api_answer *out);
void api_answer_free(struct api_answer *a);

/* A growing answer's settled parts for a stream (a stream never carries
 * "deepseek-legacy"'s copy: its content is the text as written). */
void api_answer_progress(const struct api_answer_reader *rd, const char *text, size_t len,
                         bool done, struct fl_reasoning_split *out);

/* A chat request's prompt text (*text malloc'ed; free it on error too):
 * its messages, and its tools unless "tool_choice" is "none", through
 * chat format chat, with a forced call's opening. The length, or -errno
 * with *why (-ENOTSUP: tools in a format without a tool-call format). */
int api_render_chat(enum fl_chat_format chat, const struct api_request *r, char **text,
                    const char **why);

/* A completion request's prompt as echo writes it: as given, or, with
 * logprobs or a prompt of token ids, its tokens' pieces (ids[0..n)), which
 * the tokens' text_offset index. malloc'ed, *len its length; NULL: out of
 * memory. */
char *api_prompt_text(const struct api_request *r, const struct fl_tokenizer *tok,
                      const int32_t *ids, int n, size_t *len);

/* The "chat.completion" / "text_completion" object of a finished request. */
struct api_completion {
    enum api_kind kind;
    const char *id, *model;
    int64_t created;          /* unix seconds */
    const char *text;
    size_t len;
    const char *finish_reason; /* "stop", "length" */
    int prompt_tokens, completion_tokens;
    /* when the request asked for logprobs (else NULL): the tokens' figures,
     * their pieces rendered by tok */
    const struct fl_token_logprob *logprobs;
    int n_logprobs;
    const struct fl_tokenizer *tok;
    int cached_tokens; /* usage.prompt_tokens_details: prompt tokens read from the cache */
    /* "echo" (completions): the prompt's text comes first, and with logprobs
     * its tokens' figures (prompt_tokens of them; the first's null) */
    bool echo;
    const char *prompt;
    size_t prompt_len;
    const struct fl_token_logprob *prompt_logprobs;
    /* chat with tools: the answer read (api_tool_read) in place of text;
     * with calls, "tool_calls" and finish_reason "tool_calls" */
    const struct fl_tool_answer *tools;
    /* chat: the reasoning, "reasoning_content" when not empty */
    const char *reasoning;
    size_t reasoning_len;
};
json_t *api_completion_json(const struct api_completion *c);

/* Another choice of the same request (other, a whole completion object;
 * its reference is taken) into doc as choices[index]: its completion
 * tokens added to doc's usage, and its prompt's when it is another prompt
 * (new_prompt; a prompt counts once, as OpenAI's). 0, -EINVAL when either
 * is not a completion object, -ENOMEM. */
int api_completion_add_choice(json_t *doc, json_t *other, int index, bool new_prompt);
/* The n choices of a request (each a completion object of one choice, all
 * taken over) as one completion object: choice c is choices[c], and the
 * usage counts a prompt once for each per_prompt choices. NULL when one is
 * NULL or not a completion object, or memory runs out (all freed). */
json_t *api_completion_merge(json_t **choices, int n, int per_prompt);

/* A choice's "logprobs" object for n tokens: chat's {"content": [{"token",
 * "logprob", "bytes", "top_logprobs": [...]}]}, or the completions'
 * {"tokens", "token_logprobs", "top_logprobs": [{piece: logprob}],
 * "text_offset"} (offsets into the generated text). */
json_t *api_logprobs_json(enum api_kind kind, const struct fl_tokenizer *tok,
                          const struct fl_token_logprob *v, int n);

/* One server-sent event's object while streaming: "chat.completion.chunk"
 * (delta: role on the first, content after) or "text_completion" (text);
 * finish_reason on the last; with usage, the usage chunk (no choices). */
struct api_chunk {
    enum api_kind kind;
    const char *id, *model;
    int64_t created;
    int index;                /* the choice's */
    bool role;
    const char *text;         /* NULL: none */
    size_t len;
    bool reasoning;           /* chat: text is delta.reasoning_content, not content */
    const char *finish_reason; /* NULL: not finished */
    bool usage;
    int prompt_tokens, completion_tokens, cached_tokens;
    const struct fl_token_logprob *logprobs; /* this chunk's tokens' (NULL: none) */
    int n_logprobs;
    const struct fl_tokenizer *tok;
    /* one call's growth as delta.tool_calls[0]: call is 1 + its index (0: none); its
     * first chunk names it (call_name, with its id and type), each brings more of its
     * arguments */
    int call;
    const char *call_name;
    const char *call_args;
    size_t call_args_len;
};
json_t *api_chunk_json(const struct api_chunk *c);

/* {"error": {"message", "type", "code"}} as OpenAI writes errors. */
json_t *api_error_json(const char *type, const char *code, const char *message);

/* --- batch files ---------------------------------------------------------------
 * One input line: {"custom_id": "...", "method": "POST", "url":
 * "/v1/chat/completions" | "/v1/completions" | "/v1/responses" |
 * "/v1/embeddings", "body": {...}}. */
struct api_batch_line {
    const char *custom_id;    /* NULL when the line had none (then it is an error) */
    struct api_request req;
    json_t *doc;
    bool responses;           /* "/v1/responses": the body read as a chat (api/responses.h),
                               * answered with a response object */
    bool embeddings;          /* "/v1/embeddings": the body is embd's, req is not read */
    struct api_embd_request embd;
};

/* Parses one line (n bytes, no newline). 0, or -EINVAL with "what is
 * wrong" in err; custom_id is set whenever the line had a string one, also
 * on error, so the error line can name it. Free with api_batch_line_free
 * either way. */
int api_batch_line_parse(const char *line, size_t n, struct api_batch_line *out,
                         struct fl_err *err);
void api_batch_line_free(struct api_batch_line *l);

/* The output line of the Batch API: {"id", "custom_id", "response":
 * {"status_code": 200, "request_id", "body"} | null, "error": {"code",
 * "message"} | null}; with no custom_id, "line": N says which input line it
 * answers (so a rerun knows it is done). Takes body's reference. */
json_t *api_batch_output(const char *custom_id, int line_no, const char *request_id,
                         json_t *body, const char *error_code, const char *error_message);

#endif

/* tokenizer.h: text <-> token ids, built from a GGUF file's tokenizer.ggml.*
 * metadata, with llama.cpp's semantics (so ids match its reference runs).
 *
 * Two models are supported:
 *   - "llama": SentencePiece-style merges by score, spaces escaped as U+2581,
 *     byte fallback to <0xNN> tokens.
 *   - "gpt2": byte-level BPE by merge rank, after a pre-tokenizer split chosen
 *     by tokenizer.ggml.pre (PCRE2 regexes, UTF + UCP).
 * Special tokens (CONTROL, USER_DEFINED, UNKNOWN types) are matched in the
 * raw text first: user-defined ones always, control/unknown ones only when
 * the caller asks for parse_special (chat templates do, plain prompts don't).
 *
 * A loaded tokenizer is immutable; all functions below may be called from
 * several threads at once. */
#ifndef FL_TOKENIZER_H
#define FL_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct gguf_file;
struct fl_tokenizer;

#define FL_TOKEN_NULL (-1)

enum fl_tok_model {
    FL_TOK_SPM = 1, /* tokenizer.ggml.model "llama" */
    FL_TOK_BPE = 2, /* tokenizer.ggml.model "gpt2" */
};

/* Token types as stored in tokenizer.ggml.token_type. */
enum fl_token_type {
    FL_TOKTYPE_UNDEFINED = 0,
    FL_TOKTYPE_NORMAL = 1,
    FL_TOKTYPE_UNKNOWN = 2,
    FL_TOKTYPE_CONTROL = 3,
    FL_TOKTYPE_USER_DEFINED = 4,
    FL_TOKTYPE_UNUSED = 5,
    FL_TOKTYPE_BYTE = 6,
};

/* Builds a tokenizer from f's metadata. Returns 0, -ENOENT when the file has
 * no tokenizer, -EINVAL (with err saying what) for inconsistent data: array
 * lengths that differ, duplicate or empty-and-clashing tokens, merges naming
 * absent tokens, special ids out of range, an unsupported model. */
int fl_tokenizer_load(const struct gguf_file *f, struct fl_tokenizer **out, struct fl_err *err);
void fl_tokenizer_free(struct fl_tokenizer *tok);

/* A one-line warning produced while loading (e.g. an unknown pre-tokenizer
 * that fell back to the default regex), or NULL. The caller decides whether
 * to print it. */
const char *fl_tokenizer_warning(const struct fl_tokenizer *tok);

enum fl_tok_model fl_tokenizer_model(const struct fl_tokenizer *tok);
const char *fl_tokenizer_pre(const struct fl_tokenizer *tok); /* as resolved */
int32_t fl_n_vocab(const struct fl_tokenizer *tok);
int32_t fl_token_bos(const struct fl_tokenizer *tok); /* FL_TOKEN_NULL if none */
int32_t fl_token_eos(const struct fl_tokenizer *tok);
int32_t fl_token_eot(const struct fl_tokenizer *tok);
int32_t fl_token_unk(const struct fl_tokenizer *tok);
int32_t fl_token_pad(const struct fl_tokenizer *tok);
bool fl_tokenizer_add_bos(const struct fl_tokenizer *tok);
bool fl_tokenizer_add_eos(const struct fl_tokenizer *tok);
/* Fill-in-the-middle tokens (llama-server's /infill): from the file's
 * tokenizer.ggml.fim_*_token_id (or the older prefix/suffix/middle keys),
 * else known by their text as llama.cpp knows them (Qwen's <|fim_prefix|>,
 * StarCoder's <fim_prefix>, DeepSeek's <｜fim▁begin｜>, CodeLlama's <PRE>,
 * GLM-4.5's <|code_prefix|>, ...; for the repository and file separators
 * Qwen's <|repo_name|> / <|file_sep|>). */
enum fl_fim_role { FL_FIM_PRE, FL_FIM_SUF, FL_FIM_MID, FL_FIM_PAD, FL_FIM_REP, FL_FIM_SEP,
                   FL_FIM_N };
int32_t fl_token_fim(const struct fl_tokenizer *tok, enum fl_fim_role role); /* or FL_TOKEN_NULL */
/* End of generation: EOS, EOT, the end-of-turn tokens llama.cpp knows by
 * their text (<|im_end|>, <|return|>, <|call|>, ...) and the FIM pad,
 * repository and file separator tokens (a completion of code ends there). */
bool fl_token_is_eog(const struct fl_tokenizer *tok, int32_t id);
/* The token's text as stored (escaped: U+2581 for SPM spaces, byte-level
 * symbols for BPE), or NULL for an id out of range. */
const char *fl_token_text(const struct fl_tokenizer *tok, int32_t id);
enum fl_token_type fl_token_type_of(const struct fl_tokenizer *tok, int32_t id);
/* The id of a token by its stored text, or FL_TOKEN_NULL. */
int32_t fl_token_lookup(const struct fl_tokenizer *tok, const char *text, size_t len);

/* Tokenizes len bytes of text (any bytes; invalid UTF-8 is handled as
 * llama.cpp does). add_special adds BOS/EOS as the file says; parse_special
 * turns control-token texts in the input into those tokens.
 * Returns the number of tokens n and writes them to out when n <= max;
 * -ENOSPC when max is too small (call with out = NULL, max = 0 to learn n);
 * -EINVAL for bad arguments (or a regex match limit hit by pathological
 * input), -EILSEQ when an SPM vocabulary has neither a byte token nor an
 * unknown token for some byte, -ENOMEM. */
int fl_tokenize(const struct fl_tokenizer *tok, const char *text, size_t len,
                bool add_special, bool parse_special, int32_t *out, int max);
/* The same into a malloc'ed array of exactly the tokens (*out, freed by the
 * caller, never NULL on success): one pass, no size to guess. */
int fl_tokenize_alloc(const struct fl_tokenizer *tok, const char *text, size_t len,
                      bool add_special, bool parse_special, int32_t **out);

/* The bytes one token stands for, llama.cpp's token_to_piece: control and
 * unknown tokens render as nothing unless special; byte tokens as their
 * byte; lstrip drops one leading space (SPM's word-start marker).
 * Returns the length n and copies the bytes when n <= cap (no NUL added);
 * -ENOSPC when cap is too small (buf NULL and cap 0 learn n); -EINVAL for
 * a bad id. */
int fl_token_to_piece(const struct fl_tokenizer *tok, int32_t id, char *buf, size_t cap,
                      bool lstrip, bool special);

/* Renders ids back to text with llama.cpp's detokenize: remove_special drops
 * a leading BOS / trailing EOS that the file adds; unparse_special renders
 * control tokens' text; SPM drops the leading space of the first piece, and
 * BPE vocabularies that ask for it get llama.cpp's clean-up of spaces before
 * punctuation. Returns the length n and writes n bytes plus a NUL when
 * n < cap; -ENOSPC otherwise (buf NULL and cap 0 learn n); -EINVAL for a
 * bad id. */
int fl_detokenize(const struct fl_tokenizer *tok, const int32_t *ids, int n_ids,
                  char *buf, size_t cap, bool remove_special, bool unparse_special);

#endif

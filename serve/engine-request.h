/* engine-request.h: an OpenAI request (api/openai.h) as the engine's
 * request (app/scheduler.h): one reading of the fields, for the server's
 * jobs (http.c) and for batch files' lines (app/cli/batch.c). */
#ifndef FL_SERVE_ENGINE_REQUEST_H
#define FL_SERVE_ENGINE_REQUEST_H

#include <jansson.h>

#include "api/openai.h"
#include "app/scheduler.h"

/* What r asks, and what reading its answer (rd) needs, as an engine
 * request: sampling (samp's defaults for what r leaves out), max_tokens
 * (dflt_max when r says none, up to the n_ctx cells of a sequence), stop
 * strings, logprobs and echo, (tok: the model's vocabulary, for a forced
 * call's grammar) logit bias, the prompt cache, JSON mode, the
 * schema or the grammar, the reasoning budget. Its pointers are into r and
 * rd, but for a forced call's schema or grammar, new in *call_schema
 * (json_decref it once the request is submitted) and *call_grammar (free
 * it then); each NULL when there is none. The prompt, the user and each
 * choice's seed are the caller's. */
void srv_engine_request(const struct api_request *r, const struct api_answer_reader *rd,
                        const struct fl_tokenizer *tok, const struct fl_sampler_params *samp,
                        int dflt_max, int n_ctx, struct eng_req *out, json_t **call_schema,
                        char **call_grammar);

struct api_embd_input;
struct eng_session;
/* An embedding input's tokens (*ids malloc'ed): its text with the model's
 * special tokens (BOS where it adds one; control tokens' text read as
 * them), as llama-server tokenizes it, or its ids checked against the
 * vocabulary. The count (> 0), or -1 with *why: no tokens, an id outside
 * the vocabulary, more than a sequence of n_ctx cells holds, or memory. */
int srv_embd_tokens(const struct fl_tokenizer *tok, const struct api_embd_input *in, int n_ctx,
                    int32_t **ids, char *why, size_t why_len);
/* The pooling a session's embeddings take: -1 (no --pooling) is the
 * model's pooling_type key where it has one, else last (the final token
 * is the only one a causal model's attention lets see the whole text). */
enum eng_pooling srv_embd_pooling(const struct eng_session *s, int flag);

#endif

/* engine-request.c: an OpenAI request as the engine's (engine-request.h). */
#include "serve/engine-request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/embeddings.h"
#include "text/tokenizer.h"

void srv_engine_request(const struct api_request *r, const struct api_answer_reader *rd,
                        const struct fl_tokenizer *tok, const struct fl_sampler_params *samp,
                        int dflt_max, int n_ctx, struct eng_req *out, json_t **call_schema,
                        char **call_grammar)
{
    *out = (struct eng_req){ .stop = r->stop, .n_stop = r->n_stop, .ignore_eos = r->ignore_eos,
                             .logprobs = r->logprobs, .top_logprobs = r->top_logprobs,
                             .prompt_logprobs = r->echo, .logit_bias = r->logit_bias,
                             .n_logit_bias = r->n_logit_bias,
                             .json_object = r->json_object || rd->tools.json,
                             .grammar = r->grammar, .grammar_len = r->grammar_len,
                             .no_prompt_cache = r->no_cache_prompt,
                             .n_indent = r->n_indent, .t_max_predict_ms = r->t_max_predict_ms,
                             .think_limit = rd->budget >= 0, .think_opened = rd->opened,
                             .think_budget = rd->budget, .think_message = rd->budget_message,
                             .think_tags = rd->tags };
    *call_schema = api_tool_schema(r, &rd->tools); /* a forced call's arguments */
    out->json_schema = *call_schema ? *call_schema : r->json_schema;
    /* a forced call in an XML-style format: its grammar (tools and a
     * request's own grammar are refused together) */
    *call_grammar = api_tool_grammar(r, &rd->tools, tok);
    if (*call_grammar) {
        out->grammar = *call_grammar;
        out->grammar_len = strlen(*call_grammar);
    }
    out->max_tokens = api_request_max_tokens(r, dflt_max, n_ctx);
    api_request_sampling(r, samp, &out->sampling);
}

int srv_embd_tokens(const struct fl_tokenizer *tok, const struct api_embd_input *in, int n_ctx,
                    int32_t **ids, char *why, size_t why_len)
{
    *ids = NULL;
    int n = in->n_ids;
    if (in->text)
        n = fl_tokenize_alloc(tok, in->text, in->len, true, true, ids);
    else if ((*ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1))) != NULL)
        memcpy(*ids, in->ids, sizeof(int32_t) * (size_t)n);
    else
        n = -1;
    const int n_vocab = fl_n_vocab(tok);
    int bad = -1;
    for (int i = 0; n > 0 && i < n && bad < 0; i++)
        bad = (*ids)[i] < 0 || (*ids)[i] >= n_vocab ? i : -1;
    if (n < 0)
        snprintf(why, why_len, "%s", in->text ? "cannot be tokenized" : "out of memory");
    else if (n == 0)
        snprintf(why, why_len, "the input has no tokens");
    else if (bad >= 0)
        snprintf(why, why_len, "token id %d is outside the vocabulary [0, %d)", (*ids)[bad], n_vocab);
    else if (n >= n_ctx)
        snprintf(why, why_len, "the input has %d tokens; a sequence holds %d (-c)", n, n_ctx);
    else
        return n;
    free(*ids);
    *ids = NULL;
    return -1;
}

enum eng_pooling srv_embd_pooling(const struct eng_session *s, int flag)
{
    int64_t t = -1;
    struct fl_err err;
    if (flag >= 0)
        return (enum eng_pooling)flag;
    if (eng_model_key_int(eng_session_model(s), "pooling_type", false, &t, &err) || t < 0 ||
        t > ENG_POOL_LAST) /* llama.cpp's numbers: 0 none, 1 mean, 2 cls, 3 last (4 rank) */
        t = ENG_POOL_LAST;
    return (enum eng_pooling)t;
}

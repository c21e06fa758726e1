/* engine-request.c: an OpenAI request as the engine's (engine-request.h). */
#include "serve/engine-request.h"

#include <string.h>

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

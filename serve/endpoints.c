/* endpoints.c: /v1/models, /health, /metrics, /tokenize, /detokenize, /apply-template
 * (serve/http.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/request-fields.h"
#include "serve/http.h"
#include "text/tokenizer.h"

/* OpenAI's model list, with the fields Anthropic's clients read too (each
 * model's type, display_name and created_at; has_more, first_id, last_id). */
enum MHD_Result srv_models(struct srv_conn *k)
{
    struct eng_session *ses = srv_loop_session(k->s->loop);
    char when[32] = "";
    const time_t t = (time_t)k->s->started;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *name = k->s->model_name;
    json_t *m = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "id", name, "object", "model",
                          "created", (json_int_t)k->s->started, "owned_by", "faultline", "type",
                          "model", "display_name", name, "created_at", when);
    if (m && ses)
        fl_json_set(m, "meta", json_pack("{s:i, s:i, s:I}", "n_ctx", eng_session_n_ctx(ses),
                                         "n_seq", eng_session_n_seq(ses), "n_params",
                                         (json_int_t)eng_session_n_params(ses)));
    return srv_reply_json(k, MHD_HTTP_OK, json_pack("{s:s, s:[o], s:b, s:s, s:s}", "object", "list",
                                                    "data", m, "has_more", false, "first_id", name,
                                                    "last_id", name));
}

enum MHD_Result srv_health(struct srv_conn *k)
{
    if (!srv_loop_session(k->s->loop))
        return srv_reply_error(k, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "loading",
                               "Loading model");
    return srv_reply_json(k, MHD_HTTP_OK, json_pack("{s:s}", "status", "ok"));
}

/* One metric: HELP, TYPE and its value. */
static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    fprintf(f, "# HELP faultline_%s %s\n# TYPE faultline_%s %s\nfaultline_%s %.17g\n", name,
            help, name, type, name, v);
}

enum MHD_Result srv_metrics(struct srv_conn *k)
{
    struct srv_stats st;
    srv_loop_stats(k->s->loop, &st);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return srv_reply_error(k, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "oom",
                               "out of memory");
    metric(f, "requests_total", "counter", "Requests that ran to an end (stop, length, error).",
           (double)st.requests_done);
    metric(f, "requests_cancelled_total", "counter",
           "Requests cancelled (the client left, or shutdown).", (double)st.requests_cancelled);
    metric(f, "requests_failed_total", "counter", "Requests the engine failed.",
           (double)st.requests_failed);
    metric(f, "prompt_tokens_total", "counter", "Prompt tokens of requests that ended.",
           (double)st.prompt_tokens);
    metric(f, "prompt_tokens_cached_total", "counter",
           "Prompt tokens read from the prompt cache instead of computed.",
           (double)st.prompt_cached);
    metric(f, "prompt_cache_entries", "gauge", "Prompt prefixes the prompt cache holds.",
           st.cache_entries);
    metric(f, "prompt_cache_tokens", "gauge", "Positions those prefixes hold.",
           (double)st.cache_tokens);
    metric(f, "tokens_generated_total", "counter", "Tokens generated.", (double)st.gen_tokens);
    metric(f, "tokens_per_second", "gauge", "Generated tokens per second over the last ~10 s.",
           st.gen_tps);
    metric(f, "steps_total", "counter", "Forward steps of the engine.", (double)st.steps);
    metric(f, "restarts_total", "counter", "Requests started over when the KV cells ran out.",
           (double)st.restarts);
    metric(f, "queue_depth", "gauge", "Requests waiting for a sequence.", st.queued);
    metric(f, "sequences_busy", "gauge", "Sequences running a request.", st.running);
    metric(f, "sequences_max", "gauge", "Sequences at once (-np).", st.n_seq);
    metric(f, "kv_cells_used", "gauge", "KV cells held by sequences and the prompt cache.", st.cells_used);
    metric(f, "kv_cells_total", "gauge", "KV cells in the cache (-c).", st.cells_total);
    if (st.spec_on) { /* llama-server's spec_decode_* counters */
        metric(f, "spec_decode_num_draft_tokens_total", "counter",
               "Speculative decoding: draft tokens fed beside a sampled token.", (double)st.drafted);
        metric(f, "spec_decode_num_accepted_tokens_total", "counter",
               "Speculative decoding: draft tokens kept (each the token drawn).",
               (double)st.accepted);
        metric(f, "spec_decode_num_drafts_total", "counter",
               "Speculative decoding: spans that verified a draft.", (double)st.draft_steps);
    }
    pthread_mutex_lock(&k->s->mu);
    static const char *const names[SRV_N_ROUTES] = {
        "chat_completions", "completions", "models", "health", "metrics", "tokenize",
        "detokenize", "apply_template", "completion", "props", "infill", "messages",
        "count_tokens", "responses", "slots", "embeddings_openai", "embedding", "slot_action" };
    static const char *const classes[6] = { "2xx", "4xx", "5xx", "401", "413", "503" };
    fprintf(f, "# HELP faultline_http_responses_total HTTP responses by endpoint and status.\n"
               "# TYPE faultline_http_responses_total counter\n");
    for (int r = 0; r < SRV_N_ROUTES; r++)
        for (int c = 0; c < 6; c++)
            if (k->s->responses[r][c])
                fprintf(f, "faultline_http_responses_total{endpoint=\"%s\",status=\"%s\"} %llu\n",
                        names[r], classes[c], (unsigned long long)k->s->responses[r][c]);
    pthread_mutex_unlock(&k->s->mu);
    if (st.paged) { /* the disk tier's pager; RAM and GPU tiers are never waited on */
        fprintf(f, "# HELP faultline_pager_hit_ratio Expert acquires that found the expert resident.\n"
                   "# TYPE faultline_pager_hit_ratio gauge\n"
                   "faultline_pager_hit_ratio{tier=\"disk\"} %.6f\n",
                st.pager_acquires ? (double)st.pager_hits / (double)st.pager_acquires : 0.0);
        fprintf(f, "# HELP faultline_pager_bytes_read_total Expert bytes read from disk.\n"
                   "# TYPE faultline_pager_bytes_read_total counter\n"
                   "faultline_pager_bytes_read_total{tier=\"disk\"} %llu\n",
                (unsigned long long)st.pager_bytes_read);
        fprintf(f, "# HELP faultline_pager_stall_seconds_total Time the engine waited for expert bytes.\n"
                   "# TYPE faultline_pager_stall_seconds_total counter\n"
                   "faultline_pager_stall_seconds_total{tier=\"disk\"} %.6f\n",
                (double)st.pager_stall_ns * 1e-9);
    }
    fclose(f);
    k->status = MHD_HTTP_OK;
    const enum MHD_Result rc = srv_reply(k->c, MHD_HTTP_OK, "text/plain; version=0.0.4", buf, n);
    free(buf);
    return rc;
}

/* with_pieces' piece: the token's text, or its bytes where they are no
 * whole UTF-8 (as llama-server writes them). */
static json_t *piece_json(const struct fl_tokenizer *tok, int32_t id)
{
    char buf[256];
    int n = fl_token_to_piece(tok, id, buf, sizeof(buf), false, true);
    n = n > 0 && (size_t)n <= sizeof(buf) ? n : 0;
    json_t *text = json_stringn(buf, (size_t)n); /* NULL: not valid UTF-8 */
    if (text)
        return json_pack("{s:i, s:o}", "id", id, "piece", text);
    json_t *bytes = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(bytes, json_integer((unsigned char)buf[i]));
    return json_pack("{s:i, s:o}", "id", id, "piece", bytes);
}

/* llama-server's /tokenize: "content", "add_special" (default false),
 * "parse_special" (default true: control tokens' texts are those tokens),
 * "with_pieces" (each token as {"id", "piece"}). */
enum MHD_Result srv_tokenize(struct srv_conn *k)
{
    enum MHD_Result rc;
    json_t *body = srv_body_object(k, &rc);
    if (!body)
        return rc;
    const json_t *content = json_object_get(body, "content");
    bool add_special = false, parse_special = true, pieces = false;
    struct fl_err err = { "" };
    if (!json_is_string(content) || api_field_flag(body, "add_special", &add_special, &err) < 0 ||
        api_field_flag(body, "parse_special", &parse_special, &err) < 0 ||
        api_field_flag(body, "with_pieces", &pieces, &err) < 0) {
        json_decref(body);
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                               "invalid_request", "%s",
                               err.msg[0] ? err.msg : "content: expected a string");
    }
    const struct fl_tokenizer *tok = eng_session_tokenizer(srv_loop_session(k->s->loop));
    int32_t *ids = NULL;
    const int n = fl_tokenize_alloc(tok, json_string_value(content), json_string_length(content),
                                    add_special, parse_special, &ids);
    json_decref(body);
    if (n < 0)
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                               "invalid_request", "content: cannot be tokenized");
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++)
        json_array_append_new(arr, pieces ? piece_json(tok, ids[i]) : json_integer(ids[i]));
    free(ids);
    return srv_reply_json(k, MHD_HTTP_OK, json_pack("{s:o}", "tokens", arr));
}

enum MHD_Result srv_detokenize(struct srv_conn *k)
{
    enum MHD_Result rc;
    json_t *body = srv_body_object(k, &rc);
    if (!body)
        return rc;
    const json_t *tokens = json_object_get(body, "tokens");
    const struct fl_tokenizer *tok = eng_session_tokenizer(srv_loop_session(k->s->loop));
    const int32_t n_vocab = fl_n_vocab(tok);
    const size_t n = json_array_size(tokens);
    int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    const char *bad = !json_is_array(tokens) ? "tokens: expected an array of token ids"
                      : !ids                 ? "out of memory"
                                             : NULL;
    for (size_t i = 0; !bad && i < n; i++) {
        const json_t *t = json_array_get(tokens, i);
        const json_int_t id = json_integer_value(t);
        if (!json_is_integer(t) || id < 0 || id >= n_vocab)
            bad = "tokens: an id outside the vocabulary";
        else
            ids[i] = (int32_t)id;
    }
    json_decref(body);
    /* buf NULL: the length; then the text */
    int len = bad ? 0 : fl_detokenize(tok, ids, (int)n, NULL, 0, false, false);
    char *text = !bad && len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!bad && (!text || fl_detokenize(tok, ids, (int)n, text, (size_t)len + 1, false, false) < 0))
        bad = "tokens: cannot be rendered";
    free(ids);
    if (bad) {
        free(text);
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                               "invalid_request", "%s", bad);
    }
    rc = srv_reply_json(k, MHD_HTTP_OK,
                        json_pack("{s:o}", "content", fl_json_stringn(text, (size_t)len)));
    free(text);
    return rc;
}

enum MHD_Result srv_apply_template(struct srv_conn *k)
{
    enum MHD_Result rc;
    struct api_request req;
    if (!srv_request(k, API_CHAT, SRV_OPENAI, &req, &rc))
        return rc;
    char *text = NULL;
    const char *why = "no chat format is known for this model (--chat-template NAME)";
    const int n = k->s->chat == FL_CHAT_UNKNOWN ? -EINVAL : api_render_chat(k->s->chat, &req, &text, &why);
    api_request_free(&req);
    if (n < 0) {
        free(text);
        return srv_reply_error(k, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_prompt",
                               "%s", why);
    }
    json_t *v = json_pack("{s:o}", "prompt", fl_json_stringn(text, (size_t)n));
    free(text);
    return srv_reply_json(k, MHD_HTTP_OK, v);
}

/* native.c: llama-server's own completion API in `faultline serve`
 * (http.h): /completion's result objects, whole and streamed, and /props. */
#include <stdlib.h>
#include <string.h>

#include "api/native.h"
#include "gguf/gguf.h"
#include "serve/http.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

/* The settings job j ran with, as generation_settings. */
static json_t *job_settings(struct srv *s, const struct eng_session *ses, const struct srv_job *j,
                            int n_predict, bool stream)
{
    const struct api_native_settings st = {
        .sampling = &j->req.sampling, .n_predict = n_predict,
        .stop = (const char *const *)j->stop_copy, .n_stop = j->stop_copy ? j->req.n_stop : 0,
        .ignore_eos = j->req.ignore_eos, .stream = stream,
        .cache_prompt = !j->req.no_prompt_cache, .n_probs = j->req.top_logprobs,
        .grammar = j->req.grammar, .grammar_len = j->req.grammar_len, .model = s->model_name,
        .n_ctx = eng_session_n_ctx(ses),
    };
    return api_native_settings_json(&st);
}

/* The prompt's text, control tokens written out (malloc'ed; NULL: none). */
static char *prompt_text(const struct fl_tokenizer *tok, const struct srv_job *j, size_t *len)
{
    const int n = fl_detokenize(tok, j->prompt_owned, j->req.n_prompt, NULL, 0, false, true);
    char *t = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (t && fl_detokenize(tok, j->prompt_owned, j->req.n_prompt, t, (size_t)n + 1, false, true) < 0) {
        free(t);
        t = NULL;
    }
    *len = t ? (size_t)n : 0;
    return t;
}

/* The tokens' ids of figures v[0..n) (malloc'ed; NULL when n is 0). */
static int32_t *ids_of(const struct fl_token_logprob *v, int n)
{
    int32_t *ids = n > 0 ? malloc(sizeof(*ids) * (size_t)n) : NULL;
    for (int i = 0; ids && i < n; i++)
        ids[i] = v[i].token.id;
    return ids;
}

/* The final object of done job j (of session ses: the loop's mutex may be
 * held, so it is not asked for the session); whole: with the text,
 * the tokens (return_tokens) and the figures (n_probs), which a stream
 * sent already. NULL: out of memory. */
static json_t *final_json(struct srv *s, const struct eng_session *ses, struct srv_job *j,
                          int index, int n_predict, bool whole, bool return_tokens,
                          const char *text, size_t len, const struct fl_token_logprob *lp, int n_lp)
{
    const struct fl_tokenizer *tok = eng_session_tokenizer(ses);
    const struct eng_req_result *r = &j->result;
    size_t plen = 0;
    char *prompt = prompt_text(tok, j, &plen);
    const bool want_ids = whole && return_tokens && n_lp > 0;
    int32_t *ids = want_ids ? ids_of(lp, n_lp) : NULL;
    json_t *settings = job_settings(s, ses, j, n_predict, !whole), *o = NULL;
    const int si = r->stop_index;
    if (prompt && settings && (ids || !want_ids)) {
        const struct api_native_result res = {
            .final = true, .index = index, .content = whole ? text : "", .len = whole ? len : 0,
            .tokens = ids, .n_tokens = ids ? n_lp : 0, .tokens_predicted = r->n_tokens,
            .tokens_evaluated = r->n_prompt,
            .probs = whole && j->req.top_logprobs > 0 ? lp : NULL, .n_probs = n_lp, .tok = tok,
            .model = s->model_name, .prompt = prompt, .prompt_len = plen,
            .stop_type = api_native_stop_type(eng_finish_name(r->finish), si),
            .stopping_word = si >= 0 && si < j->req.n_stop && j->stop_copy ? j->stop_copy[si]
                                                                            : "",
            .tokens_cached = r->n_prompt + r->n_tokens, .cache_n = r->n_cached,
            .prompt_s = r->prompt_s, .predicted_s = r->gen_s, .settings = settings,
            .draft_n = r->n_drafted, .draft_n_accepted = r->n_accepted,
        };
        o = api_native_json(&res); /* takes settings */
    } else {
        json_decref(settings);
    }
    free(ids);
    free(prompt);
    return o;
}

json_t *srv_native_result(struct srv_conn *k, struct srv_job *j, int index)
{
    const struct eng_session *ses = srv_loop_session(k->s->loop);
    srv_loop_lock(k->s->loop);
    char *text = j->len ? strndup(j->text, j->len) : strdup("");
    const int n_lp = j->n_lp_final;
    struct fl_token_logprob *lp = malloc(sizeof(*lp) * (size_t)(n_lp + 1));
    if (lp && n_lp)
        memcpy(lp, j->lp, sizeof(*lp) * (size_t)n_lp);
    const bool failed = j->result.finish == ENG_FINISH_ERROR;
    srv_loop_unlock(k->s->loop);
    json_t *o = !failed && text && lp ? final_json(k->s, ses, j, index, k->n_predict, true,
                                                   k->return_tokens, text, strlen(text), lp, n_lp)
                                      : NULL;
    o = api_native_pick(o, k->fields);
    free(lp);
    free(text);
    return o;
}

/* One event of choice c: text[from, to) and the tokens lp[lp_from, lp_to). */
static void news_event(struct srv_stream *k, int c, const char *text, size_t from, size_t to,
                       int lp_from, int lp_to)
{
    const struct srv_job *j = k->ch[c].job;
    int32_t *ids = ids_of(j->lp + lp_from, lp_to - lp_from);
    const struct api_native_result res = {
        .index = c, .content = text + from, .len = to - from, .tokens = ids,
        .n_tokens = ids ? lp_to - lp_from : 0, .tokens_predicted = j->n_lp,
        .tokens_evaluated = j->req.n_prompt,
        .probs = j->req.top_logprobs > 0 ? j->lp + lp_from : NULL, .n_probs = lp_to - lp_from,
        .tok = eng_session_tokenizer(k->ses),
    };
    srv_sse_event(k, api_native_json(&res));
    free(ids);
}

void srv_native_news(struct srv_stream *k, int c)
{
    struct srv_choice *o = &k->ch[c];
    struct srv_job *j = o->job;
    const size_t whole = j->done ? j->len : fl_utf8_whole(j->text, j->len);
    o->seen = j->len;
    /* a token goes with the event that completes its bytes (one without
     * bytes, once text follows it); when done, every one the answer keeps */
    int lp_end = o->lp_sent;
    while (j->done ? lp_end < j->n_lp_final
                   : lp_end < j->n_lp && j->lp[lp_end].text_end <= whole &&
                         j->lp[lp_end].text_start < whole)
        lp_end++;
    /* and its bytes with it: text whose token's figures have not come yet
     * (the text hook runs first) waits for them, so an event's content is
     * its tokens' text, as llama-server's */
    size_t avail = j->done ? j->len : o->sent;
    if (!j->done && lp_end > 0 && j->lp[lp_end - 1].text_end > avail)
        avail = j->lp[lp_end - 1].text_end;
    if (avail > o->sent || lp_end > o->lp_sent)
        news_event(k, c, j->text, o->sent, avail, o->lp_sent, lp_end);
    o->sent = avail;
    o->lp_sent = lp_end;
    if (!j->done)
        return;
    if (j->result.finish == ENG_FINISH_ERROR) {
        srv_sse_event(k, api_error_json("server_error", "engine_error",
                                        j->error[0] ? j->error : "the request failed"));
    } else {
        /* the loop's mutex is held: the last event is built from the job's
         * fields, which are final now */
        srv_sse_event(k, api_native_pick(final_json(k->s, k->ses, j, c, k->n_predict, false, false,
                                                    NULL, 0, NULL, 0), k->fields));
    }
    o->ended = true;
}

enum MHD_Result srv_props(struct srv_conn *k)
{
    struct srv *s = k->s;
    const struct eng_session *ses = srv_loop_session(s->loop);
    const struct fl_tokenizer *tok = eng_session_tokenizer(ses);
    const struct api_native_settings st = {
        .sampling = &s->o->samp, .n_predict = s->o->max_tokens, .cache_prompt = true,
        .n_ctx = eng_session_n_ctx(ses),
    };
    const char *tmpl = NULL;
    if (gguf_get_str(eng_session_gguf(ses), "tokenizer.chat_template", &tmpl))
        tmpl = "";
    char bos[256] = "", eos[256] = "";
    const int nb = fl_token_bos(tok) >= 0 ? fl_token_to_piece(tok, fl_token_bos(tok), bos,
                                                              sizeof(bos) - 1, false, true) : 0;
    const int ne = fl_token_eos(tok) >= 0 ? fl_token_to_piece(tok, fl_token_eos(tok), eos,
                                                              sizeof(eos) - 1, false, true) : 0;
    bos[nb > 0 ? nb : 0] = eos[ne > 0 ? ne : 0] = '\0';
    json_t *settings = json_pack("{s:i, s:i, s:o, s:b}", "id", 0, "id_task", -1, "params",
                                 api_native_settings_json(&st), "is_processing", false);
    if (settings)
        fl_json_set(settings, "n_ctx", json_integer(st.n_ctx));
    return srv_reply_json(
        k, MHD_HTTP_OK,
        json_pack("{s:o, s:i, s:s, s:s, s:{s:b, s:b, s:b}, s:s, s:s, s:s, s:s, s:s, s:b}",
                  "default_generation_settings", settings, "total_slots",
                  eng_session_n_seq(ses), "model_alias", s->model_name, "model_path",
                  s->o->sp.model_path, "modalities", "vision", false, "video", false, "audio",
                  false, "chat_template", tmpl, "chat_format", fl_chat_format_name(s->chat),
                  "bos_token", bos, "eos_token", eos, "build_info", "faultline " FL_VERSION,
                  "is_sleeping", false));
}

enum MHD_Result srv_slots(struct srv_conn *k)
{
    struct srv *s = k->s;
    if (s->o->no_slots)
        return srv_reply_error(k, 501, "not_supported_error", "not_supported",
                               "This server does not support slots endpoint. Start it with `--slots`");
    const struct eng_session *ses = srv_loop_session(s->loop);
    struct eng_sched_slot *v = NULL;
    struct srv_stats st;
    srv_loop_stats(s->loop, &st);
    const int n = srv_loop_slots(s->loop, &v);
    json_t *arr = n >= 0 ? json_array() : NULL;
    int idle = 0;
    for (int i = 0; arr && i < n; i++) {
        json_t *o = json_pack("{s:i, s:i, s:b, s:b}", "id", i, "n_ctx", eng_session_n_ctx(ses),
                              "speculative", st.spec_on, "is_processing", v[i].busy);
        idle += !v[i].busy;
        if (o && v[i].busy) {
            const struct api_native_settings st = { .sampling = &v[i].sampling,
                                                    .n_predict = v[i].max_tokens,
                                                    .ignore_eos = v[i].ignore_eos,
                                                    .cache_prompt = true, .model = s->model_name,
                                                    .n_ctx = eng_session_n_ctx(ses) };
            fl_json_set(o, "id_task", json_integer(v[i].id));
            fl_json_set(o, "n_prompt_tokens", json_integer(v[i].n_prompt));
            fl_json_set(o, "n_prompt_tokens_processed", json_integer(v[i].n_prompt_done));
            fl_json_set(o, "n_prompt_tokens_cache", json_integer(v[i].n_cached));
            fl_json_set(o, "params", api_native_settings_json(&st));
            fl_json_set(o, "next_token", json_pack("[{s:b, s:b, s:i, s:i}]", "has_next_token",
                                                   v[i].n_remain > 0, "has_new_line", false,
                                                   "n_remain", v[i].n_remain, "n_decoded",
                                                   v[i].n_gen));
        }
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            arr = NULL;
        }
    }
    free(v);
    if (!arr)
        return srv_reply_error(k, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "oom",
                               "out of memory");
    /* llama-server's ?fail_on_no_slot: 503 while every sequence is busy (load balancers) */
    const char *fail = MHD_lookup_connection_value(k->c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
    if (fail && *fail && !idle) {
        json_decref(arr);
        return srv_reply_error(k, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "no_slot",
                               "no slot available");
    }
    return srv_reply_json(k, MHD_HTTP_OK, arr);
}

/* native.c: llama-server's own completion API (native.h): its request
 * fields and its result objects. */
#include "api/native.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/request-fields.h"
#include "api/sampler-fields.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

/* --- the request ------------------------------------------------------------------ */

/* "samplers": names (an array) or letters (a string); llama-server's
 * clients send its whole default chain, so those faultline lacks (infill,
 * adaptive_p) are left out. */
static int parse_samplers(const json_t *b, struct api_request *r, struct fl_err *err)
{
    const json_t *v = json_object_get(b, "samplers");
    if (!v || json_is_null(v))
        return 0;
    int rc;
    if (json_is_string(v)) {
        rc = fl_sampler_parse_seq_lenient(json_string_value(v), &r->sampling, err);
    } else if (json_is_array(v) && json_array_size(v) <= 64) {
        char names[64 * 24] = "";
        size_t at = 0, i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            const char *s = json_string_value(e);
            if (!s || strchr(s, ';') || strlen(s) > 20)
                return api_field_bad(err, "samplers", "expected sampler names (at most 20 bytes, "
                                     "no ';')");
            at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ";" : "", s);
        }
        rc = json_array_size(v) ? fl_sampler_parse_order_lenient(names, &r->sampling, err)
                                : api_field_bad(err, "samplers", "names no sampler");
    } else {
        return api_field_bad(err, "samplers", "expected an array of names or a string of letters");
    }
    if (rc) {
        char why[sizeof(err->msg)];
        snprintf(why, sizeof(why), "%s", err->msg);
        return fl_err_set(err, -EINVAL, "samplers: %s", why);
    }
    r->has_order = true;
    return 0;
}

int api_native_fields(const json_t *b, struct api_request *r, struct fl_err *err)
{
    int64_t n = 0, slot = -1;
    int rc = api_field_integer(b, "n_probs", 0, FL_MAX_TOP_LOGPROBS, &n, err);
    if (rc < 0 || (rc = api_field_flag(b, "return_tokens", &r->return_tokens, err)) < 0 ||
        (rc = api_field_integer(b, "id_slot", -1, INT32_MAX, &slot, err)) < 0)
        return rc;
    if (r->echo)
        return api_field_bad(err, "echo", "is /v1/completions'; /completion's answer has no "
                             "prompt before it");
    const json_t *f = json_object_get(b, "response_fields");
    size_t i;
    const json_t *e;
    if (f && !json_is_null(f) && !json_is_array(f))
        return api_field_bad(err, "response_fields", "expected an array of field paths");
    json_array_foreach(f, i, e) {
        if (!json_is_string(e))
            return fl_err_set(err, -EINVAL, "response_fields[%zu]: expected a string", i);
    }
    r->response_fields = json_array_size(f) ? f : NULL;
    r->n_probs = (int)n;
    r->logprobs = true; /* the tokens' ids and bytes come with their figures */
    r->top_logprobs = (int)n;
    return parse_samplers(b, r, err);
}

/* --- results ---------------------------------------------------------------------- */

json_t *api_native_pick(json_t *res, const json_t *fields)
{
    if (!res || !fields)
        return res;
    json_t *o = json_object();
    size_t i;
    const json_t *e;
    json_array_foreach(fields, i, e) {
        const char *path = json_string_value(e);
        const json_t *v = res;
        for (const char *k = path; v && k;) { /* "timings/prompt_n": each key in turn */
            const char *slash = strchr(k, '/');
            const size_t n = slash ? (size_t)(slash - k) : strlen(k);
            v = json_is_object(v) ? json_object_getn(v, k, n) : NULL;
            k = slash ? slash + 1 : NULL;
        }
        if (o && v)
            json_object_set(o, path, (json_t *)v);
    }
    json_decref(res);
    return o;
}

json_t *api_native_settings_json(const struct api_native_settings *s)
{
    const struct fl_sampler_params *p = s->sampling;
    json_t *stop = json_array(), *samplers = json_array();
    for (int i = 0; i < s->n_stop; i++)
        json_array_append_new(stop, json_string(s->stop[i]));
    struct fl_sampler_params chain; /* n_order 0 runs the default chain: written out */
    fl_sampler_defaults(&chain, 0);
    if (p->n_order)
        chain = *p;
    for (int i = 0; i < chain.n_order; i++)
        json_array_append_new(samplers, json_string(fl_sampler_type_name(chain.order[i])));
    json_t *o = json_pack("{s:I, s:o, s:i, s:o, s:o, s:o, s:i, s:o, s:o, s:o, s:i, s:i, s:i, "
                          "s:o, s:o, s:b, s:b, s:i, s:o, s:b}",
                          "seed", (json_int_t)p->seed, "temperature", fl_json_f32(p->temperature),
                          "top_k", p->top_k, "top_p", fl_json_f32(p->top_p), "min_p",
                          fl_json_f32(p->min_p), "typical_p", fl_json_f32(p->typical_p),
                          "repeat_last_n", p->penalty_last_n, "repeat_penalty",
                          fl_json_f32(p->repeat_penalty), "presence_penalty",
                          fl_json_f32(p->presence_penalty), "frequency_penalty",
                          fl_json_f32(p->frequency_penalty), "n_predict", s->n_predict,
                          "max_tokens", s->n_predict, "min_keep", p->min_keep, "stop", stop,
                          "samplers", samplers, "ignore_eos", s->ignore_eos, "stream", s->stream,
                          "n_probs", s->n_probs, "grammar",
                          s->grammar ? fl_json_stringn(s->grammar, s->grammar_len)
                                     : json_string(""),
                          "cache_prompt", s->cache_prompt);
    if (o)
        api_sampler_fields_report(p, o);
    if (o && s->model)
        fl_json_set(o, "model", json_string(s->model));
    if (o && s->n_ctx > 0)
        fl_json_set(o, "n_ctx", json_integer(s->n_ctx));
    return o;
}

/* {"id", "token", "bytes", "logprob"} */
static json_t *prob_entry(const struct fl_tokenizer *tok, const struct fl_logprob *p)
{
    json_t *bytes = NULL, *text = api_piece_json(tok, p->id, &bytes);
    return json_pack("{s:i, s:o, s:o, s:o}", "id", p->id, "token", text, "bytes", bytes,
                     "logprob", fl_json_f32(p->logprob));
}

/* completion_probabilities: per token its entry and "top_logprobs" */
static json_t *probs_json(const struct fl_tokenizer *tok, const struct fl_token_logprob *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *e = prob_entry(tok, &v[i].token), *top = json_array();
        for (int k = 0; k < v[i].n_top; k++)
            json_array_append_new(top, prob_entry(tok, &v[i].top[k]));
        fl_json_set(e, "top_logprobs", top);
        json_array_append_new(a, e);
    }
    return a;
}

/* llama-server's timings: the prompt's computed tokens (not those read
 * from the cache) over the time to the first token, the generated ones
 * over the rest. */
static json_t *timings_json(const struct api_native_result *r)
{
    const int prompt_n = r->tokens_evaluated - r->cache_n;
    const double pms = r->prompt_s * 1e3, gms = r->predicted_s * 1e3;
    json_t *t = json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", r->cache_n,
                     "prompt_n", prompt_n, "prompt_ms", pms, "prompt_per_token_ms",
                     prompt_n > 0 ? pms / prompt_n : 0.0, "prompt_per_second",
                     pms > 0 ? prompt_n * 1e3 / pms : 0.0, "predicted_n", r->tokens_predicted,
                     "predicted_ms", gms, "predicted_per_token_ms",
                     r->tokens_predicted > 0 ? gms / r->tokens_predicted : 0.0,
                     "predicted_per_second", gms > 0 ? r->tokens_predicted * 1e3 / gms : 0.0);
    if (t && r->draft_n > 0) { /* llama-server's, with speculative decoding */
        fl_json_set(t, "draft_n", json_integer(r->draft_n));
        fl_json_set(t, "draft_n_accepted", json_integer(r->draft_n_accepted));
    }
    return t;
}

json_t *api_native_json(const struct api_native_result *r)
{
    json_t *tokens = json_array();
    for (int i = 0; r->tokens && i < r->n_tokens; i++)
        json_array_append_new(tokens, json_integer(r->tokens[i]));
    json_t *o = json_pack("{s:i, s:o, s:o, s:b, s:i, s:i, s:i}", "index", r->index, "content",
                          fl_json_stringn(r->content ? r->content : "", r->len), "tokens", tokens,
                          "stop", r->final, "id_slot", -1, "tokens_predicted",
                          r->tokens_predicted, "tokens_evaluated", r->tokens_evaluated);
    if (o && r->probs)
        fl_json_set(o, "completion_probabilities", probs_json(r->tok, r->probs, r->n_probs));
    if (!o || !r->final) {
        json_decref(r->settings);
        return o;
    }
    const bool nl = r->content && memchr(r->content, '\n', r->len);
    fl_json_set(o, "model", json_string(r->model ? r->model : ""));
    fl_json_set(o, "generation_settings", r->settings ? r->settings : json_object());
    fl_json_set(o, "prompt", fl_json_stringn(r->prompt ? r->prompt : "", r->prompt_len));
    fl_json_set(o, "has_new_line", json_boolean(nl));
    fl_json_set(o, "truncated", json_false());
    fl_json_set(o, "stop_type", json_string(r->stop_type ? r->stop_type : "none"));
    fl_json_set(o, "stopping_word", json_string(r->stopping_word ? r->stopping_word : ""));
    fl_json_set(o, "tokens_cached", json_integer(r->tokens_cached));
    fl_json_set(o, "timings", timings_json(r));
    return o;
}

const char *api_native_stop_type(const char *finish_reason, int stop_index)
{
    if (finish_reason && !strcmp(finish_reason, "stop"))
        return stop_index >= 0 ? "word" : "eos";
    return finish_reason && !strcmp(finish_reason, "length") ? "limit" : "none";
}

/* --- slot file names ------------------------------------------------------------ */

static bool forbidden(uint32_t c, size_t len)
{
    return (len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
           c <= 0x1f || c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0xff0e || c == 0x2215 ||
           c == 0x2216 || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff || c == 0xfffd ||
           c == 0xfeff || (c < 0x80 && strchr(":*?\"<>|/\\", (int)c));
}

int api_slot_filename(const json_t *body, const char **name)
{
    const json_t *v = json_object_get(body, "filename");
    const char *f = json_string_value(v);
    const size_t n = f ? json_string_length(v) : 0;
    if (!f || n == 0 || n > 255 || strlen(f) != n || f[0] == ' ' || f[n - 1] == ' ' ||
        f[n - 1] == '.' || strstr(f, ".."))
        return -EINVAL;
    for (size_t off = 0; off < n;) { /* overlong forms count as forbidden too */
        const size_t at = off;
        const uint32_t c = fl_utf8_decode(f, n, &off);
        if (forbidden(c, off - at))
            return -EINVAL;
    }
    *name = f;
    return 0;
}

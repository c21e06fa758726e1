/* batch-line.c: OpenAI Batch API lines (openai.h): a line read into a
 * request ("/v1/chat/completions", "/v1/completions", or "/v1/responses"
 * read as the chat it stands for), and the output line written for it. */
#include <stdio.h>
#include <string.h>

#include "api/openai.h"
#include "api/request-fields.h"
#include "api/responses.h"

int api_batch_line_parse(const char *line, size_t n, struct api_batch_line *out,
                         struct fl_err *err)
{
    memset(out, 0, sizeof(*out));
    int rc = fl_json_load_bytes(line, n, false, "the line", &out->doc, err);
    if (rc)
        return rc;
    if (!json_is_object(out->doc))
        return api_field_bad(err, "the line", "expected a JSON object");
    const json_t *id = json_object_get(out->doc, "custom_id");
    if (!json_is_string(id) || !json_string_value(id)[0])
        return api_field_bad(err, "custom_id", "expected a non-empty string");
    out->custom_id = json_string_value(id);
    const char *method = fl_json_str(out->doc, "method"), *url = fl_json_str(out->doc, "url");
    if (json_object_get(out->doc, "method") && (!method || strcmp(method, "POST")))
        return api_field_bad(err, "method", "only POST is served");
    enum api_kind kind = API_CHAT;
    out->responses = url && !strcmp(url, "/v1/responses");
    out->embeddings = url && !strcmp(url, "/v1/embeddings");
    if (url && !strcmp(url, "/v1/completions"))
        kind = API_COMPLETION;
    else if (!url || (strcmp(url, "/v1/chat/completions") && !out->responses && !out->embeddings))
        return api_field_bad(err, "url", "expected \"/v1/chat/completions\", \"/v1/completions\", "
                             "\"/v1/responses\" or \"/v1/embeddings\"");
    json_t *body = json_object_get(out->doc, "body"), *chat = NULL;
    if (!json_is_object(body))
        return api_field_bad(err, "body", "expected an object");
    if (out->embeddings) {
        rc = api_embd_from_json(body, true, API_EMBD_NORM_DEFAULT, &out->embd, err);
        if (!rc && !out->embd.oai) /* "content" is llama-server's /embedding: not in a batch */
            rc = api_field_bad(err, "input", "\"input\" must be provided");
        if (rc) {
            char why[sizeof(err->msg)];
            snprintf(why, sizeof(why), "%s", err->msg);
            fl_err_set(err, rc, "body.%s", why);
        }
        return rc;
    }
    rc = out->responses ? api_responses_to_chat(body, &chat, err) : 0; /* the request keeps chat */
    if (!rc)
        rc = api_request_parse(out->responses ? chat : body, kind, &out->req, err);
    json_decref(chat);
    if (rc) { /* the message names the field inside the body */
        char why[sizeof(err->msg)];
        snprintf(why, sizeof(why), "%s", err->msg);
        fl_err_set(err, rc, "body.%s", why);
    }
    if (!rc && out->req.stream) {
        api_request_free(&out->req);
        return api_field_bad(err, "body.stream", "a batch writes whole answers; leave it out");
    }
    return rc;
}

void api_batch_line_free(struct api_batch_line *l)
{
    if (l->req.doc)
        api_request_free(&l->req);
    if (l->embd.doc)
        api_embd_free(&l->embd);
    json_decref(l->doc);
    memset(l, 0, sizeof(*l));
}

json_t *api_batch_output(const char *custom_id, int line_no, const char *request_id,
                         json_t *body, const char *error_code, const char *error_message)
{
    json_t *o = json_pack("{s:s, s:o}", "id", request_id, "custom_id", fl_json_string(custom_id));
    if (!o) {
        json_decref(body);
        return NULL;
    }
    if (!custom_id)
        fl_json_set(o, "line", json_integer(line_no));
    int rc = 0;
    if (body) {
        rc |= fl_json_set(o, "response", json_pack("{s:i, s:s, s:o}", "status_code", 200,
                                                   "request_id", request_id, "body", body));
        rc |= fl_json_set(o, "error", json_null());
    } else {
        rc |= fl_json_set(o, "response", json_null());
        rc |= fl_json_set(o, "error", json_pack("{s:s, s:o}", "code", error_code ? error_code : "error",
                                                "message", fl_json_string(error_message)));
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

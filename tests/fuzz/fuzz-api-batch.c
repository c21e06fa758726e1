/* fuzz-api-batch: libFuzzer target for the batch-line and request parsers
 * (api/openai.h), and for the documents built from what they accept.
 *
 * Each input is one line. Whatever is accepted must have a custom_id and a
 * prompt or messages, its sampling must merge with defaults, and the
 * completion and output objects built from it must serialise; whatever is
 * refused must say why in one line. A broken contract aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz-api-batch: %s\n", what);
    abort();
}

static void check_accepted(const struct api_batch_line *l)
{
    const struct api_request *r = &l->req;
    if (!l->custom_id || !l->custom_id[0])
        die("accepted without a custom_id");
    if (l->embeddings) { /* inputs, each text or ids; the answer is one line */
        static const float row[2] = { 0.5f, -1.0f };
        const float *rows[1] = { row };
        const int one[1] = { 1 };
        if (l->embd.n_in < 1 || !l->embd.oai)
            die("an embeddings line accepted without inputs");
        for (int i = 0; i < l->embd.n_in; i++)
            if (!l->embd.in[i].text && l->embd.in[i].n_ids < 1)
                die("an embeddings input with neither text nor ids");
        struct api_embd_request e = l->embd;
        e.n_in = 1;
        json_t *o = api_batch_output(l->custom_id, 1, "req",
                                     api_embd_answer(&e, "model", rows, one, 2, one), NULL, NULL);
        char *dump = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!dump || strchr(dump, '\n'))
            die("an embeddings output line that is not one line of JSON");
        free(dump);
        json_decref(o);
        return;
    }
    if (r->kind == API_CHAT ? r->n_msgs == 0
                            : !r->prompt && !r->prompt_mixed && r->n_prompt_ids == 0)
        die("accepted without a prompt");
    for (size_t i = 0; i < r->n_msgs; i++)
        if (!r->msgs[i].role || !r->msgs[i].content)
            die("a message without role or content");
    for (int i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || !r->stop[i][0])
            die("an empty stop string");
    struct fl_sampler_params d, s;
    fl_sampler_defaults(&d, 1);
    api_request_sampling(r, &d, &s);
    if (!(s.temperature >= 0) || !(s.top_p >= 0 && s.top_p <= 1))
        die("sampling out of range");
    const char *text = r->kind == API_CHAT ? r->msgs[0].content : r->prompt ? r->prompt : "";
    const struct api_completion c = { .kind = r->kind, .id = "id", .model = "model", .created = 1,
                                      .text = text, .len = strlen(text), .finish_reason = "stop",
                                      .prompt_tokens = 1, .completion_tokens = 2 };
    json_t *o = api_batch_output(l->custom_id, 1, "req", api_completion_json(&c), NULL, NULL);
    char *dump = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (!dump || strchr(dump, '\n'))
        die("an output line that is not one line of JSON");
    free(dump);
    json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct api_batch_line l;
    struct fl_err err = { "" };
    int rc = api_batch_line_parse((const char *)data, size, &l, &err);
    if (rc == 0)
        check_accepted(&l);
    else if (!err.msg[0] || strchr(err.msg, '\n'))
        die("refused without a one-line reason");
    api_batch_line_free(&l);
    return 0;
}

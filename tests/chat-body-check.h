/* chat-body-check.h: what test-anthropic and test-responses share: another
 * API's request body read into an OpenAI chat body (api/anthropic.h,
 * api/responses.h), checked against the chat body written out by hand and
 * then read by OpenAI's parser, or refused with the error expected.
 * Header-only, after check.h. */
#ifndef FL_TESTS_CHAT_BODY_CHECK_H
#define FL_TESTS_CHAT_BODY_CHECK_H

#include <errno.h>
#include <string.h>

#include "api/openai.h"
#include "tests/json-body.h"

/* api_anthropic_to_chat, api_responses_to_chat */
typedef int (*chat_body_fn)(const json_t *body, json_t **out, struct fl_err *err);


/* fn reads body into chat (both JSON texts), which OpenAI's parser takes. */
static void converts(chat_body_fn fn, const char *body, const char *chat, const char *what)
{
    json_t *in = body_of(body), *want = body_of(chat), *got = NULL;
    struct fl_err err = { "" };
    const int rc = in ? fn(in, &got, &err) : -1;
    char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK(rc == 0 && got && json_equal(got, want), "%s: %s (%s)", what, g ? g : "-", err.msg);
    struct api_request r;
    CHECK(rc || api_request_parse(got, API_CHAT, &r, &err) == 0, "%s: parse: %s", what, err.msg);
    if (!rc)
        api_request_free(&r);
    free(g);
    json_decref(in), json_decref(want), json_decref(got);
}

/* fn refuses body with an error starting with error. */
static void refuses(chat_body_fn fn, const char *body, const char *error)
{
    json_t *in = body_of(body), *got = NULL;
    struct fl_err err = { "" };
    CHECK(in && fn(in, &got, &err) == -EINVAL && !got && !strncmp(err.msg, error, strlen(error)),
          "%s: '%s', want '%s...'", body, err.msg, error);
    json_decref(in);
}

#endif

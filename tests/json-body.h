/* json-body.h: a JSON text written in a test, parsed (a failed check when
 * it is no JSON). Header-only, after check.h. */
#ifndef FL_TESTS_JSON_BODY_H
#define FL_TESTS_JSON_BODY_H

#include <jansson.h>

static inline json_t *body_of(const char *text)
{
    json_t *b = json_loads(text, 0, NULL);
    CHECK(b != NULL, "test body: %s", text);
    return b;
}

#endif

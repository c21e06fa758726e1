/* fuzz-json-mode: libFuzzer target for JSON mode (text/json-schema.h's
 * schema of any object), checked against jansson: the input is a finished
 * object exactly when jansson reads an object that starts it (numbers past
 * jansson's range or with more than 16 digits in a part, texts deeper than
 * FL_SCHEMA_MAX_DEPTH or with whitespace llama.cpp's JSON grammars would
 * not write aside); fed in two pieces split at the first
 * byte's value it gives the same state as fed at once; and a text refused
 * leaves the state as it was. A broken contract aborts. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/json-instance.h"
#include "text/json-schema.h"

/* Whether the automaton's limits, not JSON, could refuse s. */
static int past_limits(const uint8_t *s, size_t n)
{
    int depth = 0, max_depth = 0, digits = 0, max_digits = 0;
    for (size_t i = 0; i < n; i++) {
        digits = s[i] >= '0' && s[i] <= '9' ? digits + 1 : 0;
        max_digits = digits > max_digits ? digits : max_digits;
        depth += s[i] == '{' || s[i] == '[';
        depth -= s[i] == '}' || s[i] == ']';
        max_depth = depth > max_depth ? depth : max_depth;
    }
    return max_depth >= FL_SCHEMA_MAX_DEPTH || max_digits > 16 ||
           !ws_runs_ok((const char *)s, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fl_schema *object;
    static struct fl_schema_state whole, parts, before;
    if (!object && fl_schema_any_object(&object))
        abort();
    fl_schema_init(object, &whole);
    const int ok = fl_schema_feed(object, &whole, (const char *)data, size);
    fl_schema_init(object, &parts);
    const size_t cut = size ? data[0] % (size + 1) : 0;
    before = parts;
    int ok2 = fl_schema_feed(object, &parts, (const char *)data, cut);
    if (!ok2 && !fl_schema_same(&before, &parts))
        abort(); /* refused: the state as it was */
    if (ok2)
        ok2 = fl_schema_feed(object, &parts, (const char *)data + cut, size - cut);
    if (ok != ok2 || (ok && !fl_schema_same(&whole, &parts)))
        abort();
    if (memchr(data, 0, size))
        return 0; /* raw NUL bytes: jansson reads the text up to the first (a C string) */
    json_error_t e;
    /* without JSON_ALLOW_NUL: "\u0000" is refused by both (json-schema.h) */
    json_t *j = json_loadb((const char *)data, size, 0, &e);
    const int theirs = j && json_is_object(j) && size && data[0] == '{';
    json_decref(j);
    /* past jansson's range, or bytes it checks and JSON mode lets through
     * (invalid UTF-8 and lone surrogates in strings: the answer's text is
     * made valid UTF-8 when it is written; a "\u0000" in a key, which JSON
     * allows and jansson's C-string keys cannot hold) */
    if (!j && (strstr(e.text, "overflow") || strstr(e.text, "too big") ||
               strstr(e.text, "decode byte") || strstr(e.text, "Unicode") ||
               strstr(e.text, "NUL byte in object key")))
        return 0;
    if ((ok && fl_schema_done(&whole)) != theirs && !past_limits(data, size))
        abort();
    return 0;
}

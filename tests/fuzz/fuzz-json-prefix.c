/* fuzz-json-prefix: libFuzzer target for JSON mode's automaton
 * (text/json-prefix.h), checked against jansson: the input is a finished
 * object exactly when jansson reads an object that starts it (numbers past
 * jansson's range, texts deeper than FL_JSON_MAX_DEPTH or with longer runs of
 * blanks than FL_JSON_MAX_WS aside); fed in two pieces split at the first
 * byte's value it gives the same state as fed at once; and a text refused
 * leaves the state as it was. A broken contract aborts. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/json-prefix.h"

/* Whether the automaton's limits, not JSON, could refuse s. */
static int past_limits(const uint8_t *s, size_t n)
{
    int depth = 0, max_depth = 0, ws = 0, max_ws = 0;
    for (size_t i = 0; i < n; i++) {
        depth += s[i] == '{' || s[i] == '[';
        depth -= s[i] == '}' || s[i] == ']';
        max_depth = depth > max_depth ? depth : max_depth;
        ws = s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' ? ws + 1 : 0;
        max_ws = ws > max_ws ? ws : max_ws;
    }
    return max_depth >= FL_JSON_MAX_DEPTH || max_ws > FL_JSON_MAX_WS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fl_json_prefix whole, parts, before;
    fl_json_prefix_init(&whole);
    const int ok = fl_json_prefix_feed(&whole, (const char *)data, size);
    fl_json_prefix_init(&parts);
    const size_t cut = size ? data[0] % (size + 1) : 0;
    before = parts;
    int ok2 = fl_json_prefix_feed(&parts, (const char *)data, cut);
    if (!ok2 && memcmp(&before, &parts, sizeof(parts)))
        abort(); /* refused: the state as it was */
    if (ok2)
        ok2 = fl_json_prefix_feed(&parts, (const char *)data + cut, size - cut);
    if (ok != ok2 || (ok && memcmp(&whole, &parts, sizeof(whole))))
        abort();
    if (memchr(data, 0, size))
        return 0; /* jansson (allowing "\u0000") also lets raw NUL bytes through between tokens */
    json_error_t e;
    json_t *j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &e);
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
    if ((ok && whole.done) != theirs && !past_limits(data, size))
        abort();
    return 0;
}

/* fuzz-json-schema: libFuzzer target for the schema compiler and matcher
 * (text/json-schema.h). The input is a schema, a NUL byte, and an answer.
 * A schema either compiles or is refused with one line that starts
 * "json_schema: "; a compiled one reads the answer; an answer it finishes
 * is JSON that the tests' own validator (tests/json-instance.h) says is an
 * instance of the schema (numbers past jansson's range and invalid UTF-8,
 * which the matcher leaves to the writer, aside). Fed in two pieces it
 * gives the same state as fed at once. A broken contract aborts. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/json-instance.h"
#include "text/json-schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul)
        return 0;
    json_t *schema = json_loadb((const char *)data, (size_t)(nul - data), JSON_DECODE_ANY, NULL);
    if (!schema)
        return 0;
    struct fl_schema *s = NULL;
    struct fl_err err = { "" };
    const int rc = fl_schema_compile(schema, &s, &err);
    if (rc && (rc != -22 || strncmp(err.msg, "json_schema: ", 13)))
        abort();
    if (rc) {
        json_decref(schema);
        return 0;
    }
    const char *text = (const char *)nul + 1;
    const size_t n = size - (size_t)(nul - data) - 1;
    static struct fl_schema_state whole, parts;
    fl_schema_init(s, &whole);
    const bool ok = fl_schema_feed(s, &whole, text, n);
    fl_schema_init(s, &parts);
    const size_t cut = n ? (uint8_t)text[0] % (n + 1) : 0;
    const bool ok2 = fl_schema_feed(s, &parts, text, cut) &&
                     fl_schema_feed(s, &parts, text + cut, n - cut);
    if (ok != ok2 || (ok && !fl_schema_same(&whole, &parts)))
        abort();
    if (ok && fl_schema_done(&whole)) {
        json_error_t e;
        json_t *v = json_loadb(text, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
        if (!v && !strstr(e.text, "overflow") && !strstr(e.text, "decode byte") &&
            !strstr(e.text, "Unicode") && !strstr(e.text, "NUL byte in object key"))
            abort(); /* finished, but not JSON */
        if (v && !instance_of(v, schema, schema))
            abort(); /* finished, but not an instance */
        json_decref(v);
    }
    fl_schema_free(s);
    json_decref(schema);
    return 0;
}

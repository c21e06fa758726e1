/* test-json-python: fl_json_dumps_python (base/json.h) writes what Python's
 * json.dumps(v, ensure_ascii=False) writes — the text a chat template's
 * tojson puts into a prompt. The expected text below is Python 3.11's
 * output for the same document (python3 -c 'print(json.dumps(doc,
 * ensure_ascii=False))'), not this code's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tests/check.h"

int main(void)
{
    const char *in = "{\"a\": [0.1, 100.0, 2.5, 1e21, 1e-5, -0.0, 1e16, 1e15, 0.0001, "
                     "0.3333333333333333, 7, -12], \"s\": \"tab\\tq\\\"\\\\ \\u0001 \\u00e9 / \\u007f\", "
                     "\"o\": {\"n\": null, \"t\": true, \"f\": false, \"e\": {}, \"l\": []}}";
    const char *want = "{\"a\": [0.1, 100.0, 2.5, 1e+21, 1e-05, -0.0, 1e+16, 1000000000000000.0, 0.0001, "
                       "0.3333333333333333, 7, -12], \"s\": \"tab\\tq\\\"\\\\ \\u0001 \xc3\xa9 / \x7f\", "
                       "\"o\": {\"n\": null, \"t\": true, \"f\": false, \"e\": {}, \"l\": []}}";
    json_t *v = json_loads(in, 0, NULL);
    char *got = fl_json_dumps_python(v);
    CHECK(got && !strcmp(got, want), "python dumps:\n got %s\nwant %s", got ? got : "(null)", want);
    free(got);
    json_decref(v);
    /* powers of two, whose rounding interval is lopsided: the shortest
     * decimal is not always the nearest one at its length */
    v = json_loads("[7.1202363472230444e-307, 8.2090736025967525e-289, 5e-324, 8.98846567431158e307]",
                   0, NULL);
    got = fl_json_dumps_python(v);
    const char *pow2 = "[7.120236347223045e-307, 8.209073602596753e-289, 5e-324, 8.98846567431158e+307]";
    CHECK(got && !strcmp(got, pow2), "powers of two:\n got %s\nwant %s", got ? got : "(null)", pow2);
    free(got);
    json_decref(v);
    CHECK(fl_json_dumps_python(NULL) == NULL, "NULL in, NULL out");
    return check_summary("test-json-python");
}

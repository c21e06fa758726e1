/* fuzz-grammar: libFuzzer target for the GBNF reader and the matcher
 * (text/grammar.h). The input is a grammar, a NUL byte, and an answer. A
 * grammar either compiles or is refused with one line that starts
 * "grammar: "; a compiled one reads the answer, and fed in two pieces (cut
 * anywhere, inside a UTF-8 character too) it reads the same. A broken
 * contract aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"

static struct fl_grammar_state whole, parts, scratch[2];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul)
        return 0;
    struct fl_grammar *g = NULL;
    struct fl_err err = { "" };
    const int rc = fl_grammar_compile((const char *)data, (size_t)(nul - data), NULL, &g, &err);
    if (rc && (rc != -22 || strncmp(err.msg, "grammar: ", 9) || g))
        abort();
    if (rc)
        return 0;
    const char *text = (const char *)nul + 1;
    const size_t n = size - (size_t)(nul - data) - 1;
    fl_grammar_init(g, &whole);
    const bool ok = fl_grammar_feed(g, &whole, text, n, scratch);
    fl_grammar_init(g, &parts);
    const size_t cut = n ? (uint8_t)text[0] % (n + 1) : 0;
    const bool ok2 = fl_grammar_feed(g, &parts, text, cut, scratch) &&
                     fl_grammar_feed(g, &parts, text + cut, n - cut, scratch);
    if (ok != ok2 || (ok && (whole.n != parts.n || whole.remain != parts.remain ||
                             fl_grammar_may_end(&whole) != fl_grammar_may_end(&parts) ||
                             memcmp(whole.end, parts.end, sizeof(*whole.end) * whole.n))))
        abort();
    if (fl_grammar_done(&whole) && !fl_grammar_may_end(&whole))
        abort();
    fl_grammar_free(g);
    return 0;
}

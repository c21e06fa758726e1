/* json-mode.c: masking a vocabulary to JSON object prefixes (json-mode.h). */
#include "text/json-mode.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

struct fl_json_vocab {
    int32_t n_vocab;
    uint32_t *off;  /* [n_vocab + 1]: token id's piece is bytes[off[id] .. off[id + 1]) */
    char *bytes;
    uint8_t *plain; /* [n_vocab]: a non-empty piece without '"', '\\' or control bytes */
};

static bool plain_piece(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20)
            return false;
    return n > 0;
}

int fl_json_vocab_new(const struct fl_tokenizer *tok, int32_t n_vocab, struct fl_json_vocab **out)
{
    struct fl_json_vocab *v = calloc(1, sizeof(*v));
    size_t cap = 16 * (size_t)n_vocab + 64, used = 0;
    if (v) {
        v->n_vocab = n_vocab;
        v->off = malloc(sizeof(uint32_t) * ((size_t)n_vocab + 1));
        v->bytes = malloc(cap);
        v->plain = malloc((size_t)n_vocab);
    }
    if (!v || !v->off || !v->bytes || !v->plain) {
        fl_json_vocab_free(v);
        return -ENOMEM;
    }
    for (int32_t id = 0; id < n_vocab; id++) {
        v->off[id] = (uint32_t)used;
        char piece[256];
        int n = id < fl_n_vocab(tok) && !fl_token_is_eog(tok, id)
                    ? fl_token_to_piece(tok, id, piece, sizeof(piece), false, false)
                    : 0;
        n = n > 0 && (size_t)n <= sizeof(piece) ? n : 0;
        if (used + (size_t)n > cap) {
            char *b = realloc(v->bytes, cap *= 2);
            if (!b) {
                fl_json_vocab_free(v);
                return -ENOMEM;
            }
            v->bytes = b;
        }
        memcpy(v->bytes + used, piece, (size_t)n);
        used += (size_t)n;
        v->plain[id] = plain_piece(piece, n);
    }
    v->off[n_vocab] = (uint32_t)used;
    *out = v;
    return 0;
}

void fl_json_vocab_free(struct fl_json_vocab *v)
{
    if (!v)
        return;
    free(v->off);
    free(v->bytes);
    free(v->plain);
    free(v);
}

/* Whether token id's piece continues m's text (into *next). */
static bool continues(const struct fl_json_vocab *v, const struct fl_json_prefix *m, int32_t id,
                      struct fl_json_prefix *next)
{
    const uint32_t a = v->off[id], b = v->off[id + 1];
    *next = *m;
    return b > a && fl_json_prefix_feed(next, v->bytes + a, b - a);
}

int32_t fl_json_mask(const struct fl_json_vocab *v, const struct fl_json_prefix *m,
                     const float *row, float *out)
{
    int32_t left = 0;
    struct fl_json_prefix next;
    const bool in_string = fl_json_prefix_in_string(m); /* most of an answer: no scan then */
    for (int32_t id = 0; id < v->n_vocab; id++) {
        const bool ok = !m->done && ((in_string && v->plain[id]) || continues(v, m, id, &next));
        out[id] = ok ? row[id] : -INFINITY;
        left += ok;
    }
    return left;
}

bool fl_json_accept(const struct fl_json_vocab *v, struct fl_json_prefix *m, int32_t id)
{
    struct fl_json_prefix next;
    if (id < 0 || id >= v->n_vocab || !continues(v, m, id, &next))
        return false;
    *m = next;
    return true;
}

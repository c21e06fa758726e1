/* json-mode.c: masking a vocabulary to a schema's prefixes (json-mode.h). */
#include "text/json-mode.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"
#include "text/tokenizer.h"

#define MAX_PIECE 256
/* room for one state of any automaton the walk reads pieces with, kept
 * aligned for any of them */
#define STATE_BYTES (sizeof(struct fl_schema_state) > sizeof(struct fl_grammar_state) \
                         ? sizeof(struct fl_schema_state) : sizeof(struct fl_grammar_state))
#define STATE_ROOM ((STATE_BYTES + 63) & ~(size_t)63)

struct fl_mask_vocab {
    int32_t n_vocab;
    uint32_t *off;   /* [n_vocab + 1]: token id's piece is bytes[off[id] .. off[id + 1]) */
    char *bytes;
    uint8_t *plain;  /* [n_vocab]: a non-empty piece of whole UTF-8 characters, without '"', '\\'
                      * or control bytes */
    uint8_t *eog;    /* [n_vocab]: an end-of-generation token */
    int32_t *order;  /* the ids with a piece, sorted by their bytes */
    uint16_t *lcp;   /* [n_order]: bytes order[i] shares with order[i - 1] */
    int32_t n_order;
    float *zeros, *scratch;  /* [n_vocab] each, made when first asked for */
    unsigned char *at; /* [MAX_PIECE + 1] states of STATE_ROOM: the state after each byte of a
                        * piece */
};

/* Whether s is what a free string may hold anywhere: checked by the
 * matcher itself, as the text of a string of any schema. */
static bool plain_piece(const struct fl_schema *object, struct fl_schema_state *m, const char *s,
                        int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20)
            return false;
    fl_schema_init(object, m);
    return n > 0 && fl_schema_feed(object, m, "{\"", 2) &&
           fl_schema_feed(object, m, s, (size_t)n) && fl_schema_in_free_string(object, m);
}

static uint32_t piece_len(const struct fl_mask_vocab *v, int32_t id)
{
    return v->off[id + 1] - v->off[id];
}

static int by_bytes(const void *a, const void *b, void *ctx)
{
    const struct fl_mask_vocab *v = ctx;
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t lx = piece_len(v, x), ly = piece_len(v, y);
    const int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], lx < ly ? lx : ly);
    return c ? c : lx != ly ? (lx < ly ? -1 : 1) : (x > y) - (x < y);
}

static int render(struct fl_mask_vocab *v, const struct fl_tokenizer *tok)
{
    size_t cap = 16 * (size_t)v->n_vocab + 64, used = 0;
    struct fl_schema *object; /* a free string is what an object's key holds */
    if (fl_schema_any_object(&object))
        return -ENOMEM;
    if (!(v->bytes = malloc(cap))) {
        fl_schema_free(object);
        return -ENOMEM;
    }
    for (int32_t id = 0; id < v->n_vocab; id++) {
        v->off[id] = (uint32_t)used;
        char piece[MAX_PIECE];
        const bool in_vocab = id < fl_n_vocab(tok);
        v->eog[id] = in_vocab && fl_token_is_eog(tok, id);
        int n = in_vocab && !v->eog[id]
                    ? fl_token_to_piece(tok, id, piece, sizeof(piece), false, false)
                    : 0;
        n = n > 0 && (size_t)n <= sizeof(piece) ? n : 0;
        if (used + (size_t)n > cap) {
            char *b = realloc(v->bytes, cap *= 2);
            if (!b) {
                fl_schema_free(object);
                return -ENOMEM;
            }
            v->bytes = b;
        }
        memcpy(v->bytes + used, piece, (size_t)n);
        used += (size_t)n;
        v->plain[id] = plain_piece(object, (struct fl_schema_state *)v->at, piece, n);
        if (n)
            v->order[v->n_order++] = id;
    }
    v->off[v->n_vocab] = (uint32_t)used;
    fl_schema_free(object);
    return 0;
}

int fl_mask_vocab_new(const struct fl_tokenizer *tok, int32_t n_vocab, struct fl_mask_vocab **out)
{
    struct fl_mask_vocab *v = calloc(1, sizeof(*v));
    if (v) {
        v->n_vocab = n_vocab;
        v->off = malloc(sizeof(uint32_t) * ((size_t)n_vocab + 1));
        v->plain = malloc((size_t)n_vocab);
        v->eog = malloc((size_t)n_vocab);
        v->order = malloc(sizeof(int32_t) * (size_t)n_vocab);
        v->lcp = malloc(sizeof(uint16_t) * (size_t)n_vocab);
        v->at = malloc(STATE_ROOM * (MAX_PIECE + 1));
    }
    if (!v || !v->off || !v->plain || !v->eog || !v->order || !v->lcp || !v->at ||
        render(v, tok)) {
        fl_mask_vocab_free(v);
        return -ENOMEM;
    }
    qsort_r(v->order, (size_t)v->n_order, sizeof(int32_t), by_bytes, v);
    for (int32_t i = 0; i < v->n_order; i++) {
        uint32_t k = 0;
        if (i) {
            const int32_t a = v->order[i - 1], b = v->order[i];
            const uint32_t la = piece_len(v, a), lb = piece_len(v, b);
            while (k < la && k < lb && v->bytes[v->off[a] + k] == v->bytes[v->off[b] + k])
                k++;
        }
        v->lcp[i] = (uint16_t)k;
    }
    *out = v;
    return 0;
}

void fl_mask_vocab_free(struct fl_mask_vocab *v)
{
    if (!v)
        return;
    free(v->off);
    free(v->bytes);
    free(v->plain);
    free(v->eog);
    free(v->order);
    free(v->lcp);
    free(v->at);
    free(v->zeros);
    free(v->scratch);
    free(v);
}

/* Whether token id's piece continues m's text (into *next). */
static bool continues(const struct fl_mask_vocab *v, const struct fl_schema *s,
                      const struct fl_schema_state *m, int32_t id, struct fl_schema_state *next)
{
    const uint32_t a = v->off[id], b = v->off[id + 1];
    memcpy(next, m, sizeof(*next));
    return b > a && fl_schema_feed(s, next, v->bytes + a, b - a);
}

/* The sorted pieces walked as a trie: a piece reads on from the state after
 * the prefix it shares with the one before, and every piece that shares a
 * refused prefix is refused without reading. */
int32_t fl_mask_walk(struct fl_mask_vocab *v, fl_mask_step step, const void *prog,
                     const void *start, size_t state_size, const float *row, float *out)
{
    int32_t left = 0;
    uint32_t have = 0, dead = 0; /* states valid for `have` bytes; prefixes of `dead` bytes refused */
    memcpy(v->at, start, state_size);
    for (int32_t i = 0; i < v->n_order; i++) {
        const int32_t id = v->order[i];
        if (dead && v->lcp[i] >= dead)
            continue;
        dead = 0;
        have = have < v->lcp[i] ? have : v->lcp[i];
        const char *p = v->bytes + v->off[id];
        const uint32_t len = piece_len(v, id);
        while (have < len && step(prog, v->at + STATE_ROOM * have, (uint8_t)p[have],
                                  v->at + STATE_ROOM * (have + 1)))
            have++;
        if (have < len) {
            dead = have + 1;
            continue;
        }
        out[id] = row[id];
        left++;
    }
    return left;
}

static bool schema_step(const void *prog, const void *in, uint8_t c, void *out)
{
    return fl_schema_step(prog, in, c, out);
}

const char *fl_mask_piece(const struct fl_mask_vocab *v, int32_t id, uint32_t *len)
{
    *len = piece_len(v, id);
    return v->bytes + v->off[id];
}

bool fl_mask_is_eog(const struct fl_mask_vocab *v, int32_t id)
{
    return v->eog[id];
}

const float *fl_mask_zeros(struct fl_mask_vocab *v)
{
    if (!v->zeros)
        v->zeros = calloc((size_t)v->n_vocab, sizeof(float));
    return v->zeros;
}

float *fl_mask_scratch(struct fl_mask_vocab *v)
{
    if (!v->scratch)
        v->scratch = malloc(sizeof(float) * (size_t)v->n_vocab);
    return v->scratch;
}

int32_t fl_mask_n_vocab(const struct fl_mask_vocab *v)
{
    return v->n_vocab;
}

int32_t fl_json_mask(struct fl_mask_vocab *v, const struct fl_schema *s,
                     const struct fl_schema_state *m, const float *row, float *out)
{
    for (int32_t id = 0; id < v->n_vocab; id++)
        out[id] = -INFINITY;
    int32_t left = 0;
    if (fl_schema_done(m)) {
        /* nothing but whitespace: the caller ends the answer */
    } else if (fl_schema_in_free_string(s, m)) { /* most of an answer: no walk then */
        struct fl_schema_state *next = (struct fl_schema_state *)v->at;
        for (int32_t id = 0; id < v->n_vocab; id++)
            if (v->plain[id] || (piece_len(v, id) && continues(v, s, m, id, next))) {
                out[id] = row[id];
                left++;
            }
    } else {
        left = fl_mask_walk(v, schema_step, s, m, sizeof(*m), row, out);
    }
    if (fl_schema_may_end(m))
        for (int32_t id = 0; id < v->n_vocab; id++)
            if (v->eog[id]) {
                out[id] = row[id];
                left++;
            }
    return left;
}

bool fl_json_accept(const struct fl_mask_vocab *v, const struct fl_schema *s,
                    struct fl_schema_state *m, int32_t id)
{
    if (id < 0 || id >= v->n_vocab)
        return false;
    if (v->eog[id])
        return fl_schema_may_end(m);
    const uint32_t a = v->off[id], b = v->off[id + 1];
    return b > a && fl_schema_feed(s, m, v->bytes + a, b - a);
}

/* constrain.c: an answer held to a schema or a grammar (constrain.h). */
#include "text/constrain.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar.h"
#include "text/json-mode.h"
#include "text/json-schema.h"

/* A grammar's masks remembered by the state they were made in: answers
 * inside a repetition ([a-z]+, .*) come back to the same readings token
 * after token, and a mask is a function of the readings alone. */
#define MEMO 8

struct memo {
    bool used;
    uint64_t hash, last; /* last: when it was last read (the oldest goes first) */
    struct fl_grammar_state state;
    uint64_t *allowed;   /* [words] bits: the tokens that may come next */
    int32_t left;
};

struct fl_constraint {
    const struct fl_schema *schema; /* one of these two */
    const struct fl_grammar *grammar;
    struct memo memo[MEMO];
    uint64_t clock;
    union {
        struct fl_schema_state js;
        struct fl_grammar_state gs;
    } at; /* the answer so far */
    struct fl_grammar_state tmp[3];
};

int fl_constraint_new(const struct fl_schema *schema, const struct fl_grammar *grammar,
                      struct fl_constraint **out)
{
    struct fl_constraint *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    *c = (struct fl_constraint){ .schema = schema, .grammar = schema ? NULL : grammar };
    fl_constraint_reset(c);
    *out = c;
    return 0;
}

void fl_constraint_free(struct fl_constraint *c)
{
    if (!c)
        return;
    for (int i = 0; i < MEMO; i++)
        free(c->memo[i].allowed);
    free(c);
}

void fl_constraint_reset(struct fl_constraint *c)
{
    if (c->schema)
        fl_schema_init(c->schema, &c->at.js);
    else
        fl_grammar_init(c->grammar, &c->at.gs);
}

/* A mask's walk over the vocabulary, its work bounded: past WALK_WORK
 * (readings looked at and references expanded) the pieces not yet read are
 * refused. Ordinary grammars stay far below it (a walk of a 102,400-token
 * vocabulary under a grammar of words or .*: 1.15M in test-grammar); one
 * built to expand at every byte costs seconds a token instead of minutes, the same each time. */
#define WALK_WORK (16ull << 20)

struct walk {
    const struct fl_grammar *g;
    uint64_t work;
};

static bool grammar_step(const void *prog, const void *in, uint8_t c, void *out)
{
    struct walk *w = (struct walk *)prog;
    return w->work < WALK_WORK && fl_grammar_step_work(w->g, in, c, out, &w->work);
}

struct token_mask {
    const struct fl_mask_vocab *v;
    const float *row;
    float *out;
    int32_t left;
};

/* A grammar's `<...>` (id) or `!<...>` (every token with a piece but id):
 * tokens it reads whole, whatever their text. */
static void allow_token(void *ctx, int32_t id, bool except)
{
    struct token_mask *t = ctx;
    const int32_t n = fl_mask_n_vocab(t->v);
    for (int32_t k = except ? 0 : id; k < n && (except || k == id); k++) {
        uint32_t len;
        fl_mask_piece(t->v, k, &len);
        if ((except && (k == id || !len)) || fl_mask_is_eog(t->v, k) || t->out[k] != -INFINITY)
            continue; /* not this one, or allowed already */
        t->out[k] = t->row[k];
        t->left++;
    }
}

/* The readings' mask, as tokens allowed (row's values) or not (-inf). */
static int32_t grammar_walk(struct fl_constraint *c, struct fl_mask_vocab *v, const float *row,
                            float *out)
{
    const int32_t n = fl_mask_n_vocab(v);
    for (int32_t id = 0; id < n; id++)
        out[id] = -INFINITY;
    struct token_mask t = { v, row, out, 0 };
    struct walk w = { c->grammar, 0 };
    if (!fl_grammar_done(&c->at.gs))
        t.left = fl_mask_walk(v, grammar_step, &w, &c->at.gs, sizeof(c->at.gs), row, out);
    fl_grammar_tokens_next(c->grammar, &c->at.gs, allow_token, &t);
    if (fl_grammar_may_end(&c->at.gs))
        for (int32_t id = 0; id < n; id++)
            if (fl_mask_is_eog(v, id)) {
                out[id] = row[id];
                t.left++;
            }
    return t.left;
}

/* The memo of the current readings: found, or made in the oldest slot (NULL
 * when memory runs out: then the walk runs every time). */
static struct memo *remembered(struct fl_constraint *c, struct fl_mask_vocab *v)
{
    const uint64_t h = fl_grammar_hash(&c->at.gs);
    struct memo *slot = &c->memo[0];
    for (int i = 0; i < MEMO; i++) {
        struct memo *m = &c->memo[i];
        if (m->used && m->hash == h && fl_grammar_same(&m->state, &c->at.gs)) {
            m->last = ++c->clock;
            return m;
        }
        if (!m->used || m->last < slot->last)
            slot = m;
    }
    const int32_t n = fl_mask_n_vocab(v);
    const float *zeros = fl_mask_zeros(v);
    float *scratch = fl_mask_scratch(v);
    const size_t words = ((size_t)n + 63) / 64;
    if (!slot->allowed)
        slot->allowed = malloc(sizeof(uint64_t) * words);
    if (!zeros || !scratch || !slot->allowed)
        return NULL;
    slot->left = grammar_walk(c, v, zeros, scratch);
    memset(slot->allowed, 0, sizeof(uint64_t) * words);
    for (int32_t id = 0; id < n; id++)
        if (scratch[id] == 0.0f)
            slot->allowed[id >> 6] |= 1ull << (id & 63);
    fl_grammar_copy(&slot->state, &c->at.gs);
    slot->used = true;
    slot->hash = h;
    slot->last = ++c->clock;
    return slot;
}

static int32_t grammar_mask(struct fl_constraint *c, struct fl_mask_vocab *v, const float *row,
                            float *out)
{
    const struct memo *m = remembered(c, v);
    if (!m)
        return grammar_walk(c, v, row, out);
    const int32_t n = fl_mask_n_vocab(v);
    for (int32_t id = 0; id < n; id++)
        out[id] = m->allowed[id >> 6] >> (id & 63) & 1 ? row[id] : -INFINITY;
    return m->left;
}

int32_t fl_constraint_mask(struct fl_constraint *c, struct fl_mask_vocab *v, const float *row,
                           float *out)
{
    return c->schema ? fl_json_mask(v, c->schema, &c->at.js, row, out)
                     : grammar_mask(c, v, row, out);
}

/* A token read as its text, or as a token the grammar names, or both. */
static bool grammar_accept(struct fl_constraint *c, const struct fl_mask_vocab *v, int32_t id)
{
    if (fl_mask_is_eog(v, id))
        return fl_grammar_may_end(&c->at.gs);
    uint32_t len;
    const char *piece = fl_mask_piece(v, id, &len);
    struct fl_grammar_state *text = &c->tmp[2], *token = &c->tmp[0];
    fl_grammar_copy(text, &c->at.gs);
    const bool by_text = len && fl_grammar_feed(c->grammar, text, piece, len, c->tmp);
    const bool by_token = fl_grammar_take_token(c->grammar, &c->at.gs, id, token);
    if (by_text && by_token)
        fl_grammar_merge(text, token); /* a character left open keeps its reading alone */
    if (by_text || by_token)
        fl_grammar_copy(&c->at.gs, by_text ? text : token);
    return by_text || by_token;
}

bool fl_constraint_accept(struct fl_constraint *c, const struct fl_mask_vocab *v, int32_t id)
{
    if (id < 0 || id >= fl_mask_n_vocab(v))
        return false;
    return c->schema ? fl_json_accept(v, c->schema, &c->at.js, id) : grammar_accept(c, v, id);
}

bool fl_constraint_done(const struct fl_constraint *c)
{
    return c->schema ? fl_schema_done(&c->at.js) : fl_grammar_done(&c->at.gs);
}

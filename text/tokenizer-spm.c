/* tokenizer-spm.c: SentencePiece-style BPE ("llama" vocabularies).
 *
 * The fragment (spaces already escaped as U+2581 by the caller) is split
 * into UTF-8 characters; the adjacent pair whose concatenation is the
 * highest-scoring token is merged first (ties: the leftmost), until no pair
 * forms a token. Symbols that are not tokens fall back to <0xNN> byte
 * tokens. This is llama.cpp's llm_tokenizer_spm, whose ids the reference
 * runs use. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/merge-heap.h"
#include "text/tokenizer-impl.h"
#include "text/unicode.h"

struct spm_sym {
    uint32_t off, n;
    int32_t prev, next;
};

struct spm_bigram {
    int32_t left, right;
    float score;
    uint32_t size;
};

struct spm_state {
    const struct fl_tokenizer *tok;
    const char *text;
    struct spm_sym *sym;
    struct fl_merge_heap heap; /* of struct spm_bigram */
};

/* Highest score first; ties: the leftmost. */
static bool before(const void *pa, const void *pb)
{
    const struct spm_bigram *a = pa, *b = pb;
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int try_bigram(struct spm_state *st, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return 0;
    uint32_t size = st->sym[l].n + st->sym[r].n;
    int32_t id = fl_tok_find(st->tok, st->text + st->sym[l].off, size);
    if (id < 0)
        return 0;
    struct spm_bigram g = { l, r, st->tok->score[id], size };
    return fl_merge_heap_push(&st->heap, &g);
}

static int merge_all(struct spm_state *st, size_t n_sym)
{
    int rc = 0;
    for (size_t i = 1; i < n_sym && !rc; i++)
        rc = try_bigram(st, (int32_t)i - 1, (int32_t)i);
    while (!rc && st->heap.n > 0) {
        struct spm_bigram g;
        fl_merge_heap_pop(&st->heap, &g);
        struct spm_sym *l = &st->sym[g.left], *r = &st->sym[g.right];
        /* Stale: one side has merged since this pair was queued. */
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            st->sym[r->next].prev = g.left;
        rc = try_bigram(st, l->prev, g.left);
        if (!rc)
            rc = try_bigram(st, g.left, l->next);
    }
    return rc;
}

/* A symbol that is no token is spelled as byte tokens. (llama.cpp first
 * tries to undo the merges that built it, but a merged symbol is always a
 * token, so only single characters ever get here.) Without a byte token
 * the unknown token stands in; without that, the input cannot be encoded. */
static int emit(struct spm_state *st, const struct spm_sym *s, struct fl_tokvec *out)
{
    int32_t id = fl_tok_find(st->tok, st->text + s->off, s->n);
    if (id >= 0)
        return fl_tokvec_push(out, id);
    for (uint32_t j = 0; j < s->n; j++) {
        int32_t b = st->tok->byte_token[(uint8_t)st->text[s->off + j]];
        if (b < 0)
            b = st->tok->unk;
        if (b < 0)
            return -EILSEQ;
        int rc = fl_tokvec_push(out, b);
        if (rc)
            return rc;
    }
    return 0;
}

int fl_spm_tokenize(const struct fl_tokenizer *tok, const char *text, size_t len,
                    struct fl_tokvec *out)
{
    struct spm_state st = { .tok = tok, .text = text };
    fl_merge_heap_init(&st.heap, sizeof(struct spm_bigram), before);
    size_t n_sym = 0;
    int rc = 0;
    if (len == 0)
        return 0;
    st.sym = malloc(len * sizeof(*st.sym));
    if (!st.sym)
        return -ENOMEM;
    for (size_t off = 0; off < len; n_sym++) {
        size_t cl = fl_utf8_len((uint8_t)text[off]);
        if (cl > len - off)
            cl = len - off;
        st.sym[n_sym] = (struct spm_sym){ (uint32_t)off, (uint32_t)cl, (int32_t)n_sym - 1,
                                          off + cl == len ? -1 : (int32_t)n_sym + 1 };
        off += cl;
    }
    rc = merge_all(&st, n_sym);
    for (int32_t i = 0; !rc && i != -1; i = st.sym[i].next)
        rc = emit(&st, &st.sym[i], out);
    free(st.sym);
    fl_merge_heap_free(&st.heap);
    return rc;
}

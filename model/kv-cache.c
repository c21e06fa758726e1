/* kv-cache.c: the KV cache as a pool of cells in blocks (kv-cache.h).
 * Free blocks are a stack popped lowest first; each sequence keeps the
 * cell of every position it has room for. A block counts the sequences
 * whose tables hold it (eng_kv_seq_share), and is free when none does. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/kv-cache.h"

struct kv_seq {
    int32_t *cells; /* [cap] */
    int cap;        /* positions with a cell: n_blocks * ENG_KV_BLOCK */
};

struct eng_kv {
    int n_ctx, n_seq, n_blocks, n_free;
    int64_t n_layer;
    const int64_t *k_dim, *v_dim;
    enum fl_type type_k, type_v;
    int rot_k, rot_v;    /* eng_kv_rot_k / _v */
    float *rot_row;      /* a K or V row being rotated before it is stored */
    uint8_t **k, **v;    /* [n_layer] arrays of n_blocks * ENG_KV_BLOCK rows */
    int32_t *free_stack; /* [n_blocks]: free block ids, the next one on top */
    int32_t *ref;        /* [n_blocks]: sequences holding each block */
    struct kv_seq *seq;  /* [n_seq] */
    /* recurrent state: [n_layer] arrays of n_seq * dim floats (NULL dims:
     * none); rs_pos[seq] = positions it covers, -1 = unusable */
    const int64_t *rs_conv_dim, *rs_ssm_dim;
    float **rs_conv, **rs_ssm;
    int32_t *rs_pos;
};

static int alloc_layers(struct eng_kv *kv)
{
    const size_t cells = (size_t)kv->n_blocks * ENG_KV_BLOCK;
    kv->k = calloc((size_t)kv->n_layer, sizeof(*kv->k));
    kv->v = calloc((size_t)kv->n_layer, sizeof(*kv->v));
    int ok = kv->k && kv->v;
    for (int64_t l = 0; ok && l < kv->n_layer; l++) {
        /* calloc: cells never written are never read, and zeroed pages cost
         * nothing until touched. */
        if (kv->k_dim[l] > 0)
            ok = (kv->k[l] = calloc(cells, fl_row_size(kv->type_k, kv->k_dim[l]))) != NULL;
        if (ok && kv->v_dim[l] > 0)
            ok = (kv->v[l] = calloc(cells, fl_row_size(kv->type_v, kv->v_dim[l]))) != NULL;
    }
    return ok;
}

static int alloc_rs(struct eng_kv *kv)
{
    if (!kv->rs_conv_dim)
        return 1;
    kv->rs_conv = calloc((size_t)kv->n_layer, sizeof(*kv->rs_conv));
    kv->rs_ssm = calloc((size_t)kv->n_layer, sizeof(*kv->rs_ssm));
    kv->rs_pos = calloc((size_t)kv->n_seq, sizeof(*kv->rs_pos));
    int ok = kv->rs_conv && kv->rs_ssm && kv->rs_pos;
    for (int64_t l = 0; ok && l < kv->n_layer; l++) {
        if (kv->rs_conv_dim[l] > 0)
            ok = (kv->rs_conv[l] = calloc((size_t)kv->n_seq * (size_t)kv->rs_conv_dim[l],
                                          sizeof(float))) != NULL;
        if (ok && kv->rs_ssm_dim[l] > 0)
            ok = (kv->rs_ssm[l] = calloc((size_t)kv->n_seq * (size_t)kv->rs_ssm_dim[l],
                                         sizeof(float))) != NULL;
    }
    return ok;
}

/* The types a cache may hold, by the names llama.cpp's -ctk takes. */
static const struct { enum fl_type type; const char *name; } cache_types[] = {
    { FL_TYPE_F16, "f16" },   { FL_TYPE_Q8_0, "q8_0" }, { FL_TYPE_Q4_0, "q4_0" },
    { FL_TYPE_Q4_1, "q4_1" }, { FL_TYPE_Q5_0, "q5_0" }, { FL_TYPE_Q5_1, "q5_1" },
    { FL_TYPE_IQ4_NL, "iq4_nl" },
};

int eng_kv_type_parse(const char *name, enum fl_type *out, struct fl_err *err)
{
    const size_t n = sizeof(cache_types) / sizeof(cache_types[0]);
    for (size_t i = 0; name && i < n; i++)
        if (!strcasecmp(name, cache_types[i].name)) {
            *out = cache_types[i].type;
            return 0;
        }
    char list[96] = "";
    for (size_t i = 0, at = 0; i < n && at < sizeof(list); i++)
        at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i == 0 ? "" : i + 1 < n ?
                               ", " : " or ", cache_types[i].name);
    if (!name)
        return fl_err_set(err, -EINVAL, "a KV cache type is needed (%s)", list);
    return fl_err_set(err, -EINVAL, "'%s' is not a KV cache type here (%s)", name, list);
}

const char *eng_kv_type_name(enum fl_type type)
{
    for (size_t i = 0; i < sizeof(cache_types) / sizeof(cache_types[0]); i++)
        if (type == cache_types[i].type)
            return cache_types[i].name;
    return NULL;
}

/* A block type needs whole blocks per head, as ggml's attention reads a
 * head's row by itself (MLA's one row per cell counts as one head). */
static int check_blocks(const struct eng_model *m, enum fl_type type, const char *what,
                        const int64_t *dim, int64_t head, struct fl_err *err)
{
    const int64_t blk = fl_type_traits(type)->blck_size;
    for (int64_t l = 0; l < m->hp.n_layer; l++) {
        if (dim[l] == 0)
            continue;
        const int64_t h = head > 0 && dim[l] % head == 0 ? head : dim[l];
        if (h % blk)
            return fl_err_set(err, -EINVAL, "a %s cache of %s needs heads of whole %lld-value "
                              "blocks; layer %lld's are %lld values (use f16)",
                              what, eng_kv_type_name(type), (long long)blk, (long long)l,
                              (long long)h);
    }
    return 0;
}

/* llama.cpp's choice of rotation (llama_kv_cache's attn_rot_k/_v): K in
 * the largest power-of-two run (64 up) dividing the head, V in runs of 64. */
static int rotation(enum fl_type type, int64_t head, bool whole_head)
{
    if (type == FL_TYPE_F16 || head <= 0 || head % 64)
        return 0;
    int n = 64;
    while (whole_head && head % (2 * n) == 0)
        n *= 2;
    return n;
}

static int64_t widest_row(const struct eng_model *m)
{
    int64_t w = 0;
    for (int64_t l = 0; l < m->hp.n_layer; l++) {
        w = m->kv_k_dim[l] > w ? m->kv_k_dim[l] : w;
        w = m->kv_v_dim[l] > w ? m->kv_v_dim[l] : w;
    }
    return w;
}

/* The type of V rows: K's in an MLA model, whose latent row serves as K
 * and V at once and whose V rows, where a layer has them, are DSA's indexer
 * keys, which llama.cpp keeps in K's type too (-ctv is not read). */
static enum fl_type v_type(const struct eng_model *m, enum fl_type type_k, enum fl_type type_v)
{
    return m->kv_latent ? type_k : type_v;
}

int eng_kv_create(const struct eng_model *m, int n_ctx, int n_seq, enum fl_type type_k,
                  enum fl_type type_v, struct eng_kv **out, struct fl_err *err)
{
    int rc;
    if (!eng_kv_type_name(type_k) || !eng_kv_type_name(type_v))
        return fl_err_set(err, -EINVAL, "a KV cache cannot hold %s", fl_type_name(
                              eng_kv_type_name(type_k) ? type_v : type_k));
    type_v = v_type(m, type_k, type_v);
    if (m->hp.kv_f16_only && (type_k != FL_TYPE_F16 || type_v != FL_TYPE_F16))
        return fl_err_set(err, -EINVAL, "%s: the KV cache stays F16 (-ctk/-ctv %s/%s are not "
                          "supported)", m->hp.kv_f16_only, eng_kv_type_name(type_k),
                          eng_kv_type_name(type_v));
    if ((rc = check_blocks(m, type_k, "K", m->kv_k_dim, m->hp.n_embd_head_k, err)) ||
        (rc = check_blocks(m, type_v, "V", m->kv_v_dim, m->hp.n_embd_head_v, err)))
        return rc;
    if (n_ctx < 1)
        return fl_err_set(err, -EINVAL, "context size %d must be at least 1", n_ctx);
    if (n_seq < 1)
        return fl_err_set(err, -EINVAL, "%d sequences: at least 1 is needed", n_seq);
    if (n_ctx > INT32_MAX - ENG_KV_BLOCK)
        return fl_err_set(err, -EINVAL, "context size %d is too large", n_ctx);
    struct eng_kv *kv = calloc(1, sizeof(*kv));
    if (!kv)
        return fl_err_set(err, -ENOMEM, "out of memory for the KV cache");
    kv->n_ctx = n_ctx;
    kv->n_seq = n_seq;
    kv->n_blocks = (n_ctx + ENG_KV_BLOCK - 1) / ENG_KV_BLOCK;
    kv->n_free = kv->n_blocks;
    kv->n_layer = m->hp.n_layer;
    kv->k_dim = m->kv_k_dim;
    kv->v_dim = m->kv_v_dim;
    kv->type_k = type_k;
    kv->type_v = type_v;
    /* llama.cpp's latent (K-only) attention stores and reads K unrotated, and
     * DSA's model code rotates the indexer keys itself */
    kv->rot_k = m->kv_latent ? 0 : rotation(type_k, m->hp.n_embd_head_k, true);
    kv->rot_v = m->kv_latent ? 0 : rotation(type_v, m->hp.n_embd_head_v, false);
    kv->rs_conv_dim = m->rs_conv_dim;
    kv->rs_ssm_dim = m->rs_ssm_dim;
    kv->free_stack = malloc(sizeof(int32_t) * (size_t)kv->n_blocks);
    kv->ref = calloc((size_t)kv->n_blocks, sizeof(int32_t));
    kv->seq = calloc((size_t)n_seq, sizeof(*kv->seq));
    kv->rot_row = malloc(sizeof(float) * (size_t)(widest_row(m) + 1));
    int ok = kv->free_stack && kv->ref && kv->seq && kv->rot_row && alloc_layers(kv) &&
             alloc_rs(kv);
    if (!ok) {
        eng_kv_destroy(kv);
        return fl_err_set(err, -ENOMEM, "out of memory for a KV cache of %d positions", n_ctx);
    }
    for (int i = 0; i < kv->n_blocks; i++) /* block 0 on top */
        kv->free_stack[i] = kv->n_blocks - 1 - i;
    *out = kv;
    return 0;
}

void eng_kv_destroy(struct eng_kv *kv)
{
    if (!kv)
        return;
    for (int64_t l = 0; l < kv->n_layer; l++) {
        if (kv->k)
            free(kv->k[l]);
        if (kv->v)
            free(kv->v[l]);
        if (kv->rs_conv)
            free(kv->rs_conv[l]);
        if (kv->rs_ssm)
            free(kv->rs_ssm[l]);
    }
    free(kv->rot_row);
    free(kv->rs_conv);
    free(kv->rs_ssm);
    free(kv->rs_pos);
    for (int s = 0; kv->seq && s < kv->n_seq; s++)
        free(kv->seq[s].cells);
    free(kv->seq);
    free(kv->free_stack);
    free(kv->ref);
    free(kv->k);
    free(kv->v);
    free(kv);
}

int eng_kv_n_ctx(const struct eng_kv *kv) { return kv->n_ctx; }
int eng_kv_n_seq(const struct eng_kv *kv) { return kv->n_seq; }
int eng_kv_n_cells(const struct eng_kv *kv) { return kv->n_blocks * ENG_KV_BLOCK; }
int eng_kv_cells_free(const struct eng_kv *kv) { return kv->n_free * ENG_KV_BLOCK; }

static uint64_t cell_bytes(int64_t n_layer, const int64_t *k_dim, const int64_t *v_dim,
                           enum fl_type type_k, enum fl_type type_v)
{
    uint64_t row = 0;
    for (int64_t l = 0; l < n_layer; l++)
        row += fl_row_size(type_k, k_dim[l]) + fl_row_size(type_v, v_dim[l]);
    return row;
}

uint64_t eng_kv_bytes(const struct eng_kv *kv)
{
    return cell_bytes(kv->n_layer, kv->k_dim, kv->v_dim, kv->type_k, kv->type_v) *
           (uint64_t)eng_kv_n_cells(kv);
}

uint64_t eng_kv_cell_bytes(const struct eng_model *m, enum fl_type type_k, enum fl_type type_v)
{
    return cell_bytes(m->hp.n_layer, m->kv_k_dim, m->kv_v_dim, type_k, v_type(m, type_k, type_v));
}

int eng_kv_seq_capacity(const struct eng_kv *kv, int seq)
{
    return seq >= 0 && seq < kv->n_seq ? kv->seq[seq].cap : 0;
}

const int32_t *eng_kv_seq_cells(const struct eng_kv *kv, int seq)
{
    return kv->seq[seq].cells;
}

static int32_t *grow_table(struct kv_seq *s, int cap)
{
    int32_t *cells = realloc(s->cells, sizeof(int32_t) * (size_t)cap);
    if (cells)
        s->cells = cells;
    return cells;
}

/* Blocks seq must take to hold positions 0 .. n_pos-1 (0 or fewer: none). */
static int blocks_needed(const struct kv_seq *s, int n_pos)
{
    return (n_pos - s->cap + ENG_KV_BLOCK - 1) / ENG_KV_BLOCK;
}

int eng_kv_seq_lacks(const struct eng_kv *kv, int seq, int n_pos)
{
    const int need = seq >= 0 && seq < kv->n_seq ? blocks_needed(&kv->seq[seq], n_pos) : 0;
    return need > kv->n_free ? (need - kv->n_free) * ENG_KV_BLOCK : 0;
}

int eng_kv_seq_reserve(struct eng_kv *kv, int seq, int n_pos, struct fl_err *err)
{
    if (seq < 0 || seq >= kv->n_seq)
        return fl_err_set(err, -EINVAL, "sequence %d is outside 0..%d", seq, kv->n_seq - 1);
    if (n_pos > kv->n_ctx)
        return fl_err_set(err, -EINVAL, "%d positions exceed the context of %d", n_pos, kv->n_ctx);
    struct kv_seq *s = &kv->seq[seq];
    const int need = blocks_needed(s, n_pos);
    if (need <= 0)
        return 0;
    if (need > kv->n_free)
        return fl_err_set(err, -ENOSPC, "the KV cache is full: sequence %d needs %d more cells, "
                          "%d of %d are free", seq, need * ENG_KV_BLOCK,
                          eng_kv_cells_free(kv), eng_kv_n_cells(kv));
    int32_t *cells = grow_table(s, s->cap + need * ENG_KV_BLOCK);
    if (!cells)
        return fl_err_set(err, -ENOMEM, "out of memory for a KV block table");
    for (int b = 0; b < need; b++) {
        const int32_t blk = kv->free_stack[--kv->n_free];
        kv->ref[blk] = 1;
        for (int i = 0; i < ENG_KV_BLOCK; i++)
            cells[s->cap + i] = blk * ENG_KV_BLOCK + i;
        s->cap += ENG_KV_BLOCK;
    }
    return 0;
}

void eng_kv_seq_truncate(struct eng_kv *kv, int seq, int n_pos)
{
    if (seq < 0 || seq >= kv->n_seq)
        return;
    struct kv_seq *s = &kv->seq[seq];
    int keep = (n_pos > 0 ? n_pos + ENG_KV_BLOCK - 1 : 0) / ENG_KV_BLOCK * ENG_KV_BLOCK;
    /* a partly kept block that others hold would be written past n_pos:
     * it goes too (its positions are computed again) */
    if (keep > n_pos && keep <= s->cap && kv->ref[s->cells[keep - 1] / ENG_KV_BLOCK] > 1)
        keep -= ENG_KV_BLOCK;
    /* pushed back last block first, so the lowest comes out next */
    while (s->cap > keep) {
        s->cap -= ENG_KV_BLOCK;
        const int32_t blk = s->cells[s->cap] / ENG_KV_BLOCK;
        if (--kv->ref[blk] == 0)
            kv->free_stack[kv->n_free++] = blk;
    }
    if (s->cap == 0) {
        free(s->cells);
        s->cells = NULL;
    }
    if (kv->rs_pos && kv->rs_pos[seq] != n_pos)
        kv->rs_pos[seq] = n_pos == 0 ? 0 : -1;
}

int eng_kv_seq_share(struct eng_kv *kv, int dst, int src, int n_pos, struct fl_err *err)
{
    if (dst < 0 || dst >= kv->n_seq || src < 0 || src >= kv->n_seq || dst == src)
        return fl_err_set(err, -EINVAL, "sharing sequence %d's cells with %d", src, dst);
    struct kv_seq *d = &kv->seq[dst];
    const struct kv_seq *s = &kv->seq[src];
    if (d->cap != 0 || n_pos < 0 || n_pos % ENG_KV_BLOCK || n_pos > s->cap)
        return fl_err_set(err, -EINVAL, "sharing %d positions of sequence %d (it has %d) with "
                          "sequence %d (it has %d): whole blocks, to an empty one", n_pos, src,
                          s->cap, dst, d->cap);
    if (kv->rs_pos) /* the cells, not the state: eng_kv_rs_copy brings it */
        kv->rs_pos[dst] = n_pos == 0 ? 0 : -1;
    if (n_pos == 0)
        return 0;
    if (!grow_table(d, n_pos))
        return fl_err_set(err, -ENOMEM, "out of memory for a KV block table");
    memcpy(d->cells, s->cells, sizeof(int32_t) * (size_t)n_pos);
    d->cap = n_pos;
    for (int p = 0; p < n_pos; p += ENG_KV_BLOCK)
        kv->ref[d->cells[p] / ENG_KV_BLOCK]++;
    return 0;
}

int eng_kv_seq_owned(const struct eng_kv *kv, int seq)
{
    if (seq < 0 || seq >= kv->n_seq)
        return 0;
    const struct kv_seq *s = &kv->seq[seq];
    int n = 0;
    for (int p = 0; p < s->cap; p += ENG_KV_BLOCK)
        n += kv->ref[s->cells[p] / ENG_KV_BLOCK] == 1 ? ENG_KV_BLOCK : 0;
    return n;
}

enum fl_type eng_kv_type_k(const struct eng_kv *kv)
{
    return kv->type_k;
}

enum fl_type eng_kv_type_v(const struct eng_kv *kv)
{
    return kv->type_v;
}

static uint8_t *row_at(uint8_t *const *rows, enum fl_type type, const int64_t *dim, int layer,
                       int cell)
{
    return rows[layer] + (size_t)cell * fl_row_size(type, dim[layer]);
}

const void *eng_kv_k(const struct eng_kv *kv, int layer, int cell)
{
    return row_at(kv->k, kv->type_k, kv->k_dim, layer, cell);
}

const void *eng_kv_v(const struct eng_kv *kv, int layer, int cell)
{
    return row_at(kv->v, kv->type_v, kv->v_dim, layer, cell);
}

int eng_kv_rot_k(const struct eng_kv *kv)
{
    return kv->rot_k;
}

int eng_kv_rot_v(const struct eng_kv *kv)
{
    return kv->rot_v;
}

void eng_kv_rotate(float *x, int64_t n, int rot)
{
    const float scale = 1.0f / sqrtf((float)rot);
    for (int64_t r = 0; r < n; r += rot) {
        float *y = x + r;
        for (int i = 0; i < rot; i++)
            y[i] = y[i] * scale;
        for (int len = 1; len < rot; len <<= 1)
            for (int i = 0; i < rot; i += 2 * len)
                for (int j = 0; j < len; j++) {
                    const float u = y[i + j], v = y[i + len + j];
                    y[i + j] = u + v;
                    y[i + len + j] = u - v;
                }
    }
}

/* One row as ggml's CPU backend stores it (its set_rows): F16 rounded to
 * nearest even, a block type by the CPU backend's own quantizer, after
 * the rotation llama.cpp applies to what it stores. */
static void store_row(struct eng_kv *kv, void *dst, enum fl_type type, int rot, const float *src,
                      int64_t n)
{
    if (rot) {
        memcpy(kv->rot_row, src, sizeof(float) * (size_t)n);
        eng_kv_rotate(kv->rot_row, n, rot);
        src = kv->rot_row;
    }
    if (type == FL_TYPE_F16) {
        fl_f16 *h = dst;
        for (int64_t i = 0; i < n; i++)
            h[i] = fl_f32_to_f16(src[i]);
    } else {
        fl_type_from_float_act(type)(src, dst, n);
    }
}

void eng_kv_write(struct eng_kv *kv, int layer, const int32_t *cells, int n_tok, const float *k,
                  const float *v)
{
    const int64_t kd = kv->k_dim[layer], vd = kv->v_dim[layer];
    for (int t = 0; t < n_tok; t++) {
        if (k && kd)
            store_row(kv, row_at(kv->k, kv->type_k, kv->k_dim, layer, cells[t]), kv->type_k,
                      kv->rot_k, k + t * kd, kd);
        if (v && vd)
            store_row(kv, row_at(kv->v, kv->type_v, kv->v_dim, layer, cells[t]), kv->type_v,
                      kv->rot_v, v + t * vd, vd);
    }
}

bool eng_kv_recurrent(const struct eng_kv *kv)
{
    return kv->rs_pos != NULL;
}

uint64_t eng_kv_rs_bytes(const struct eng_kv *kv)
{
    uint64_t floats = 0;
    for (int64_t l = 0; kv->rs_pos && l < kv->n_layer; l++)
        floats += (uint64_t)(kv->rs_conv_dim[l] + kv->rs_ssm_dim[l]);
    return floats * (uint64_t)kv->n_seq * sizeof(float);
}

int eng_kv_rs_check(const struct eng_kv *kv, int seq, int pos0, struct fl_err *err)
{
    if (!kv->rs_pos || pos0 == 0 || kv->rs_pos[seq] == pos0)
        return 0;
    if (kv->rs_pos[seq] < 0)
        return fl_err_set(err, -EINVAL, "sequence %d: a recurrent model's state was cut back; "
                          "it can only restart at position 0, not %d", seq, pos0);
    return fl_err_set(err, -EINVAL, "sequence %d: a recurrent model's state covers %d "
                      "positions, the batch continues at %d (it can only restart at 0)",
                      seq, kv->rs_pos[seq], pos0);
}

void eng_kv_rs_begin(struct eng_kv *kv, int seq, int pos0, int n_tok)
{
    if (!kv->rs_pos)
        return;
    if (pos0 == 0) {
        for (int64_t l = 0; l < kv->n_layer; l++) {
            if (kv->rs_conv_dim[l] > 0)
                memset(eng_kv_rs_conv(kv, (int)l, seq), 0,
                       sizeof(float) * (size_t)kv->rs_conv_dim[l]);
            if (kv->rs_ssm_dim[l] > 0)
                memset(eng_kv_rs_ssm(kv, (int)l, seq), 0,
                       sizeof(float) * (size_t)kv->rs_ssm_dim[l]);
        }
    }
    kv->rs_pos[seq] = pos0 + n_tok;
}

int eng_kv_rs_pos(const struct eng_kv *kv, int seq)
{
    return kv->rs_pos && seq >= 0 && seq < kv->n_seq ? kv->rs_pos[seq] : 0;
}

void eng_kv_rs_copy(struct eng_kv *kv, int dst, int src)
{
    if (!kv->rs_pos || dst == src || dst < 0 || src < 0 || dst >= kv->n_seq || src >= kv->n_seq)
        return;
    for (int64_t l = 0; l < kv->n_layer; l++) {
        if (kv->rs_conv_dim[l] > 0)
            memcpy(eng_kv_rs_conv(kv, (int)l, dst), eng_kv_rs_conv(kv, (int)l, src),
                   sizeof(float) * (size_t)kv->rs_conv_dim[l]);
        if (kv->rs_ssm_dim[l] > 0)
            memcpy(eng_kv_rs_ssm(kv, (int)l, dst), eng_kv_rs_ssm(kv, (int)l, src),
                   sizeof(float) * (size_t)kv->rs_ssm_dim[l]);
    }
    kv->rs_pos[dst] = kv->rs_pos[src];
}

/* seq's state and buf, one way or the other (to_buf). */
static void rs_move(const struct eng_kv *kv, int seq, float *buf, bool to_buf)
{
    for (int64_t l = 0; kv->rs_pos && l < kv->n_layer; l++) {
        float *const parts[2] = { kv->rs_conv[l] + (int64_t)seq * kv->rs_conv_dim[l],
                                  kv->rs_ssm[l] + (int64_t)seq * kv->rs_ssm_dim[l] };
        const int64_t dims[2] = { kv->rs_conv_dim[l], kv->rs_ssm_dim[l] };
        for (int k = 0; k < 2; k++) {
            if (dims[k] <= 0)
                continue;
            memcpy(to_buf ? buf : parts[k], to_buf ? parts[k] : buf, sizeof(float) * (size_t)dims[k]);
            buf += dims[k];
        }
    }
}

void eng_kv_rs_save(const struct eng_kv *kv, int seq, float *buf)
{
    if (seq >= 0 && seq < kv->n_seq)
        rs_move(kv, seq, buf, true);
}

void eng_kv_rs_restore(struct eng_kv *kv, int seq, const float *buf, int n_pos)
{
    if (!kv->rs_pos || seq < 0 || seq >= kv->n_seq)
        return;
    rs_move(kv, seq, (float *)buf, false);
    kv->rs_pos[seq] = n_pos;
}

float *eng_kv_rs_conv(struct eng_kv *kv, int layer, int seq)
{
    return kv->rs_conv[layer] + (int64_t)seq * kv->rs_conv_dim[layer];
}

float *eng_kv_rs_ssm(struct eng_kv *kv, int layer, int seq)
{
    return kv->rs_ssm[layer] + (int64_t)seq * kv->rs_ssm_dim[layer];
}

/* --- a sequence's positions as bytes ------------------------------------------ */

uint64_t eng_kv_seq_bytes(const struct eng_kv *kv, int n_pos)
{
    const uint64_t state = kv->rs_pos ? eng_kv_rs_bytes(kv) / (uint64_t)kv->n_seq : 0;
    return cell_bytes(kv->n_layer, kv->k_dim, kv->v_dim, kv->type_k, kv->type_v) *
           (uint64_t)n_pos + state;
}

/* One layer's rows of positions [0, n) of seq through io (rows NULL: no
 * such rows); positions from n_cells on go through a scratch row instead
 * of the cache (read and dropped). */
static int layer_rows(uint8_t *const *rows, enum fl_type type, const int64_t *dim, int layer,
                      const int32_t *cells, int n_cells, int n, uint8_t *drop,
                      eng_kv_io_fn io, void *arg)
{
    if (dim[layer] <= 0)
        return 0;
    const size_t len = fl_row_size(type, dim[layer]);
    for (int pos = 0; pos < n; pos++) {
        int rc = io(arg, pos < n_cells ? row_at(rows, type, dim, layer, cells[pos]) : drop, len);
        if (rc)
            return rc;
    }
    return 0;
}

/* Every layer's recurrent state of seq through io (into drop when !keep). */
static int state_rows(struct eng_kv *kv, int seq, bool keep, float *drop, eng_kv_io_fn io,
                      void *arg)
{
    for (int64_t l = 0; kv->rs_pos && l < kv->n_layer; l++) {
        const int64_t d[2] = { kv->rs_conv_dim[l], kv->rs_ssm_dim[l] };
        for (int i = 0; i < 2; i++) {
            if (d[i] <= 0)
                continue;
            float *row = !keep ? drop : i ? eng_kv_rs_ssm(kv, (int)l, seq)
                                          : eng_kv_rs_conv(kv, (int)l, seq);
            int rc = io(arg, row, sizeof(float) * (size_t)d[i]);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The largest row a walk moves: a K or V row or a layer's state. */
static size_t widest_bytes(const struct eng_kv *kv)
{
    size_t w = 0;
    for (int64_t l = 0; l < kv->n_layer; l++) {
        const size_t r[4] = {
            kv->k_dim[l] > 0 ? fl_row_size(kv->type_k, kv->k_dim[l]) : 0,
            kv->v_dim[l] > 0 ? fl_row_size(kv->type_v, kv->v_dim[l]) : 0,
            kv->rs_pos ? sizeof(float) * (size_t)kv->rs_conv_dim[l] : 0,
            kv->rs_pos ? sizeof(float) * (size_t)kv->rs_ssm_dim[l] : 0,
        };
        for (int i = 0; i < 4; i++)
            w = r[i] > w ? r[i] : w;
    }
    return w;
}

static int seq_walk(struct eng_kv *kv, int seq, int n_file, int n_keep, eng_kv_io_fn io,
                    void *arg)
{
    const int32_t *cells = kv->seq[seq].cells;
    uint8_t *drop = NULL;
    if (n_keep < n_file && !(drop = malloc(widest_bytes(kv))))
        return -ENOMEM;
    int rc = 0;
    for (int64_t l = 0; !rc && l < kv->n_layer; l++) {
        rc = layer_rows(kv->k, kv->type_k, kv->k_dim, (int)l, cells, n_keep, n_file, drop, io, arg);
        if (!rc)
            rc = layer_rows(kv->v, kv->type_v, kv->v_dim, (int)l, cells, n_keep, n_file, drop,
                            io, arg);
    }
    if (!rc)
        rc = state_rows(kv, seq, n_keep == n_file, (float *)drop, io, arg);
    free(drop);
    return rc;
}

int eng_kv_seq_save(const struct eng_kv *kv, int seq, int n_pos, eng_kv_io_fn put, void *arg)
{
    if (seq < 0 || seq >= kv->n_seq || n_pos < 0 || n_pos > kv->seq[seq].cap ||
        (kv->rs_pos && kv->rs_pos[seq] != n_pos))
        return -EINVAL;
    /* the walk only reads the cache when saving (put never writes to buf) */
    return seq_walk((struct eng_kv *)kv, seq, n_pos, n_pos, put, arg);
}

int eng_kv_seq_load(struct eng_kv *kv, int seq, int n_file, int n_keep, eng_kv_io_fn get,
                    void *arg)
{
    if (seq < 0 || seq >= kv->n_seq || n_keep < 0 || n_keep > n_file ||
        n_keep > kv->seq[seq].cap || (kv->rs_pos && n_keep != n_file))
        return -EINVAL;
    int rc = seq_walk(kv, seq, n_file, n_keep, get, arg);
    if (!rc && kv->rs_pos)
        kv->rs_pos[seq] = n_keep;
    else if (rc && kv->rs_pos)
        kv->rs_pos[seq] = -1; /* part of a state came in: unusable */
    return rc;
}

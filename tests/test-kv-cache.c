/* test-kv-cache: the pool of KV cells (model/kv-cache.h): blocks taken as
 * sequences grow and given back when freed, and blocks shared between
 * sequences (a cached prompt prefix), held until the last holder lets go;
 * block-type caches (-ctk/-ctv): their bytes, their rotation against the
 * Walsh-Hadamard matrix written out, the rows they store, and what they
 * refuse. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kv-cache.h"
#include "tests/check.h"

#define B ENG_KV_BLOCK

static struct eng_model *fake_model(bool recurrent)
{
    struct eng_model *m = calloc(1, sizeof(*m));
    m->hp.n_layer = 2;
    m->kv_k_dim = calloc(2, sizeof(int64_t));
    m->kv_v_dim = calloc(2, sizeof(int64_t));
    m->kv_k_dim[0] = m->kv_k_dim[1] = 8;
    m->kv_v_dim[0] = m->kv_v_dim[1] = 4;
    if (recurrent) {
        m->rs_conv_dim = calloc(2, sizeof(int64_t));
        m->rs_ssm_dim = calloc(2, sizeof(int64_t));
        m->rs_conv_dim[1] = 6;
        m->rs_ssm_dim[1] = 10;
    }
    return m;
}

static void free_fake(struct eng_model *m)
{
    free(m->kv_k_dim);
    free(m->kv_v_dim);
    free(m->rs_conv_dim);
    free(m->rs_ssm_dim);
    free(m);
}

/* Whether a cell appears in seq's table. */
static bool holds(const struct eng_kv *kv, int seq, int cell)
{
    const int32_t *c = eng_kv_seq_cells(kv, seq);
    for (int p = 0; p < eng_kv_seq_capacity(kv, seq); p++)
        if (c[p] == cell)
            return true;
    return false;
}

/* Growing and freeing: blocks lowest first, a lone sequence 0 has cell =
 * position, -ENOSPC takes nothing. */
static void test_grow_free(struct eng_kv *kv)
{
    struct fl_err err;
    const int total = eng_kv_n_cells(kv);
    CHECK(total == 8 * B && eng_kv_cells_free(kv) == total, "pool of %d cells", total);
    CHECK(eng_kv_seq_reserve(kv, 0, 3 * B - 5, &err) == 0, "reserve: %s", err.msg);
    CHECK(eng_kv_seq_capacity(kv, 0) == 3 * B, "capacity %d", eng_kv_seq_capacity(kv, 0));
    for (int p = 0; p < 3 * B; p++)
        CHECK(eng_kv_seq_cells(kv, 0)[p] == p, "position %d in cell %d", p,
              eng_kv_seq_cells(kv, 0)[p]);
    CHECK(eng_kv_seq_reserve(kv, 1, 6 * B, &err) == -ENOSPC && eng_kv_cells_free(kv) == 5 * B,
          "a reserve beyond the pool must take nothing (%d free)", eng_kv_cells_free(kv));
    CHECK(eng_kv_seq_lacks(kv, 1, 6 * B) == B && eng_kv_seq_lacks(kv, 1, 5 * B) == 0 &&
              eng_kv_seq_lacks(kv, 0, 8 * B) == 0,
          "lacks: %d cells for 6 blocks with 5 free", eng_kv_seq_lacks(kv, 1, 6 * B));
    eng_kv_seq_truncate(kv, 0, B + 1); /* keeps 2 blocks */
    CHECK(eng_kv_seq_capacity(kv, 0) == 2 * B && eng_kv_cells_free(kv) == 6 * B,
          "truncate: capacity %d, %d free", eng_kv_seq_capacity(kv, 0), eng_kv_cells_free(kv));
    eng_kv_seq_truncate(kv, 0, 0);
    CHECK(eng_kv_cells_free(kv) == total, "free: %d of %d", eng_kv_cells_free(kv), total);
}

/* Sharing: dst reads src's first blocks; the blocks are free only once
 * both gave them back, whatever the order. */
static void test_share(struct eng_kv *kv)
{
    struct fl_err err;
    const int total = eng_kv_n_cells(kv);
    CHECK(eng_kv_seq_reserve(kv, 0, 3 * B, &err) == 0, "reserve: %s", err.msg);
    CHECK(eng_kv_seq_share(kv, 1, 0, 2 * B, &err) == 0, "share: %s", err.msg);
    CHECK(eng_kv_cells_free(kv) == total - 3 * B, "sharing takes no cells (%d free)",
          eng_kv_cells_free(kv));
    CHECK(eng_kv_seq_owned(kv, 0) == B && eng_kv_seq_owned(kv, 1) == 0,
          "owned: src %d (its third block), dst %d", eng_kv_seq_owned(kv, 0),
          eng_kv_seq_owned(kv, 1));
    CHECK(!memcmp(eng_kv_seq_cells(kv, 1), eng_kv_seq_cells(kv, 0), sizeof(int32_t) * 2 * B),
          "dst's positions must be src's cells");
    CHECK(eng_kv_seq_reserve(kv, 1, 3 * B, &err) == 0, "dst grows: %s", err.msg);
    CHECK(!holds(kv, 0, eng_kv_seq_cells(kv, 1)[2 * B]), "dst must grow into a block of its own");
    CHECK(eng_kv_cells_free(kv) == total - 4 * B, "%d free", eng_kv_cells_free(kv));
    eng_kv_seq_truncate(kv, 0, 0); /* src goes first: its third block only is free */
    CHECK(eng_kv_cells_free(kv) == total - 3 * B, "after src: %d free", eng_kv_cells_free(kv));
    CHECK(eng_kv_seq_reserve(kv, 2, 5 * B, &err) == 0, "another sequence: %s", err.msg);
    for (int p = 0; p < 2 * B; p++) /* the shared blocks were not handed out again */
        CHECK(!holds(kv, 2, eng_kv_seq_cells(kv, 1)[p]), "a held cell went to sequence 2");
    eng_kv_seq_truncate(kv, 2, 0);
    /* dst then shares to a third, and cuts back inside a shared block: that
     * block goes (it would be written past the cut), its own copy stays */
    CHECK(eng_kv_seq_share(kv, 2, 1, 2 * B, &err) == 0, "share again: %s", err.msg);
    eng_kv_seq_truncate(kv, 1, B + 3);
    CHECK(eng_kv_seq_capacity(kv, 1) == B, "a cut inside a shared block keeps %d, not %d",
          eng_kv_seq_capacity(kv, 1), B);
    CHECK(eng_kv_seq_capacity(kv, 2) == 2 * B && eng_kv_cells_free(kv) == total - 2 * B,
          "the other holder keeps both blocks (%d free)", eng_kv_cells_free(kv));
    eng_kv_seq_truncate(kv, 1, 0);
    eng_kv_seq_truncate(kv, 2, 0);
    CHECK(eng_kv_cells_free(kv) == total, "all back: %d of %d", eng_kv_cells_free(kv), total);
}

static void test_share_refused(struct eng_kv *kv)
{
    struct fl_err err;
    CHECK(eng_kv_seq_reserve(kv, 0, 2 * B, &err) == 0 && eng_kv_seq_reserve(kv, 1, 1, &err) == 0,
          "reserve: %s", err.msg);
    CHECK(eng_kv_seq_share(kv, 2, 0, B + 1, &err) == -EINVAL, "part of a block");
    CHECK(eng_kv_seq_share(kv, 2, 0, 3 * B, &err) == -EINVAL, "more than src has");
    CHECK(eng_kv_seq_share(kv, 1, 0, B, &err) == -EINVAL, "into a sequence that has cells");
    CHECK(eng_kv_seq_share(kv, 0, 0, B, &err) == -EINVAL, "into itself");
    CHECK(eng_kv_seq_share(kv, 9, 0, B, &err) == -EINVAL, "an unknown sequence");
    CHECK(eng_kv_seq_share(kv, 2, 0, 0, &err) == 0 && eng_kv_seq_capacity(kv, 2) == 0,
          "nothing shared");
    eng_kv_seq_truncate(kv, 0, 0);
    eng_kv_seq_truncate(kv, 1, 0);
    CHECK(eng_kv_cells_free(kv) == eng_kv_n_cells(kv), "all back");
}

/* Sylvester's H_n / sqrt(n) written out: entry (i, j) is -1 to the number
 * of bits i and j share. */
static double hadamard(int i, int j, int n)
{
    return (__builtin_popcount((unsigned)(i & j)) % 2 ? -1.0 : 1.0) / sqrt((double)n);
}

static void test_rotation(void)
{
    float x[256], y[256];
    for (int i = 0; i < 256; i++)
        x[i] = y[i] = sinf(0.37f * (float)i) * (float)(1 + i % 7);
    eng_kv_rotate(y, 256, 128); /* two runs of 128 */
    double worst = 0;
    for (int r = 0; r < 256; r += 128)
        for (int i = 0; i < 128; i++) {
            double want = 0;
            for (int j = 0; j < 128; j++)
                want += hadamard(i, j, 128) * x[r + j];
            worst = fmax(worst, fabs(want - y[r + i]));
        }
    CHECK(worst < 1e-5, "rotation: %.3g from H_128 x", worst);
}

static void test_block_types(void)
{
    struct fl_err err;
    enum fl_type t;
    CHECK(eng_kv_type_parse("q8_0", &t, &err) == 0 && t == FL_TYPE_Q8_0, "q8_0");
    CHECK(eng_kv_type_parse("IQ4_NL", &t, &err) == 0 && t == FL_TYPE_IQ4_NL, "IQ4_NL");
    CHECK(eng_kv_type_parse("bf16", &t, &err) == -EINVAL && strstr(err.msg, "q8_0"),
          "bf16 refused, naming the types: %s", err.msg);
    CHECK(eng_kv_type_parse(NULL, &t, &err) == -EINVAL, "no name");

    struct eng_model *m = fake_model(false); /* 2 KV heads of 128 (K) and 64 (V) */
    m->hp.n_embd_head_k = 128, m->hp.n_embd_head_v = 64;
    m->kv_k_dim[0] = m->kv_k_dim[1] = 256;
    m->kv_v_dim[0] = m->kv_v_dim[1] = 128;
    struct eng_kv *kv;
    CHECK(eng_kv_create(m, 2 * B, 1, FL_TYPE_Q8_0, FL_TYPE_Q4_K, &kv, &err) == -EINVAL &&
              strstr(err.msg, "Q4_K"), "a type a cache cannot hold: %s", err.msg);
    CHECK(eng_kv_create(m, 2 * B, 1, FL_TYPE_Q8_0, FL_TYPE_Q4_0, &kv, &err) == 0, "%s", err.msg);
    CHECK(eng_kv_bytes(kv) == 2u * B * 2 * (256 / 32 * 34 + 128 / 32 * 18), "bytes %llu",
          (unsigned long long)eng_kv_bytes(kv));
    CHECK(eng_kv_rot_k(kv) == 128 && eng_kv_rot_v(kv) == 64, "rotations %d %d",
          eng_kv_rot_k(kv), eng_kv_rot_v(kv));
    /* a K row is stored rotated and quantized: dequantized and rotated back
     * it is the row within Q8_0's error */
    float k[256], back[256];
    for (int i = 0; i < 256; i++)
        k[i] = i == 5 ? 40.0f : cosf(0.1f * (float)i); /* an outlier the rotation spreads */
    const int32_t cell = 3;
    CHECK(eng_kv_seq_reserve(kv, 0, 4, &err) == 0, "%s", err.msg);
    eng_kv_write(kv, 1, &cell, 1, k, NULL);
    fl_type_traits(FL_TYPE_Q8_0)->to_float(eng_kv_k(kv, 1, cell), back, 256);
    eng_kv_rotate(back, 256, 128);
    double worst = 0;
    for (int i = 0; i < 256; i++)
        worst = fmax(worst, fabs(back[i] - k[i]));
    CHECK(worst < 0.05, "K row back from the cache: %.3g off", worst);
    eng_kv_destroy(kv);
    CHECK(eng_kv_create(m, B, 1, FL_TYPE_F16, FL_TYPE_F16, &kv, &err) == 0 &&
              eng_kv_rot_k(kv) == 0 && eng_kv_rot_v(kv) == 0, "F16: not rotated");
    eng_kv_destroy(kv);

    m->hp.n_embd_head_v = 48, m->kv_v_dim[0] = m->kv_v_dim[1] = 96; /* heads of 48 */
    CHECK(eng_kv_create(m, B, 1, FL_TYPE_F16, FL_TYPE_Q8_0, &kv, &err) == -EINVAL &&
              strstr(err.msg, "32-value blocks"), "heads of 48 refused: %s", err.msg);
    CHECK(eng_kv_create(m, B, 1, FL_TYPE_Q8_0, FL_TYPE_F16, &kv, &err) == 0, "K alone: %s",
          err.msg);
    eng_kv_destroy(kv);
    /* MLA: one latent row, K only; DSA: layer 1's V row is its indexer key.
     * Both in K's type (-ctv is not read), neither rotated, as llama.cpp
     * keeps a latent cache */
    m->kv_v_dim[0] = 0, m->kv_v_dim[1] = 128;
    m->kv_latent = true;
    CHECK(eng_kv_create(m, B, 1, FL_TYPE_Q8_0, FL_TYPE_F16, &kv, &err) == 0 &&
              eng_kv_type_v(kv) == FL_TYPE_Q8_0 && eng_kv_rot_k(kv) == 0 &&
              eng_kv_rot_v(kv) == 0 &&
              eng_kv_bytes(kv) == (uint64_t)B * (2 * 256 + 128) / 32 * 34 &&
              eng_kv_cell_bytes(m, FL_TYPE_Q8_0, FL_TYPE_F16) == (2 * 256 + 128) / 32 * 34,
          "MLA q8_0: V in K's type, unrotated: %s", err.msg);
    eng_kv_write(kv, 1, &cell, 1, k, k);
    fl_type_traits(FL_TYPE_Q8_0)->to_float(eng_kv_k(kv, 1, cell), back, 256);
    worst = 0;
    for (int i = 0; i < 256; i++)
        worst = fmax(worst, fabs(back[i] - k[i]));
    CHECK(worst < 0.5, "a latent row back from the cache as it went in: %.3g off", worst);
    eng_kv_destroy(kv);
    m->kv_k_dim[0] = 80; /* deepseek2-tiny's latent rows: 80 values */
    CHECK(eng_kv_create(m, B, 1, FL_TYPE_Q8_0, FL_TYPE_Q8_0, &kv, &err) == -EINVAL &&
              strstr(err.msg, "32-value blocks"), "latent rows of 80 refused: %s", err.msg);
    free_fake(m);
}

int main(void)
{
    struct fl_err err;
    test_rotation();
    test_block_types();
    struct eng_model *m = fake_model(false);
    struct eng_kv *kv;
    CHECK(eng_kv_create(m, 8 * B - 3, 4, FL_TYPE_F16, FL_TYPE_F16, &kv, &err) == 0, "create: %s", err.msg);
    test_grow_free(kv);
    test_share(kv);
    test_share_refused(kv);
    eng_kv_destroy(kv);
    free_fake(m);

    /* a recurrent state sums every position: shared cells leave the state
     * unusable until a copy brings the source's (a prompt cache's snapshot) */
    m = fake_model(true);
    CHECK(eng_kv_create(m, 4 * B, 3, FL_TYPE_F16, FL_TYPE_F16, &kv, &err) == 0, "create: %s", err.msg);
    CHECK(eng_kv_seq_reserve(kv, 0, 2 * B, &err) == 0, "reserve: %s", err.msg);
    eng_kv_rs_begin(kv, 0, 0, B);
    for (int l = 0; l < (int)m->hp.n_layer; l++)
        for (int64_t i = 0; m->rs_ssm_dim[l] > 0 && i < m->rs_ssm_dim[l]; i++)
            eng_kv_rs_ssm(kv, l, 0)[i] = (float)(l * 1000 + i);
    CHECK(eng_kv_seq_share(kv, 1, 0, B, &err) == 0 && eng_kv_rs_pos(kv, 1) == -1 &&
              eng_kv_rs_check(kv, 1, B, &err) == -EINVAL,
          "shared cells: the state is not usable yet");
    eng_kv_rs_copy(kv, 1, 0);
    bool same = eng_kv_rs_pos(kv, 1) == B && eng_kv_rs_check(kv, 1, B, &err) == 0;
    for (int l = 0; l < (int)m->hp.n_layer; l++)
        for (int64_t i = 0; m->rs_ssm_dim[l] > 0 && i < m->rs_ssm_dim[l]; i++)
            same = same && eng_kv_rs_ssm(kv, l, 1)[i] == (float)(l * 1000 + i);
    CHECK(same, "the copied state: the source's, at its position");
    eng_kv_rs_begin(kv, 0, B, 1); /* the source goes on; the copy stays */
    CHECK(eng_kv_rs_pos(kv, 0) == B + 1 && eng_kv_rs_pos(kv, 1) == B, "independent after the copy");
    eng_kv_destroy(kv);
    free_fake(m);
    return check_summary("test-kv-cache");
}

/* test-kv-cache: the pool of KV cells (model/kv-cache.h): blocks taken as
 * sequences grow and given back when freed, and blocks shared between
 * sequences (a cached prompt prefix), held until the last holder lets go. */
#include <errno.h>
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

int main(void)
{
    struct fl_err err;
    struct eng_model *m = fake_model(false);
    struct eng_kv *kv;
    CHECK(eng_kv_create(m, 8 * B - 3, 4, &kv, &err) == 0, "create: %s", err.msg);
    test_grow_free(kv);
    test_share(kv);
    test_share_refused(kv);
    eng_kv_destroy(kv);
    free_fake(m);

    /* a recurrent state sums every position: shared cells leave the state
     * unusable until a copy brings the source's (a prompt cache's snapshot) */
    m = fake_model(true);
    CHECK(eng_kv_create(m, 4 * B, 3, &kv, &err) == 0, "create: %s", err.msg);
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

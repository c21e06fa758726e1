/* matmul.c: activation quantization and the blocked, threaded matmul.
 *
 * The output [tokens x rows] is cut into units of (row block x token block);
 * each thread works through its own contiguous share of the units and then
 * takes units from the back of the others' (see mm_round). Inside a unit,
 * register tiles of tile_r rows x tile_c tokens go to the ISA's tile
 * kernel, which loads each weight block once for tile_c tokens. Unit and
 * tile boundaries only decide which outputs share loads; every output is
 * computed by the same sequence, so y does not depend on the thread count
 * (see matmul.h). */
#include "backend/cpu/matmul.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "backend/cpu/cpu-impl.h"
#include "backend/cpu/threadpool.h"

/* Token block: the activation rows one unit sweeps (64 rows of a 4096-wide
 * Q8 input are ~280 KB: they stay in L2 while the unit's weight rows are
 * streamed past them once). */
#define FL_MM_TOKEN_BLOCK 64
/* Rows per tile for one token (decode). Each weight byte is then used once
 * and comes from DRAM: reading one row after another makes each thread's
 * reads a single sequential stream, which the hardware prefetcher follows;
 * 2-4 rows read side by side (the register tiles) interleave streams and
 * ran up to 2.5x slower on Zen 4 with weights larger than the caches
 * (bench-kernels -m 65536: Q8_0, Q6_K, 4096-wide Q4_K), while sharing the
 * one token's activation loads gains little. Rows only choose which
 * outputs share loads, so this changes no bits (see matmul.h). A one-token
 * kernel (tile1) that reads its rows one after another takes tile1_r rows
 * per call instead. */
#define FL_MM_DECODE_ROWS 1
/* Units per thread to aim for. A thread works through a contiguous share
 * of them (one sequential stream), so they only set how fine the end of a
 * round is balanced: the last unit is the most a thread waits for another.
 * (Session 3 had one shared counter, where threads hop between units and
 * 8 per thread ran slower than 2 for decode; with shares, 8 left the
 * threads of a 2-thread Q4_K decode spinning 10.9 % of their time against
 * 14.4 % at 2, perf on tg300.) */
#define FL_MM_UNITS_PER_THREAD 8
/* Below this many input values, quantizing on one thread is cheaper than
 * waking the pool. */
#define FL_MM_QUANT_SERIAL 8192
/* Below this many multiply-adds (a few microseconds), the same for the
 * matmul itself: small experts with few tokens. */
#define FL_MM_SERIAL_MACS (1 << 15)
/* Products per fl_matmul_batch (matmul.h says 64). */
#define FL_MM_BATCH_MAX 64

int fl_act_type(uint32_t w_type)
{
    const struct fl_type_traits *t = fl_type_traits(w_type);
    if (!t || (!t->vec_dot_ref && !t->is_layout))
        return -1;
    return (int)t->vec_dot_type;
}

static int check_row_len(uint32_t type, int64_t n)
{
    const struct fl_type_traits *t = fl_type_traits(type);
    if (!t || n <= 0 || n > INT32_MAX || n % t->blck_size != 0)
        return -EINVAL;
    return 0;
}

/* Q8_0 activations carry per-block sums after the rows, from a 64-byte
 * boundary. */
static size_t sums_offset(int64_t n_in, int64_t n_tok)
{
    return ((size_t)n_tok * fl_row_size(FL_TYPE_Q8_0, n_in) + 63) & ~(size_t)63;
}

size_t fl_matmul_scratch_size(uint32_t w_type, int64_t n_in, int64_t n_tok)
{
    const int at = fl_act_type(w_type);
    if (at < 0 || at == FL_TYPE_F32 || n_tok <= 0 || check_row_len((uint32_t)at, n_in) < 0)
        return 0;
    if (at == FL_TYPE_Q8_0)
        return sums_offset(n_in, n_tok) + (size_t)(n_tok * (n_in / FL_QK8_0)) * sizeof(int16_t);
    return (size_t)n_tok * fl_row_size((uint32_t)at, n_in);
}

/* --- activation quantization ---------------------------------------------- */

struct quant_job {
    fl_act_quant_fn fn;
    const float *x;
    int64_t ldx, n_tok, nb;  /* nb: blocks per row */
    int blck;
    size_t blk_bytes, stride;
    char *dst;
    int16_t *sums;           /* Q8_0: per-block sums of the quants, or NULL */
};

static void block_sums(const struct fl_block_q8_0 *b, int16_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int s = 0;
        for (int j = 0; j < FL_QK8_0; j++)
            s += b[i].qs[j];
        out[i] = (int16_t)s;
    }
}

/* Thread ith quantizes a contiguous range of the n_tok * nb blocks, so a
 * single long row is split too. */
static void quant_run(void *arg, int ith, int nth)
{
    const struct quant_job *j = arg;
    int64_t u0, u1;
    fl_split_range(j->n_tok * j->nb, ith, nth, &u0, &u1);
    while (u0 < u1) {
        const int64_t t = u0 / j->nb, b0 = u0 % j->nb;
        const int64_t b1 = (u1 - t * j->nb) < j->nb ? u1 - t * j->nb : j->nb;
        char *dst = j->dst + (size_t)t * j->stride + (size_t)b0 * j->blk_bytes;
        j->fn(j->x + t * j->ldx + b0 * j->blck, dst, (b1 - b0) * j->blck);
        if (j->sums)
            block_sums((const struct fl_block_q8_0 *)dst, j->sums + t * j->nb + b0, b1 - b0);
        u0 = t * j->nb + b1;
    }
}

int fl_quantize_act(struct fl_pool *pool, uint32_t w_type, const float *x, int64_t n_in,
                    int64_t n_tok, int64_t ldx, void *scratch, struct fl_qact *out)
{
    const int at = fl_act_type(w_type);
    if (at < 0 || check_row_len(w_type, n_in) < 0 || n_tok < 0 || ldx < n_in)
        return -EINVAL;
    out->type = (uint32_t)at;
    out->n_in = n_in;
    out->n_tok = n_tok;
    out->sums = NULL;
    if (at == FL_TYPE_F32) {
        out->data = x;
        out->row_stride = (size_t)ldx * sizeof(float);
        return 0;
    }
    const struct fl_type_traits *t = fl_type_traits((uint32_t)at);
    const struct fl_cpu_kernels *k = fl_cpu_kernels();
    struct quant_job j = {
        .fn = k->quant[at] ? k->quant[at] : fl_type_from_float_act((uint32_t)at),
        .x = x, .ldx = ldx, .n_tok = n_tok, .nb = n_in / t->blck_size,
        .blck = t->blck_size, .blk_bytes = t->type_size,
        .stride = fl_row_size((uint32_t)at, n_in), .dst = scratch,
    };
    if (!j.fn)
        return -EINVAL;
    if (at == FL_TYPE_Q8_0)
        j.sums = (int16_t *)((char *)scratch + sums_offset(n_in, n_tok));
    out->data = scratch;
    out->row_stride = j.stride;
    out->sums = j.sums;
    if (n_tok * n_in < FL_MM_QUANT_SERIAL)
        quant_run(&j, 0, 1);
    else
        fl_pool_run(pool, quant_run, &j);
    return 0;
}

/* --- the matmul ------------------------------------------------------------ */

struct mm_job {
    fl_tile_fn tile;
    fl_vec_dot_fn vec_dot;
    int tr, tc;
    const char *w;
    size_t ws;
    int n_in;
    int64_t n_out;
    const struct fl_qact *xq;
    const int32_t *rows, *out_rows;
    int64_t n_rows;
    float *y;
    int64_t ldy;
    int64_t row_block, n_row_blocks, n_units;
};

static void mm_tile(const struct mm_job *j, int64_t r0, int nr, int64_t t0, int nc)
{
    const void *xs[FL_TILE_MAX_C];
    const int16_t *sums[FL_TILE_MAX_C];
    float *ys[FL_TILE_MAX_C];
    const int64_t nb = j->n_in / FL_QK8_0;
    for (int c = 0; c < nc; c++) {
        const int64_t t = t0 + c;
        const int64_t src = j->rows ? j->rows[t] : t;
        const int64_t dst = j->out_rows ? j->out_rows[t] : t;
        xs[c] = (const char *)j->xq->data + (size_t)src * j->xq->row_stride;
        sums[c] = j->xq->sums ? j->xq->sums + src * nb : NULL;
        ys[c] = j->y + dst * j->ldy + r0;
    }
    const char *w = j->w + (size_t)r0 * j->ws;
    if (j->tile) {
        j->tile(j->n_in, nr, w, j->ws, nc, xs, j->xq->sums ? sums : NULL, ys);
        return;
    }
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            j->vec_dot(j->n_in, &ys[c][r], w + (size_t)r * j->ws, xs[c]);
}

/* One unit: rows [r0, r1) x tokens [t0, t1), row tiles outermost so a
 * tile's weight rows stay in L1 while the unit's tokens pass by. */
static void mm_unit(const struct mm_job *j, int64_t r0, int64_t r1, int64_t t0, int64_t t1)
{
    for (int64_t r = r0; r < r1; r += j->tr) {
        const int nr = (int)(r1 - r < j->tr ? r1 - r : j->tr);
        for (int64_t t = t0; t < t1; t += j->tc)
            mm_tile(j, r, nr, t, (int)(t1 - t < j->tc ? t1 - t : j->tc));
    }
}

/* Unit u of a job: consecutive units share a token block, whose
 * activations then stay in cache. */
static void mm_do_unit(const struct mm_job *j, int64_t u)
{
    const int64_t tb = u / j->n_row_blocks, rb = u % j->n_row_blocks;
    const int64_t r0 = rb * j->row_block;
    const int64_t r1 = r0 + j->row_block < j->n_out ? r0 + j->row_block : j->n_out;
    const int64_t t0 = tb * FL_MM_TOKEN_BLOCK;
    const int64_t t1 = t0 + FL_MM_TOKEN_BLOCK < j->n_rows ? t0 + FL_MM_TOKEN_BLOCK : j->n_rows;
    mm_unit(j, r0, r1, t0, t1);
}

/* Row block: a multiple of the tile height giving each thread several
 * units, but at least 16 rows so a unit amortizes its bookkeeping. */
static int64_t pick_row_block(int64_t n_out, int64_t n_token_blocks, int nth, int tr)
{
    const int64_t want_units = (int64_t)nth * FL_MM_UNITS_PER_THREAD;
    int64_t per = n_token_blocks >= want_units ? n_out : n_out * n_token_blocks / want_units;
    if (per < 16)
        per = 16;
    per = (per + tr - 1) / tr * tr;
    return per < n_out ? per : n_out;
}

/* Checks one product and plans its units for nth threads: 0, 1 when there
 * is nothing to compute, or -EINVAL. */
static int mm_plan(struct mm_job *j, int nth, const struct fl_matmul_task *t)
{
    const int at = fl_act_type(t->w_type);
    const struct fl_qact *xq = t->xq;
    if (at < 0 || !xq || xq->type != (uint32_t)at || check_row_len(t->w_type, xq->n_in) < 0 ||
        t->n_out < 0 || t->n_rows < 0 || t->ldy < t->n_out)
        return -EINVAL;
    for (int64_t i = 0; t->rows && i < t->n_rows; i++)
        if (t->rows[i] < 0 || t->rows[i] >= xq->n_tok)
            return -EINVAL;
    if (!t->rows && t->n_rows > xq->n_tok)
        return -EINVAL;
    if (t->n_out == 0 || t->n_rows == 0)
        return 1;
    const struct fl_cpu_kernels *k = fl_cpu_kernels();
    const uint32_t wt = t->w_type;
    const int one = t->n_rows == 1 && k->tile1[wt];
    const int amx = k->amx[wt] && t->n_rows >= k->amx_min[wt];
    *j = (struct mm_job){
        .tile = amx ? k->amx[wt] : one ? k->tile1[wt] : k->tile[wt], .vec_dot = k->vec_dot[wt],
        .tr = amx ? k->amx_r[wt] : one ? k->tile1_r[wt] : t->n_rows == 1 ? FL_MM_DECODE_ROWS : k->tile_r[wt],
        .tc = amx ? k->amx_c[wt] : k->tile_c[wt],
        .w = t->w, .ws = fl_row_size(wt, xq->n_in), .n_in = (int)xq->n_in,
        .n_out = t->n_out, .xq = xq, .rows = t->rows, .out_rows = t->out_rows,
        .n_rows = t->n_rows, .y = t->y, .ldy = t->ldy,
    };
    if (!j->tile && !j->vec_dot)
        return -EINVAL;
    if (!j->tile)
        j->tr = j->tc = 1;
    const int64_t n_tb = (t->n_rows + FL_MM_TOKEN_BLOCK - 1) / FL_MM_TOKEN_BLOCK;
    j->row_block = pick_row_block(t->n_out, n_tb, nth, j->tr);
    j->n_row_blocks = (t->n_out + j->row_block - 1) / j->row_block;
    j->n_units = j->n_row_blocks * n_tb;
    return 0;
}

/* --- one pool round over the units of one or more products ----------------
 * Thread i owns a contiguous share of the units, taken front to back: one
 * sequential stream of weights per thread (what the hardware prefetcher
 * follows). A thread whose share is done takes units from the back of the
 * largest remaining share, so a round ends at most one unit after the
 * last thread runs out of work, and units can be small (a decode step's
 * tails cost one unit, not one per thread's share). Which thread computes
 * a unit changes no bits. */
#define FL_MM_SHARES 256 /* threads beyond this only take from the backs */
struct mm_round {
    const struct mm_job *jobs;
    int64_t first[FL_MM_BATCH_MAX + 1]; /* unit u of the round is unit u - first[i] of job i */
    int n_jobs, n_shares;
    _Alignas(64) _Atomic uint64_t share[FL_MM_SHARES]; /* next | end << 32 */
};

static bool take_front(_Atomic uint64_t *sh, int64_t *u)
{
    uint64_t v = atomic_load_explicit(sh, memory_order_relaxed);
    for (;;) {
        const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
        if (lo >= hi)
            return false;
        if (atomic_compare_exchange_weak(sh, &v, (uint64_t)(lo + 1) | (uint64_t)hi << 32)) {
            *u = lo;
            return true;
        }
    }
}

static bool take_back(struct mm_round *r, int64_t *u)
{
    for (;;) {
        int best = -1;
        uint32_t most = 0;
        for (int i = 0; i < r->n_shares; i++) {
            const uint64_t v = atomic_load_explicit(&r->share[i], memory_order_relaxed);
            const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
            if (hi > lo && hi - lo > most) {
                most = hi - lo;
                best = i;
            }
        }
        if (best < 0)
            return false;
        uint64_t v = atomic_load_explicit(&r->share[best], memory_order_relaxed);
        const uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
        if (lo < hi &&
            atomic_compare_exchange_strong(&r->share[best], &v, (uint64_t)lo | (uint64_t)(hi - 1) << 32)) {
            *u = hi - 1;
            return true;
        }
    }
}

static void mm_round_run(void *arg, int ith, int nth)
{
    (void)nth;
    struct mm_round *r = arg;
    int i = 0;
    int64_t u;
    while ((ith < r->n_shares && take_front(&r->share[ith], &u)) || take_back(r, &u)) {
        while (u >= r->first[i + 1])
            i++;
        while (u < r->first[i])
            i--;
        mm_do_unit(&r->jobs[i], u - r->first[i]);
    }
}

/* Runs the round's planned jobs (first[] filled) on pool, or on this
 * thread when the work is small. */
static void mm_round_exec(struct fl_pool *pool, struct mm_round *r, double macs)
{
    const int64_t total = r->first[r->n_jobs];
    const bool serial = total <= 1 || macs < FL_MM_SERIAL_MACS || fl_pool_size(pool) <= 1;
    const int nth = serial ? 1 : fl_pool_size(pool);
    r->n_shares = nth < FL_MM_SHARES ? nth : FL_MM_SHARES;
    for (int i = 0; i < r->n_shares; i++) {
        int64_t lo, hi;
        fl_split_range(total, i, r->n_shares, &lo, &hi);
        atomic_init(&r->share[i], (uint64_t)lo | (uint64_t)hi << 32);
    }
    if (serial)
        mm_round_run(r, 0, 1);
    else
        fl_pool_run(pool, mm_round_run, r);
}

/* Plans tasks into jobs[] and runs them in one round r (both the
 * caller's: on the stack for one product). 0 or -EINVAL (nothing run). */
static int mm_batch(struct fl_pool *pool, const struct fl_matmul_task *tasks, int n_tasks,
                    struct mm_job *jobs, struct mm_round *r)
{
    const int nth = fl_pool_size(pool);
    double macs = 0;
    int n = 0;
    r->first[0] = 0;
    for (int i = 0; i < n_tasks; i++) {
        const int rc = mm_plan(&jobs[n], nth, &tasks[i]);
        if (rc < 0)
            return rc;
        if (rc)
            continue;
        macs += (double)tasks[i].n_out * (double)tasks[i].n_rows * (double)tasks[i].xq->n_in;
        r->first[n + 1] = r->first[n] + jobs[n].n_units;
        n++;
    }
    if (r->first[n] > UINT32_MAX)
        return -EINVAL;
    r->jobs = jobs;
    r->n_jobs = n;
    mm_round_exec(pool, r, macs);
    return 0;
}

int fl_matmul_rows(struct fl_pool *pool, const void *w, uint32_t w_type, int64_t n_out,
                   const struct fl_qact *xq, const int32_t *rows, int64_t n_rows,
                   float *y, int64_t ldy, const int32_t *out_rows)
{
    const struct fl_matmul_task t = { .w = w, .w_type = w_type, .n_out = n_out, .xq = xq,
                                      .rows = rows, .n_rows = n_rows, .y = y, .ldy = ldy,
                                      .out_rows = out_rows };
    struct mm_job j;
    struct mm_round r;
    return mm_batch(pool, &t, 1, &j, &r);
}

int fl_matmul_batch(struct fl_pool *pool, const struct fl_matmul_task *tasks, int n_tasks)
{
    if (n_tasks < 0 || n_tasks > FL_MM_BATCH_MAX || (n_tasks && !tasks))
        return -EINVAL;
    struct mm_job *jobs = malloc(sizeof(*jobs) * (size_t)(n_tasks > 0 ? n_tasks : 1));
    struct mm_round *r = malloc(sizeof(*r));
    int rc = jobs && r ? mm_batch(pool, tasks, n_tasks, jobs, r) : -ENOMEM;
    free(jobs);
    free(r);
    return rc;
}

int fl_matmul_q(struct fl_pool *pool, const void *w, uint32_t w_type, int64_t n_out,
                const struct fl_qact *xq, float *y, int64_t ldy)
{
    if (!xq)
        return -EINVAL;
    return fl_matmul_rows(pool, w, w_type, n_out, xq, NULL, xq->n_tok, y, ldy, NULL);
}

int fl_matmul(struct fl_pool *pool, const void *w, uint32_t w_type, int64_t n_in, int64_t n_out,
              const float *x, int64_t n_tok, float *y, void *scratch)
{
    struct fl_qact xq;
    int rc = fl_quantize_act(pool, w_type, x, n_in, n_tok, n_in, scratch, &xq);
    if (rc < 0)
        return rc;
    return fl_matmul_q(pool, w, w_type, n_out, &xq, y, n_out);
}

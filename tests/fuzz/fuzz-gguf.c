/* fuzz-gguf: libFuzzer target for the GGUF header reader.
 *
 * The input is a whole file (file_size = size). Whatever the reader accepts
 * is walked completely: every key looked up by name, every value and array
 * element read (nested ones too), every tensor looked up and its byte range
 * checked against the file, so ASan/UBSan see every byte the reader hands
 * out. The MoE layout is computed from it too, and every expert slice must
 * lie inside its tensor. A violated invariant aborts, which libFuzzer
 * reports as a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/moe-layout.h"
#include "gguf/tensor-types.h"

static uint64_t sink;

static void walk(const struct gguf_value *v)
{
    int64_t i;
    if (v->type == GGUF_VT_STRING) {
        sink += v->str.len + (unsigned char)v->str.data[v->str.len];
        return;
    }
    if (v->type != GGUF_VT_ARRAY) {
        if (!gguf_value_int(v, &i))
            sink += (uint64_t)i;
        return;
    }
    if (v->arr.type == GGUF_VT_STRING) {
        const struct gguf_str *s = v->arr.elems;
        for (uint64_t k = 0; k < v->arr.n; k++)
            sink += s[k].len + (unsigned char)s[k].data[s[k].len];
    } else if (v->arr.type == GGUF_VT_ARRAY) {
        const struct gguf_value *a = v->arr.elems;
        for (uint64_t k = 0; k < v->arr.n; k++)
            walk(&a[k]);
    } else if (v->arr.type == GGUF_VT_BOOL) {
        const bool *b = v->arr.elems;
        for (uint64_t k = 0; k < v->arr.n; k++)
            sink += b[k];
    } else if (v->arr.n) {
        static const size_t size[GGUF_VT_COUNT] = {
            [GGUF_VT_UINT8] = 1, [GGUF_VT_INT8] = 1, [GGUF_VT_UINT16] = 2, [GGUF_VT_INT16] = 2,
            [GGUF_VT_UINT32] = 4, [GGUF_VT_INT32] = 4, [GGUF_VT_FLOAT32] = 4,
            [GGUF_VT_UINT64] = 8, [GGUF_VT_INT64] = 8, [GGUF_VT_FLOAT64] = 8,
        };
        const unsigned char *bytes = v->arr.elems;
        sink += bytes[0] + bytes[v->arr.n * size[v->arr.type] - 1]; /* both ends of the elements */
    }
}

static void check_tensors(const struct gguf_file *f)
{
    uint64_t size = gguf_file_size(f), align = gguf_alignment(f);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        if (gguf_find_tensor(f, t->name) != t || !fl_type_traits(t->type) || t->offset % align ||
            t->offset > size || t->nbytes > size - t->offset || t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            abort();
    }
}

static void check_layout(const struct gguf_file *f)
{
    struct moe_layout *l = NULL;
    struct fl_err err;
    if (moe_layout_compute(f, &l, &err))
        return;
    for (int il = 0; il < l->n_layer; il++) {
        const struct moe_layer *ly = &l->layers[il];
        for (int r = 0; r < MOE_N_ROLES && ly->is_moe; r++) {
            const struct moe_expert_tensor *et = &ly->role[r];
            if (et->t && (ly->n_expert < 1 || moe_expert_offset(et, ly->n_expert - 1) + et->expert_bytes !=
                                                  et->t->offset + et->t->nbytes))
                abort();
        }
    }
    if (l->expert_bytes + l->non_expert_bytes < l->expert_bytes)
        abort();
    moe_layout_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *f = NULL;
    struct fl_err err;
    if (gguf_parse(data, size, size, "fuzz", &f, &err)) {
        if (f || !strchr(err.msg, ':') || strchr(err.msg, '\n'))
            abort();
        return 0;
    }
    for (int64_t i = 0; i < gguf_n_kv(f); i++) {
        if (gguf_find_kv(f, gguf_kv_key(f, i)) != i)
            abort();
        walk(gguf_kv_value(f, i));
    }
    check_tensors(f);
    check_layout(f);
    gguf_close(f);
    return 0;
}

/* pager-layout.c: see plan/pager-layout.h. */
#include "plan/pager-layout.h"

#include <errno.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "gguf/moe-layout.h"

static const uint8_t role_kind[MOE_N_ROLES] = {
    [MOE_GATE] = PAGER_KIND_GATE, [MOE_UP] = PAGER_KIND_UP, [MOE_DOWN] = PAGER_KIND_DOWN,
    [MOE_GATE_UP] = PAGER_KIND_GATE_UP, [MOE_GATE_BIAS] = PAGER_KIND_GATE,
    [MOE_UP_BIAS] = PAGER_KIND_UP, [MOE_DOWN_BIAS] = PAGER_KIND_DOWN,
    [MOE_GATE_UP_BIAS] = PAGER_KIND_GATE_UP,
};

/* Per tensor index: its layer and kind when it is a routed expert stack. */
struct stack {
    int32_t layer;   /* -1: not a stack */
    uint8_t kind;
};

static struct stack *find_stacks(const struct gguf_file *g, const struct moe_layout *ml)
{
    const int64_t nt = gguf_n_tensors(g);
    struct stack *st = malloc(sizeof(*st) * ((size_t)nt + 1));
    for (int64_t i = 0; st && i < nt; i++)
        st[i] = (struct stack){ -1, PAGER_KIND_OTHER };
    for (int l = 0; st && l < ml->n_layer; l++)
        for (int r = 0; ml->layers[l].is_moe && r < MOE_N_ROLES; r++)
            if (ml->layers[l].role[r].t)
                st[ml->layers[l].role[r].t - gguf_tensor(g, 0)] = (struct stack){ l, role_kind[r] };
    return st;
}

/* The files of a split model (gguf_open's parts), each at its place. */
static int add_files(const struct gguf_file *g, struct pager_layout *out, struct fl_err *err)
{
    const int n = gguf_n_parts(g);
    if (n <= 1)
        return 0;
    struct pager_file *f = calloc((size_t)n, sizeof(*f));
    if (!f) {
        placement_pager_layout_free(out);
        return fl_err_set(err, -ENOMEM, "%s: out of memory laying out the pager", gguf_name(g));
    }
    for (int i = 0; i < n; i++)
        f[i] = (struct pager_file){ gguf_part(g, i)->path, gguf_part(g, i)->base,
                                    gguf_part(g, i)->size };
    out->files = f;
    out->n_files = n;
    return 0;
}

int placement_pager_layout(const struct gguf_file *g,
                           enum pager_tier (*tier)(void *ctx, int64_t tensor_index), void *ctx,
                           struct pager_layout *out, struct fl_err *err)
{
    *out = (struct pager_layout){ .file_size = gguf_file_size(g), .n_used = 1 };
    struct moe_layout *ml = NULL;
    int rc = moe_layout_compute(g, &ml, err);
    if (rc)
        return rc;
    const int64_t nt = gguf_n_tensors(g);
    const int n_exp = ml->n_expert > 0 ? ml->n_expert : 1;
    struct stack *st = find_stacks(g, ml);
    struct pager_extent *e = malloc(sizeof(*e) * ((size_t)nt * (size_t)n_exp + 1));
    if (!st || !e) {
        free(st), free(e), moe_layout_free(ml);
        return fl_err_set(err, -ENOMEM, "%s: out of memory laying out the pager", gguf_name(g));
    }
    int64_t n = 0;
    bool paged = false;
    for (int64_t i = 0; i < nt; i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        const bool stack = st[i].layer >= 0;
        const enum pager_tier tr = tier ? tier(ctx, i) : stack ? PAGER_TIER_DISK : PAGER_TIER_RAM;
        if (!stack || tr != PAGER_TIER_DISK || t->nbytes == 0) {
            e[n++] = (struct pager_extent){ t->offset, t->nbytes, t->name, tr, -1, -1,
                                            PAGER_KIND_OTHER };
            continue;
        }
        const uint64_t slice = t->nbytes / (uint64_t)ml->n_expert;
        for (int x = 0; x < ml->n_expert; x++)
            e[n++] = (struct pager_extent){ t->offset + (uint64_t)x * slice, slice, t->name, tr,
                                            st[i].layer, x, st[i].kind };
        paged = true;
    }
    if (paged && ml->n_expert_used > 0)
        out->n_used = ml->n_expert_used;
    out->extents = e;
    out->n_extents = n;
    free(st);
    moe_layout_free(ml);
    return add_files(g, out, err);
}

void placement_pager_layout_free(struct pager_layout *l)
{
    free((void *)l->extents);
    free((void *)l->files);
    *l = (struct pager_layout){ 0 };
}

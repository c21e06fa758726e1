/* moe-layout.c: finds the routed-expert tensors of each layer (see
 * moe-layout.h) from tensor names and the <arch>.* expert keys. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/moe-layout.h"
#include "gguf/tensor-names.h"

/* Bounds on what we allocate per layer; far above any real model. */
#define MOE_MAX_LAYERS (FL_TENSOR_MAX_BLOCK + 1)
#define MOE_MAX_EXPERTS 65536

static const char *const role_names[MOE_N_ROLES] = {
    "gate", "up", "down", "gate_up", "gate_bias", "up_bias", "down_bias", "gate_up_bias",
};

const char *moe_role_name(enum moe_role r)
{
    return (unsigned)r < MOE_N_ROLES ? role_names[r] : "?";
}

struct ctx {
    const struct gguf_file *f;
    const char *arch;
    struct fl_err *err;
};

/* Where "<arch>.<suffix>" is recorded, for messages. */
static uint64_t key_offset(const struct ctx *c, const char *suffix)
{
    char key[256];
    snprintf(key, sizeof(key), "%s.%s", c->arch, suffix);
    return gguf_kv_offset(c->f, gguf_find_kv(c->f, key));
}

static int get_count(const struct ctx *c, const char *suffix, int64_t max, int64_t *out)
{
    char key[256];
    snprintf(key, sizeof(key), "%s.%s", c->arch, suffix);
    int rc = gguf_get_int(c->f, key, out);
    if (rc == -ENOENT) {
        *out = -1;
        return 0;
    }
    if (rc || *out < 0 || *out > max)
        return fl_err_set(c->err, -EINVAL, "%s: %s is not a count in 0..%" PRId64 " at byte %" PRIu64,
                          gguf_name(c->f), key, max, key_offset(c, suffix));
    return 0;
}

/* block_count, or one past the highest block index when the key is absent. */
static int count_layers(const struct ctx *c, int *n_layer)
{
    int64_t n = -1;
    int rc = c->arch ? get_count(c, "block_count", MOE_MAX_LAYERS, &n) : 0;
    if (rc)
        return rc;
    if (n < 0) {
        n = 0;
        for (int64_t i = 0; i < gguf_n_tensors(c->f); i++) {
            const int il = fl_tensor_block(gguf_tensor(c->f, i)->name);
            if (il >= n)
                n = il + 1;
        }
    }
    *n_layer = (int)n;
    return 0;
}

static int bad_tensor(const struct ctx *c, const struct gguf_tensor *t, const char *why, int64_t x)
{
    return fl_err_set(c->err, -EINVAL, "%s: expert tensor %s: %s %" PRId64 " at byte %" PRIu64,
                      gguf_name(c->f), t->name, why, x, t->info_offset);
}

/* Files one tensor into its layer's role, checking its shape. */
static int add_tensor(const struct ctx *c, struct moe_layout *l, const struct gguf_tensor *t)
{
    bool bias = false;
    const int part = fl_tensor_expert_part(t->name, &bias);
    if (part < 0)
        return 0;
    const int il = fl_tensor_block(t->name);
    /* the roles are the parts, then the parts' biases */
    const int role = bias ? part + MOE_GATE_BIAS : part;
    if (il >= l->n_layer)
        return bad_tensor(c, t, "block index beyond block_count", l->n_layer);
    if (l->n_expert <= 0)
        return fl_err_set(c->err, -EINVAL, "%s: expert tensor %s but no %s.expert_count at byte %" PRIu64,
                          gguf_name(c->f), t->name, c->arch ? c->arch : "<arch>", t->info_offset);
    uint32_t dims = role >= MOE_GATE_BIAS ? 2 : 3;
    if (t->n_dims != dims)
        return bad_tensor(c, t, "wrong number of dimensions:", t->n_dims);
    if (t->ne[dims - 1] != l->n_expert)
        return bad_tensor(c, t, "last dimension is not expert_count but", t->ne[dims - 1]);
    struct moe_layer *ly = &l->layers[il];
    ly->is_moe = true;
    ly->role[role].t = t;
    ly->role[role].expert_bytes = t->nbytes / (uint64_t)l->n_expert;
    ly->bytes_per_expert += ly->role[role].expert_bytes;
    l->expert_bytes += t->nbytes;
    return 0;
}

static int read_expert_keys(const struct ctx *c, struct moe_layout *l)
{
    int64_t n = 0, k = 0;
    int rc = c->arch ? get_count(c, "expert_count", MOE_MAX_EXPERTS, &n) : 0;
    if (!rc && c->arch)
        rc = get_count(c, "expert_used_count", MOE_MAX_EXPERTS, &k);
    l->n_expert = n > 0 ? (int)n : 0;
    l->n_expert_used = k > 0 ? (int)k : 0;
    return rc;
}

/* Totals over layers, once every tensor is filed. */
static int finish(const struct ctx *c, struct moe_layout *l)
{
    uint64_t total = 0;
    for (int64_t i = 0; i < gguf_n_tensors(c->f); i++)
        total += gguf_tensor(c->f, i)->nbytes;
    l->non_expert_bytes = total - l->expert_bytes;
    int64_t nextn = -1;
    int rc = c->arch ? get_count(c, "nextn_predict_layers", l->n_layer, &nextn) : 0;
    if (rc)
        return rc;
    l->n_nextn = nextn > 0 ? (int)nextn : 0;
    l->n_leading_dense = -1;
    for (int il = 0; il < l->n_layer; il++) {
        struct moe_layer *ly = &l->layers[il];
        ly->is_nextn = il >= l->n_layer - l->n_nextn;
        if (!ly->is_moe)
            continue;
        ly->n_expert = l->n_expert;
        ly->n_expert_used = l->n_expert_used;
        if (ly->is_nextn)
            continue;
        if (l->n_leading_dense < 0)
            l->n_leading_dense = il;
        l->n_moe_layers++;
        l->bytes_per_token += (uint64_t)l->n_expert_used * ly->bytes_per_expert;
    }
    if (l->n_leading_dense < 0)
        l->n_leading_dense = l->n_layer;
    if (l->n_moe_layers && (l->n_expert_used < 1 || l->n_expert_used > l->n_expert))
        return fl_err_set(c->err, -EINVAL, "%s: %s.expert_used_count %d is not in 1..%d at byte %" PRIu64,
                          gguf_name(c->f), c->arch, l->n_expert_used, l->n_expert,
                          key_offset(c, "expert_used_count"));
    return 0;
}

int moe_layout_compute(const struct gguf_file *f, struct moe_layout **out, struct fl_err *err)
{
    struct ctx c = { .f = f, .err = err };
    *out = NULL;
    if (gguf_get_str(f, "general.architecture", &c.arch))
        c.arch = NULL;
    struct moe_layout *l = calloc(1, sizeof(*l));
    if (!l)
        return fl_err_set(err, -ENOMEM, "%s: out of memory", gguf_name(f));
    int rc = count_layers(&c, &l->n_layer);
    if (!rc)
        rc = read_expert_keys(&c, l);
    if (!rc && !(l->layers = calloc(l->n_layer ? (size_t)l->n_layer : 1, sizeof(*l->layers))))
        rc = fl_err_set(err, -ENOMEM, "%s: out of memory", gguf_name(f));
    for (int64_t i = 0; !rc && i < gguf_n_tensors(f); i++)
        rc = add_tensor(&c, l, gguf_tensor(f, i));
    if (!rc)
        rc = finish(&c, l);
    if (rc) {
        moe_layout_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void moe_layout_free(struct moe_layout *l)
{
    if (!l)
        return;
    free(l->layers);
    free(l);
}

_Static_assert((int)MOE_GATE == (int)FL_EXPERT_GATE && (int)MOE_UP == (int)FL_EXPERT_UP &&
               (int)MOE_DOWN == (int)FL_EXPERT_DOWN && (int)MOE_GATE_UP == (int)FL_EXPERT_GATE_UP,
               "moe roles follow the expert parts");

/* inspect-model.c: gathers what inspect reports (see inspect-model.h). */
#include <inttypes.h>
#include <string.h>

#include "app/cli/inspect-model.h"

static int64_t int_or(const struct gguf_file *f, const char *key, int64_t dflt)
{
    int64_t v;
    return gguf_get_int(f, key, &v) ? dflt : v;
}

static const char *str_or_null(const struct gguf_file *f, const char *key)
{
    const char *s;
    return gguf_get_str(f, key, &s) ? NULL : s;
}

static int64_t arr_len(const struct gguf_file *f, const char *key)
{
    const struct gguf_value *v;
    return gguf_get_arr(f, key, &v) ? -1 : (int64_t)v->arr.n;
}

static void gather_tokenizer(struct inspect_model *m)
{
    struct inspect_tokenizer *t = &m->tok;
    t->model = str_or_null(m->f, "tokenizer.ggml.model");
    t->pre = str_or_null(m->f, "tokenizer.ggml.pre");
    t->n_vocab = arr_len(m->f, "tokenizer.ggml.tokens");
    if (t->n_vocab < 0 && m->arch) {
        char key[256];
        snprintf(key, sizeof(key), "%s.vocab_size", m->arch);
        t->n_vocab = int_or(m->f, key, -1);
    }
    t->n_merges = arr_len(m->f, "tokenizer.ggml.merges");
    t->bos = int_or(m->f, "tokenizer.ggml.bos_token_id", -1);
    t->eos = int_or(m->f, "tokenizer.ggml.eos_token_id", -1);
}

static void gather_types(struct inspect_model *m)
{
    struct inspect_type_bytes by[FL_TYPE_COUNT] = { { 0 } };
    for (int64_t i = 0; i < gguf_n_tensors(m->f); i++) {
        const struct gguf_tensor *t = gguf_tensor(m->f, i);
        m->tensor_bytes += t->nbytes;
        if (t->type < FL_TYPE_COUNT) { /* always: the reader rejects unknown types */
            by[t->type].n_tensors++;
            by[t->type].bytes += t->nbytes;
        }
    }
    for (uint32_t ty = 0; ty < FL_TYPE_COUNT; ty++) {
        if (!by[ty].n_tensors)
            continue;
        by[ty].type = ty;
        m->types[m->n_types++] = by[ty];
    }
}

/* Layers with a tensor blk.N.SUFFIX (suffix with its leading dot). */
static int layers_with(const struct gguf_file *f, const char *suffix)
{
    int n = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const char *name = gguf_tensor(f, i)->name, *dot = strchr(name, '.');
        dot = dot && !strncmp(name, "blk.", 4) ? strchr(dot + 1, '.') : NULL;
        n += dot && !strcmp(dot, suffix);
    }
    return n;
}

/* Kimi-Linear's KDA blocks (model/kda.h): a window of d_conv - 1 rows for
 * each of q, k and v, and heads x head_dim^2 of state. */
static void gather_kda(struct inspect_model *m)
{
    char key[256];
    snprintf(key, sizeof(key), "%s.kda.head_dim", m->arch ? m->arch : "");
    const int64_t D = int_or(m->f, key, -1);
    snprintf(key, sizeof(key), "%s.ssm.conv_kernel", m->arch ? m->arch : "");
    const int64_t d_conv = int_or(m->f, key, -1);
    snprintf(key, sizeof(key), "%s.attention.head_count", m->arch ? m->arch : "");
    const int64_t H = int_or(m->f, key, -1);
    if (D < 1 || D > 1 << 20 || d_conv < 1 || d_conv > 1 << 20 || H < 1 || H > 1 << 20)
        return;
    m->rs_kind = "Kimi Delta Attention";
    m->n_rs_layers = layers_with(m->f, ".ssm_f_a.weight");
    m->rs_bytes_per_seq = (uint64_t)m->n_rs_layers * 4 *
                          (uint64_t)(3 * (d_conv - 1) * H * D + H * D * D);
}

/* One sequence's recurrent state per layer, as the engine sizes it
 * (model/arch-qwen35moe.c): (d_conv - 1) rows of the conv's width and
 * value heads x d_state^2. */
static void gather_recurrent(struct inspect_model *m)
{
    char key[256];
    int64_t v[4];
    static const char *const keys[4] = { "ssm.conv_kernel", "ssm.state_size", "ssm.group_count",
                                         "ssm.time_step_rank" };
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "%s.%s", m->arch ? m->arch : "", keys[i]);
        if ((v[i] = int_or(m->f, key, -1)) < 1 || v[i] > 1 << 20)
            return;
    }
    m->rs_kind = "Gated DeltaNet";
    m->n_rs_layers = layers_with(m->f, ".ssm_a");
    const uint64_t d_conv = (uint64_t)v[0], D = (uint64_t)v[1], K = (uint64_t)v[2];
    const uint64_t H = (uint64_t)v[3];
    m->rs_bytes_per_seq = (uint64_t)m->n_rs_layers * 4 *
                          ((d_conv - 1) * (2 * K * D + H * D) + H * D * D);
}

static void gather_sparse(struct inspect_model *m)
{
    char key[256];
    snprintf(key, sizeof(key), "%s.attention.indexer.top_k", m->arch ? m->arch : "");
    if ((m->indexer_top_k = int_or(m->f, key, 0)) < 1)
        return;
    snprintf(key, sizeof(key), "%s.attention.indexer.block_size", m->arch ? m->arch : "");
    m->indexer_block = int_or(m->f, key, 0);
    m->n_indexer_layers = layers_with(m->f, m->indexer_block > 0 ? ".indexer.q_proj.weight"
                                                                 : ".indexer.attn_q_b.weight");
}

int inspect_model_load(const char *path, struct inspect_model *m, struct fl_err *err)
{
    memset(m, 0, sizeof(*m));
    /* a split model's first file: all its parts; a later part: that file
     * alone, as gguf-dump shows it */
    int64_t no = 0;
    int rc = gguf_open_part(path, &m->f, err);
    if (!rc && (gguf_get_int(m->f, "split.no", &no) || no == 0) &&
        (rc = gguf_split_join(m->f, err))) {
        gguf_close(m->f);
        m->f = NULL;
    }
    if (rc)
        return rc;
    if (no == 0 && (rc = moe_layout_compute(m->f, &m->moe, err))) { /* a later part: no layout */
        gguf_close(m->f);
        m->f = NULL;
        return rc;
    }
    m->arch = str_or_null(m->f, "general.architecture");
    m->model_name = str_or_null(m->f, "general.name");
    gather_tokenizer(m);
    gather_types(m);
    gather_recurrent(m);
    gather_kda(m);
    gather_sparse(m);
    return 0;
}

void inspect_model_free(struct inspect_model *m)
{
    moe_layout_free(m->moe);
    gguf_close(m->f);
    memset(m, 0, sizeof(*m));
}

void inspect_arr_elem(const struct gguf_value *arr, uint64_t i, struct gguf_value *out)
{
    static const size_t size[GGUF_VT_COUNT] = {
        [GGUF_VT_UINT8] = 1, [GGUF_VT_INT8] = 1, [GGUF_VT_UINT16] = 2, [GGUF_VT_INT16] = 2,
        [GGUF_VT_UINT32] = 4, [GGUF_VT_INT32] = 4, [GGUF_VT_FLOAT32] = 4, [GGUF_VT_BOOL] = 1,
        [GGUF_VT_UINT64] = 8, [GGUF_VT_INT64] = 8, [GGUF_VT_FLOAT64] = 8,
    };
    memset(out, 0, sizeof(*out));
    out->type = arr->arr.type;
    if (arr->arr.type == GGUF_VT_STRING)
        out->str = ((const struct gguf_str *)arr->arr.elems)[i];
    else if (arr->arr.type == GGUF_VT_ARRAY)
        *out = ((const struct gguf_value *)arr->arr.elems)[i];
    else
        memcpy(&out->u64, (const char *)arr->arr.elems + i * size[arr->arr.type], size[arr->arr.type]);
}

void inspect_format_shape(const struct gguf_tensor *t, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (uint32_t d = 0; d < t->n_dims && o < len; d++) {
        int n = snprintf(buf + o, len - o, "%s%" PRId64 "%s", d ? ", " : "[", t->ne[d],
                         d + 1 == t->n_dims ? "]" : "");
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

/* inspect-doc.c: `faultline inspect --json`, the same report as the text
 * form as one JSON document (base/json.h). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "app/cli/inspect-model.h"
#include "base/json.h"

/* Arrays longer than this are summarised as {"type", "n"}: a vocabulary
 * does not belong in a report and a hostile file could hold millions. */
#define JSON_ARR_MAX 1024

static json_t *value(const struct gguf_value *v);

static json_t *array(const struct gguf_value *v)
{
    if (v->arr.n > JSON_ARR_MAX)
        return json_pack("{s:s, s:I}", "type", gguf_vtype_name(v->arr.type), "n",
                         (json_int_t)v->arr.n);
    json_t *a = json_array();
    for (uint64_t i = 0; a && i < v->arr.n; i++) {
        struct gguf_value e;
        inspect_arr_elem(v, i, &e);
        if (json_array_append_new(a, value(&e))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *value(const struct gguf_value *v)
{
    int64_t i;
    switch (v->type) {
    case GGUF_VT_STRING: return fl_json_stringn(v->str.data, v->str.len);
    case GGUF_VT_BOOL: return json_boolean(v->b);
    case GGUF_VT_FLOAT32: return fl_json_f32(v->f32);
    case GGUF_VT_FLOAT64: return fl_json_real(v->f64);
    case GGUF_VT_UINT64: return v->u64 <= INT64_MAX ? json_integer((json_int_t)v->u64)
                                                    : fl_json_real((double)v->u64);
    case GGUF_VT_ARRAY: return array(v);
    default: return !gguf_value_int(v, &i) ? json_integer(i) : json_null();
    }
}

static json_t *json_hparams(const struct inspect_model *m)
{
    json_t *o = json_object();
    size_t n = m->arch ? strlen(m->arch) : 0;
    for (int64_t i = 0; o && m->arch && i < gguf_n_kv(m->f); i++) {
        const char *key = gguf_kv_key(m->f, i);
        if (!strncmp(key, m->arch, n) && key[n] == '.' &&
            fl_json_set(o, key + n + 1, value(gguf_kv_value(m->f, i)))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *opt_int(int64_t v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

static json_t *json_tokenizer(const struct inspect_tokenizer *t)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "model", fl_json_string(t->model), "pre",
                     fl_json_string(t->pre), "vocab_size", opt_int(t->n_vocab), "n_merges",
                     opt_int(t->n_merges), "bos_token_id", opt_int(t->bos), "eos_token_id",
                     opt_int(t->eos));
}

static json_t *json_types(const struct inspect_model *m)
{
    json_t *o = json_object();
    for (int i = 0; o && i < m->n_types; i++)
        if (fl_json_set(o, fl_type_name(m->types[i].type),
                        json_pack("{s:i, s:I}", "tensors", m->types[i].n_tensors, "bytes",
                                  (json_int_t)m->types[i].bytes))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static json_t *json_moe_layer(int il, const struct moe_layer *ly)
{
    json_t *names = json_object();
    for (int r = 0; names && r < MOE_N_ROLES; r++)
        if (ly->role[r].t && fl_json_set(names, moe_role_name(r), fl_json_string(ly->role[r].t->name))) {
            json_decref(names);
            return NULL;
        }
    return json_pack("{s:i, s:b, s:b, s:i, s:I, s:o}", "layer", il, "moe", ly->is_moe, "nextn",
                     ly->is_nextn, "n_expert", ly->n_expert, "bytes_per_expert",
                     (json_int_t)ly->bytes_per_expert, "expert_tensors", names);
}

static json_t *json_moe(const struct moe_layout *l)
{
    if (!l) /* a later part of a split model */
        return json_null();
    json_t *layers = json_array();
    for (int il = 0; layers && il < l->n_layer; il++)
        if (json_array_append_new(layers, json_moe_layer(il, &l->layers[il]))) {
            json_decref(layers);
            return NULL;
        }
    return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:o}", "n_layer", l->n_layer,
                     "n_expert", l->n_expert, "n_expert_used", l->n_expert_used, "n_moe_layers",
                     l->n_moe_layers, "n_nextn", l->n_nextn, "n_leading_dense", l->n_leading_dense,
                     "expert_bytes_per_token", (json_int_t)l->bytes_per_token, "expert_bytes",
                     (json_int_t)l->expert_bytes, "non_expert_bytes",
                     (json_int_t)l->non_expert_bytes, "layers", layers);
}

static json_t *with_member(json_t *d, const char *key, json_t *v)
{
    if (d && fl_json_set(d, key, v) == 0)
        return d;
    if (!d)
        json_decref(v);
    json_decref(d);
    return NULL;
}

/* A tensor: its offset in its own file, and which part that is when the
 * model is split. */
static json_t *json_tensor(const struct gguf_file *f, const struct gguf_tensor *t)
{
    uint64_t off;
    const int part = gguf_part_at(f, t->offset, &off);
    json_t *shape = json_array();
    for (uint32_t d = 0; shape && d < t->n_dims; d++)
        if (json_array_append_new(shape, json_integer(t->ne[d]))) {
            json_decref(shape);
            return NULL;
        }
    json_t *j = json_pack("{s:o, s:s, s:o, s:I, s:I}", "name", fl_json_string(t->name), "type",
                          fl_type_name(t->type), "shape", shape, "offset", (json_int_t)off,
                          "bytes", (json_int_t)t->nbytes);
    return gguf_n_parts(f) > 1 ? with_member(j, "part", json_integer(part + 1)) : j;
}

static json_t *json_tensors(const struct gguf_file *f)
{
    json_t *a = json_array();
    for (int64_t i = 0; a && i < gguf_n_tensors(f); i++)
        if (json_array_append_new(a, json_tensor(f, gguf_tensor(f, i)))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* d with d[key] = v (v taken either way); NULL, d freed, when d is NULL
 * or the member cannot be set (out of memory). */
/* A split model's files: [{path, size}], in order. */
static json_t *json_parts(const struct gguf_file *f)
{
    json_t *a = json_array();
    for (int i = 0; a && i < gguf_n_parts(f); i++)
        json_array_append_new(a, json_pack("{s:o, s:I}", "path",
                                           fl_json_string(gguf_part(f, i)->path), "size",
                                           (json_int_t)gguf_part(f, i)->size));
    return a;
}

int inspect_print_json(FILE *out, const struct inspect_model *m, bool tensors)
{
    json_t *d = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:o}",
                          "file", fl_json_string(gguf_name(m->f)), "version",
                          (json_int_t)gguf_version(m->f), "file_size",
                          (json_int_t)gguf_parts_bytes(m->f), "header_size",
                          (json_int_t)gguf_header_size(m->f), "data_offset",
                          (json_int_t)gguf_data_offset(m->f), "alignment",
                          (json_int_t)gguf_alignment(m->f), "architecture",
                          fl_json_string(m->arch), "name", fl_json_string(m->model_name),
                          "hparams", json_hparams(m), "tokenizer", json_tokenizer(&m->tok),
                          "n_tensors", (json_int_t)gguf_n_tensors(m->f), "tensor_bytes",
                          (json_int_t)m->tensor_bytes, "bytes_by_type", json_types(m), "moe",
                          json_moe(m->moe));
    if (gguf_n_parts(m->f) > 1)
        d = with_member(d, "parts", json_parts(m->f));
    if (m->n_rs_layers)
        d = with_member(d, "linear_attention",
                        json_pack("{s:s, s:i, s:I}", "kind", m->rs_kind, "n_layers",
                                  m->n_rs_layers, "state_bytes_per_seq",
                                  (json_int_t)m->rs_bytes_per_seq));
    if (m->n_indexer_layers)
        d = with_member(d, "sparse_attention",
                        json_pack("{s:i, s:I, s:I}", "n_indexer_layers", m->n_indexer_layers,
                                  "top_k", (json_int_t)m->indexer_top_k, "block_size",
                                  (json_int_t)(m->indexer_block > 0 ? m->indexer_block : 1)));
    if (tensors)
        d = with_member(d, "tensors", json_tensors(m->f));
    int rc = d ? fl_json_write(out, d, FL_JSON_INDENT) : -ENOMEM;
    json_decref(d);
    return rc;
}

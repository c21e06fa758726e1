/* inspect-doc.c: `faultline inspect --json`, the same report as the text
 * form as one JSON document. */
#include <inttypes.h>
#include <string.h>

#include "app/cli/inspect-json.h"
#include "app/cli/inspect-model.h"

/* Arrays longer than this are summarised as {"type", "n"}: a vocabulary
 * does not belong in a report and a hostile file could hold millions. */
#define JSON_ARR_MAX 1024

static void json_value(struct ijson *j, const char *key, const struct gguf_value *v);

static void json_array(struct ijson *j, const char *key, const struct gguf_value *v)
{
    if (v->arr.n > JSON_ARR_MAX) {
        ijson_obj(j, key);
        ijson_str(j, "type", gguf_vtype_name(v->arr.type));
        ijson_uint(j, "n", v->arr.n);
        ijson_end(j, '}');
        return;
    }
    ijson_arr(j, key);
    for (uint64_t i = 0; i < v->arr.n; i++) {
        struct gguf_value e;
        inspect_arr_elem(v, i, &e);
        json_value(j, NULL, &e);
    }
    ijson_end(j, ']');
}

static void json_value(struct ijson *j, const char *key, const struct gguf_value *v)
{
    int64_t i;
    switch (v->type) {
    case GGUF_VT_STRING: ijson_strn(j, key, v->str.data, v->str.len); break;
    case GGUF_VT_BOOL: ijson_bool(j, key, v->b); break;
    case GGUF_VT_FLOAT32: ijson_f32(j, key, v->f32); break;
    case GGUF_VT_FLOAT64: ijson_num(j, key, v->f64); break;
    case GGUF_VT_UINT64: ijson_uint(j, key, v->u64); break;
    case GGUF_VT_ARRAY: json_array(j, key, v); break;
    default:
        if (!gguf_value_int(v, &i))
            ijson_int(j, key, i);
        else
            ijson_null(j, key);
    }
}

static void json_hparams(struct ijson *j, const struct inspect_model *m)
{
    ijson_obj(j, "hparams");
    size_t n = m->arch ? strlen(m->arch) : 0;
    for (int64_t i = 0; m->arch && i < gguf_n_kv(m->f); i++) {
        const char *key = gguf_kv_key(m->f, i);
        if (!strncmp(key, m->arch, n) && key[n] == '.')
            json_value(j, key + n + 1, gguf_kv_value(m->f, i));
    }
    ijson_end(j, '}');
}

static void opt_int(struct ijson *j, const char *key, int64_t v)
{
    if (v >= 0)
        ijson_int(j, key, v);
    else
        ijson_null(j, key);
}

static void json_tokenizer(struct ijson *j, const struct inspect_tokenizer *t)
{
    ijson_obj(j, "tokenizer");
    ijson_str(j, "model", t->model);
    ijson_str(j, "pre", t->pre);
    opt_int(j, "vocab_size", t->n_vocab);
    opt_int(j, "n_merges", t->n_merges);
    opt_int(j, "bos_token_id", t->bos);
    opt_int(j, "eos_token_id", t->eos);
    ijson_end(j, '}');
}

static void json_types(struct ijson *j, const struct inspect_model *m)
{
    ijson_obj(j, "bytes_by_type");
    for (int i = 0; i < m->n_types; i++) {
        ijson_obj(j, fl_type_name(m->types[i].type));
        ijson_int(j, "tensors", m->types[i].n_tensors);
        ijson_uint(j, "bytes", m->types[i].bytes);
        ijson_end(j, '}');
    }
    ijson_end(j, '}');
}

static void json_moe_layer(struct ijson *j, int il, const struct moe_layer *ly)
{
    ijson_obj(j, NULL);
    ijson_int(j, "layer", il);
    ijson_bool(j, "moe", ly->is_moe);
    ijson_int(j, "n_expert", ly->n_expert);
    ijson_uint(j, "bytes_per_expert", ly->bytes_per_expert);
    ijson_obj(j, "expert_tensors");
    for (int r = 0; r < MOE_N_ROLES; r++)
        if (ly->role[r].t)
            ijson_str(j, moe_role_name(r), ly->role[r].t->name);
    ijson_end(j, '}');
    ijson_end(j, '}');
}

static void json_moe(struct ijson *j, const struct moe_layout *l)
{
    ijson_obj(j, "moe");
    ijson_int(j, "n_layer", l->n_layer);
    ijson_int(j, "n_expert", l->n_expert);
    ijson_int(j, "n_expert_used", l->n_expert_used);
    ijson_int(j, "n_moe_layers", l->n_moe_layers);
    ijson_int(j, "n_leading_dense", l->n_leading_dense);
    ijson_uint(j, "expert_bytes_per_token", l->bytes_per_token);
    ijson_uint(j, "expert_bytes", l->expert_bytes);
    ijson_uint(j, "non_expert_bytes", l->non_expert_bytes);
    ijson_arr(j, "layers");
    for (int il = 0; il < l->n_layer; il++)
        json_moe_layer(j, il, &l->layers[il]);
    ijson_end(j, ']');
    ijson_end(j, '}');
}

static void json_tensors(struct ijson *j, const struct gguf_file *f)
{
    ijson_arr(j, "tensors");
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        ijson_obj(j, NULL);
        ijson_str(j, "name", t->name);
        ijson_str(j, "type", fl_type_name(t->type));
        ijson_arr(j, "shape");
        for (uint32_t d = 0; d < t->n_dims; d++)
            ijson_int(j, NULL, t->ne[d]);
        ijson_end(j, ']');
        ijson_uint(j, "offset", t->offset);
        ijson_uint(j, "bytes", t->nbytes);
        ijson_end(j, '}');
    }
    ijson_end(j, ']');
}

void inspect_print_json(FILE *out, const struct inspect_model *m, bool tensors)
{
    struct ijson j;
    ijson_init(&j, out);
    ijson_obj(&j, NULL);
    ijson_str(&j, "file", gguf_name(m->f));
    ijson_uint(&j, "version", gguf_version(m->f));
    ijson_uint(&j, "file_size", gguf_file_size(m->f));
    ijson_uint(&j, "header_size", gguf_header_size(m->f));
    ijson_uint(&j, "data_offset", gguf_data_offset(m->f));
    ijson_uint(&j, "alignment", gguf_alignment(m->f));
    ijson_str(&j, "architecture", m->arch);
    ijson_str(&j, "name", m->model_name);
    json_hparams(&j, m);
    json_tokenizer(&j, &m->tok);
    ijson_int(&j, "n_tensors", gguf_n_tensors(m->f));
    ijson_uint(&j, "tensor_bytes", m->tensor_bytes);
    json_types(&j, m);
    json_moe(&j, m->moe);
    if (tensors)
        json_tensors(&j, m->f);
    ijson_end(&j, '}');
    ijson_finish(&j);
}

/* sampler-fields.c: see sampler-fields.h. */
#include "api/sampler-fields.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "api/request-fields.h"
#include "text/sampler.h"

/* The numeric fields: where each goes and its range (llama-server's hard
 * limits; the windows at the sampler's own cap). */
enum kind { F32, I32 };
static const struct {
    const char *key;
    enum kind kind;
    size_t off;
    double lo, hi;
} fields[] = {
    { "dry_multiplier", F32, offsetof(struct fl_sampler_params, dry_multiplier), 0, 1e6 },
    { "dry_base", F32, offsetof(struct fl_sampler_params, dry_base), -1e6, 1e6 },
    { "dry_allowed_length", I32, offsetof(struct fl_sampler_params, dry_allowed_length), 0,
      INT32_MAX },
    { "dry_penalty_last_n", I32, offsetof(struct fl_sampler_params, dry_penalty_last_n), 0,
      INT32_MAX },
    { "top_n_sigma", F32, offsetof(struct fl_sampler_params, top_n_sigma), -1e6, 1e6 },
    { "xtc_probability", F32, offsetof(struct fl_sampler_params, xtc_probability), 0, 1 },
    { "xtc_threshold", F32, offsetof(struct fl_sampler_params, xtc_threshold), 0, 1 },
    { "dynatemp_range", F32, offsetof(struct fl_sampler_params, dynatemp_range), 0, 100 },
    { "dynatemp_exponent", F32, offsetof(struct fl_sampler_params, dynatemp_exponent), 0, 100 },
    { "mirostat", I32, offsetof(struct fl_sampler_params, mirostat), 0, 2 },
    { "mirostat_tau", F32, offsetof(struct fl_sampler_params, mirostat_tau), 0, 100 },
    { "mirostat_eta", F32, offsetof(struct fl_sampler_params, mirostat_eta), 0, 100 },
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))
#define GIVEN_BREAKERS (1u << N_FIELDS)

static int parse_breakers(const json_t *b, struct fl_sampler_params *s, uint32_t *given,
                          struct fl_err *err)
{
    const json_t *v = json_object_get(b, "dry_sequence_breakers");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || !json_array_size(v) || json_array_size(v) > FL_DRY_MAX_BREAKERS)
        return api_field_bad(err, "dry_sequence_breakers", "expected a non-empty array of at "
                             "most 16 strings");
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e) || !json_string_length(e))
            return fl_err_set(err, -EINVAL, "dry_sequence_breakers[%zu]: expected a non-empty "
                              "string", i);
        s->dry_breakers[i] = json_string_value(e);
    }
    s->n_dry_breakers = (int32_t)json_array_size(v);
    *given |= GIVEN_BREAKERS;
    return 0;
}

int api_sampler_fields_parse(const json_t *b, struct fl_sampler_params *s, uint32_t *given,
                             struct fl_err *err)
{
    for (size_t k = 0; k < N_FIELDS; k++) {
        double v = 0;
        int64_t n = 0;
        int rc = fields[k].kind == F32
                     ? api_field_number(b, fields[k].key, fields[k].lo, fields[k].hi, &v, err)
                     : api_field_integer(b, fields[k].key, fields[k].lo, fields[k].hi, &n, err);
        if (rc < 0)
            return rc;
        if (rc == 0 || (!strcmp(fields[k].key, "dry_base") && v < 1.0))
            continue; /* absent; or a base llama-server replaces with its own */
        char *at = (char *)s + fields[k].off;
        if (fields[k].kind == F32)
            *(float *)at = (float)v;
        else
            *(int32_t *)at = (int32_t)n;
        *given |= 1u << k;
    }
    return parse_breakers(b, s, given, err);
}

void api_sampler_fields_apply(const struct fl_sampler_params *s, uint32_t given,
                              struct fl_sampler_params *out)
{
    for (size_t k = 0; k < N_FIELDS; k++)
        if (given >> k & 1) {
            const size_t size = fields[k].kind == F32 ? sizeof(float) : sizeof(int32_t);
            memcpy((char *)out + fields[k].off, (const char *)s + fields[k].off, size);
        }
    if (given & GIVEN_BREAKERS) {
        memcpy(out->dry_breakers, s->dry_breakers, sizeof(out->dry_breakers));
        out->n_dry_breakers = s->n_dry_breakers;
    }
}

void api_sampler_fields_report(const struct fl_sampler_params *p, json_t *o)
{
    for (size_t k = 0; k < N_FIELDS; k++) {
        const char *at = (const char *)p + fields[k].off;
        fl_json_set(o, fields[k].key, fields[k].kind == F32 ? fl_json_f32(*(const float *)at)
                                                           : json_integer(*(const int32_t *)at));
    }
    json_t *br = json_array();
    for (int32_t i = 0; br && i < p->n_dry_breakers; i++)
        if (p->dry_breakers[i])
            json_array_append_new(br, json_string(p->dry_breakers[i]));
    fl_json_set(o, "dry_sequence_breakers", br);
}

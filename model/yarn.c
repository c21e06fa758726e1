/* yarn.c: rotary embeddings with YaRN scaling, numerically as ggml's CPU rope. */
#include "model/yarn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

/* n_dims * ln(n_ctx_orig / (n_rot * 2 pi)) / (2 ln base): the pair index whose
 * wavelength fits n_rot times into the original context. */
static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                    float beta_slow, float dims[2])
{
    float start = floorf(corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    float end = ceilf(corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0 ? start : 0;
    dims[1] = end < n_dims - 1 ? end : (float)(n_dims - 1);
}

int yarn_rope_init(struct yarn_rope *r, const struct yarn_params *p)
{
    if (p->n_dims <= 0 || p->n_dims % 2 || !(p->freq_base > 0) || !(p->freq_scale > 0))
        return -EINVAL;
    r->p = *p;
    r->theta_scale = powf(p->freq_base, -2.0f / p->n_dims);
    yarn_corr_dims(p->n_dims, p->n_ctx_orig, p->freq_base, p->beta_fast, p->beta_slow,
                   r->corr_dims);
    return 0;
}

/* 1 below the low correction dim, 0 above the high one, linear between. */
static float ramp(float low, float high, int64_t i0)
{
    float y = (i0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1 - fminf(1, fmaxf(0, y));
}

void yarn_rope_cache(const struct yarn_rope *r, int32_t pos, float *cache)
{
    const struct yarn_params *p = &r->p;
    /* ggml grows theta by repeated multiplication; doing the same keeps the
     * angles bit-identical to llama.cpp's. */
    float theta_extrap = (float)pos;
    for (int64_t i0 = 0; i0 < p->n_dims; i0 += 2) {
        float theta_interp = p->freq_scale * theta_extrap;
        float theta = theta_interp;
        float mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) {
            float mix = ramp(r->corr_dims[0], r->corr_dims[1], i0) * p->ext_factor;
            theta = theta_interp * (1 - mix) + theta_extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
        }
        cache[i0] = cosf(theta) * mscale;
        cache[i0 + 1] = sinf(theta) * mscale;
        theta_extrap *= r->theta_scale;
    }
}

void yarn_rope_table(const struct yarn_rope *r, float *cs, const int32_t *pos, int n_pos)
{
    for (int p = 0; p < n_pos; p++)
        yarn_rope_cache(r, pos[p], cs + (int64_t)p * r->p.n_dims);
}

static float get_mscale(float scale, float mscale)
{
    return scale <= 1.0f ? 1.0f : (0.1f * mscale * logf(scale) + 1.0f);
}

float yarn_context_attn_factor(float factor, float ext_factor, float log_mul, float rope_attn,
                               bool deepseek2)
{
    float f = 1.0f;
    if (ext_factor != 0.0f) {
        if (log_mul != 0.0f) {
            /* llama.cpp assumes mscale 1 except for deepseek2, whose
             * config carries mscale == mscale_all_dim. */
            float mscale = deepseek2 && log_mul != 1.0f ? log_mul : 1.0f;
            f = get_mscale(factor, mscale) / get_mscale(factor, log_mul);
        } else {
            f = get_mscale(factor, 1.0f);
        }
        f *= 1.0f / (1.0f + 0.1f * logf(factor));
    }
    return f * rope_attn;
}

float yarn_deepseek2_kq_scale(const struct yarn_params *p, float log_mul, int head_k)
{
    float org = p->attn_factor * (1.0f + 0.1f * logf(1.0f / p->freq_scale));
    float mscale = org * (1.0f + 0.1f * log_mul * logf(1.0f / p->freq_scale));
    return 1.0f * mscale * mscale / sqrtf((float)head_k);
}

/* Optional float key: 0 when read or absent (out untouched), else an error. */
static int opt_float(const struct gguf_file *f, const char *arch, const char *suffix,
                     float *out, struct fl_err *err)
{
    char key[160];
    double v;
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    int rc = gguf_get_float(f, key, &v);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return fl_err_set(err, rc, "%s: metadata key %s is not a number", gguf_name(f), key);
    *out = (float)v;
    return 0;
}

static int scaling_type(const struct gguf_file *f, const char *arch, int *yarn, int *none,
                        struct fl_err *err)
{
    char key[160];
    const char *s = "linear";
    snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
    int rc = gguf_get_str(f, key, &s);
    if (rc < 0 && rc != -ENOENT)
        return fl_err_set(err, rc, "%s: metadata key %s is not a string", gguf_name(f), key);
    *yarn = !strcmp(s, "yarn");
    *none = !strcmp(s, "none");
    if (!*yarn && !*none && strcmp(s, "linear"))
        return fl_err_set(err, -EINVAL, "%s: %s = '%s' is not supported (none, linear, yarn)",
                          gguf_name(f), key, s);
    return 0;
}

int yarn_from_gguf(const struct gguf_file *f, const char *arch, int n_dims,
                   struct yarn_params *out, float *log_mul_out, struct fl_err *err)
{
    float base = 10000.0f, factor = 0.0f, rope_attn = 1.0f, log_mul = 0.0f;
    float ctx_train = 0.0f, ctx_orig = 0.0f;
    int yarn = 0, none = 0, rc;
    bool ds2 = !strcmp(arch, "deepseek2");
    /* llama.cpp's deepseek32 cancels the converter's 0.1 as deepseek2 does
     * (without deepseek2's mscale case); glm-dsa never reads the key */
    bool cancel_tenth = ds2 || !strcmp(arch, "deepseek32"), ignore_log_mul = !strcmp(arch, "glm-dsa");

    if ((rc = opt_float(f, arch, "rope.freq_base", &base, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.factor", &factor, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.attn_factor", &rope_attn, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.yarn_log_multiplier", &log_mul, err)) < 0 ||
        (rc = opt_float(f, arch, "context_length", &ctx_train, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.original_context_length", &ctx_orig, err)) < 0 ||
        (rc = scaling_type(f, arch, &yarn, &none, err)) < 0)
        return rc;
    if (factor == 0.0f) /* the older key name */
        if ((rc = opt_float(f, arch, "rope.scale_linear", &factor, err)) < 0)
            return rc;
    if (cancel_tenth && log_mul != 0.0f)
        log_mul /= 0.1f;
    if (ignore_log_mul)
        log_mul = 0.0f;
    if (ctx_orig == 0.0f)
        ctx_orig = ctx_train;
    if (!(base > 0) || factor < 0 || n_dims <= 0 || n_dims % 2)
        return fl_err_set(err, -EINVAL, "%s: bad rope settings (freq_base %g, factor %g, dims %d)",
                          gguf_name(f), base, factor, n_dims);

    out->n_dims = n_dims;
    out->n_ctx_orig = (int)ctx_orig;
    out->freq_base = base;
    out->freq_scale = (none || factor == 0.0f) ? 1.0f : 1.0f / factor;
    out->ext_factor = yarn ? 1.0f : 0.0f;
    out->beta_fast = 32.0f; /* llama.cpp's defaults; it reads no key for them */
    out->beta_slow = 1.0f;
    out->attn_factor = yarn_context_attn_factor(1.0f / out->freq_scale, out->ext_factor, log_mul,
                                                rope_attn, ds2);
    if (log_mul_out)
        *log_mul_out = log_mul;
    return 0;
}

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

int yarn_scaling_parse(const char *s, enum yarn_scaling *out)
{
    static const char *const names[] = { [YARN_SCALING_NONE] = "none",
                                         [YARN_SCALING_LINEAR] = "linear",
                                         [YARN_SCALING_YARN] = "yarn" };
    for (int i = YARN_SCALING_NONE; i <= YARN_SCALING_YARN; i++)
        if (!strcmp(s, names[i])) {
            *out = (enum yarn_scaling)i;
            return 0;
        }
    return -EINVAL;
}

/* The file's rope.scaling.type; llama.cpp's longrope without rope factor
 * tensors (none of faultline's architectures has them) scales linearly. */
static int scaling_type(const struct gguf_file *f, const char *arch, enum yarn_scaling *out,
                        struct fl_err *err)
{
    char key[160];
    const char *s = "linear";
    snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
    int rc = gguf_get_str(f, key, &s);
    if (rc < 0 && rc != -ENOENT)
        return fl_err_set(err, rc, "%s: metadata key %s is not a string", gguf_name(f), key);
    if (!strcmp(s, "longrope"))
        s = "linear";
    if (yarn_scaling_parse(s, out) < 0)
        return fl_err_set(err, -EINVAL, "%s: %s = '%s' is not supported (none, linear, yarn)",
                          gguf_name(f), key, s);
    return 0;
}

/* What the file says (llama.cpp's hparams). */
struct rope_file {
    float base, factor, rope_attn, log_mul, ctx_train, ctx_orig;
    enum yarn_scaling scaling;
};

static int read_file_rope(const struct gguf_file *f, const char *arch, struct rope_file *r,
                          struct fl_err *err)
{
    *r = (struct rope_file){ .base = 10000.0f, .rope_attn = 1.0f };
    int rc;
    if ((rc = opt_float(f, arch, "rope.freq_base", &r->base, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.factor", &r->factor, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.attn_factor", &r->rope_attn, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.yarn_log_multiplier", &r->log_mul, err)) < 0 ||
        (rc = opt_float(f, arch, "context_length", &r->ctx_train, err)) < 0 ||
        (rc = opt_float(f, arch, "rope.scaling.original_context_length", &r->ctx_orig, err)) < 0 ||
        (rc = scaling_type(f, arch, &r->scaling, err)) < 0)
        return rc;
    if (r->factor == 0.0f) /* the older key name */
        if ((rc = opt_float(f, arch, "rope.scale_linear", &r->factor, err)) < 0)
            return rc;
    /* llama.cpp's deepseek32 cancels the converter's 0.1 as deepseek2 does
     * (without deepseek2's mscale case); glm-dsa never reads the key */
    if ((!strcmp(arch, "deepseek2") || !strcmp(arch, "deepseek32")) && r->log_mul != 0.0f)
        r->log_mul /= 0.1f;
    if (!strcmp(arch, "glm-dsa"))
        r->log_mul = 0.0f;
    if (r->ctx_orig == 0.0f)
        r->ctx_orig = r->ctx_train;
    if (!(r->base > 0) || r->factor < 0)
        return fl_err_set(err, -EINVAL, "%s: bad rope settings (freq_base %g, factor %g)",
                          gguf_name(f), r->base, r->factor);
    return 0;
}

static bool given(const struct yarn_context *ctx, unsigned bit)
{
    return ctx && (ctx->set & bit);
}

int yarn_from_gguf(const struct gguf_file *f, const char *arch, int n_dims,
                   const struct yarn_context *ctx, struct yarn_params *out, float *log_mul_out,
                   struct fl_err *err)
{
    struct rope_file r;
    int rc = read_file_rope(f, arch, &r, err);
    if (rc)
        return rc;
    if (n_dims <= 0 || n_dims % 2)
        return fl_err_set(err, -EINVAL, "%s: bad rope dimension count %d", gguf_name(f), n_dims);
    /* llama_context's order: the run's values over the file's, then the
     * scaling type decides the scale and the extrapolation mix */
    enum yarn_scaling type = ctx && ctx->scaling != YARN_SCALING_FILE ? ctx->scaling : r.scaling;
    out->n_dims = n_dims;
    out->n_ctx_orig = given(ctx, YARN_SET_ORIG_CTX) ? ctx->n_ctx_orig : (int)r.ctx_orig;
    out->freq_base = given(ctx, YARN_SET_FREQ_BASE) ? ctx->freq_base : r.base;
    out->freq_scale = given(ctx, YARN_SET_FREQ_SCALE) ? ctx->freq_scale
                      : r.factor == 0.0f              ? 1.0f
                                                      : 1.0f / r.factor;
    if (type == YARN_SCALING_NONE)
        out->freq_scale = 1.0f;
    out->ext_factor = given(ctx, YARN_SET_EXT_FACTOR) ? ctx->ext_factor
                      : type == YARN_SCALING_YARN      ? 1.0f
                                                       : 0.0f;
    out->beta_fast = given(ctx, YARN_SET_BETA_FAST) ? ctx->beta_fast : 32.0f;
    out->beta_slow = given(ctx, YARN_SET_BETA_SLOW) ? ctx->beta_slow : 1.0f;
    out->attn_factor = yarn_context_attn_factor(1.0f / out->freq_scale, out->ext_factor, r.log_mul,
                                                r.rope_attn, !strcmp(arch, "deepseek2"));
    if (out->ext_factor == 0.0f && given(ctx, YARN_SET_ATTN_FACTOR))
        out->attn_factor *= ctx->attn_factor;
    if (!(out->freq_scale > 0) || !(out->freq_base > 0) || out->n_ctx_orig <= 0)
        return fl_err_set(err, -EINVAL, "%s: bad rope settings (freq_base %g, freq_scale %g, "
                          "original context %d)", gguf_name(f), out->freq_base, out->freq_scale,
                          out->n_ctx_orig);
    if (log_mul_out)
        *log_mul_out = r.log_mul;
    return 0;
}

void yarn_context_describe(const struct yarn_context *ctx, char *buf, size_t cap)
{
    static const char *const type[] = { "", "none", "linear", "yarn" };
    snprintf(buf, cap, "%s%s", ctx->scaling ? "scaling=" : "", type[ctx->scaling]);
    const struct { unsigned bit; const char *name; double v; } f[] = {
        { YARN_SET_FREQ_BASE, "freq_base", ctx->freq_base },
        { YARN_SET_FREQ_SCALE, "freq_scale", ctx->freq_scale },
        { YARN_SET_ORIG_CTX, "orig_ctx", ctx->n_ctx_orig },
        { YARN_SET_EXT_FACTOR, "ext_factor", ctx->ext_factor },
        { YARN_SET_ATTN_FACTOR, "attn_factor", ctx->attn_factor },
        { YARN_SET_BETA_FAST, "beta_fast", ctx->beta_fast },
        { YARN_SET_BETA_SLOW, "beta_slow", ctx->beta_slow },
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        size_t n = strlen(buf);
        if ((ctx->set & f[i].bit) && n < cap)
            snprintf(buf + n, cap - n, "%s%s=%.9g", n ? " " : "", f[i].name, f[i].v);
    }
}

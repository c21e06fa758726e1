/* yarn.h: rotary position embedding with YaRN context scaling, computed the
 * way ggml's CPU rope does it.
 *
 * ggml builds, per position, a cache of (cos, sin) pairs, one per rotated
 * pair of dimensions, with the YaRN ramp between the interpolated and the
 * extrapolated angle and the magnitude factor folded into cos and sin. The
 * angle of pair i is pos * base^(-2i/n_dims), built by repeated float
 * multiplication as ggml does, so faultline's rotated q/k match llama.cpp's to
 * the last bit or two.
 *
 * Rotation itself is the backend's eng_rope (model/backend.h) over these tables.
 *
 * The model-level numbers (freq_scale, ext_factor, the attention factor) come
 * from GGUF metadata through the same chain llama.cpp applies when it creates
 * a context: see yarn_from_gguf(). */
#ifndef FL_YARN_H
#define FL_YARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct gguf_file;

/* The arguments of ggml_rope_ext that do not vary by position. */
struct yarn_params {
    int n_dims;        /* rotated dimensions (even); the rest pass through */
    int n_ctx_orig;    /* original training context (YaRN correction dims) */
    float freq_base;
    float freq_scale;  /* 1 / rope.scaling.factor; 1 when not scaled */
    float ext_factor;  /* YaRN extrapolation mix: 1 for yarn, 0 otherwise */
    float attn_factor; /* magnitude factor handed to rope (llama.cpp's cparams.yarn_attn_factor) */
    float beta_fast;
    float beta_slow;
};

/* Ready-to-use rope: the parameters plus what depends only on them. */
struct yarn_rope {
    struct yarn_params p;
    float corr_dims[2];
    float theta_scale; /* base^(-2/n_dims) */
};

/* ggml_rope_yarn_corr_dims: the first and last pair index over which YaRN
 * blends interpolation into extrapolation, clamped to [0, n_dims-1]. */
void yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                    float beta_slow, float dims[2]);

/* Fills r from p. Returns -EINVAL for an odd or non-positive n_dims or a
 * non-positive base/scale. */
int yarn_rope_init(struct yarn_rope *r, const struct yarn_params *p);

/* cache[2i] = cos, cache[2i+1] = sin of pair i at position pos, magnitude
 * factor included; cache holds n_dims floats. */
void yarn_rope_cache(const struct yarn_rope *r, int32_t pos, float *cache);

/* The same for positions pos[0 .. n_pos-1]: row p at cs + p*n_dims, the
 * table the backend's eng_rope takes (after eng_upload). */
void yarn_rope_table(const struct yarn_rope *r, float *cs, const int32_t *pos, int n_pos);

/* The magnitude factor llama.cpp hands to rope (cparams.yarn_attn_factor)
 * for a model trained with YaRN factor `factor` (= 1/freq_scale):
 *   log_mul      rope.scaling.yarn_log_multiplier as llama.cpp holds it
 *                (deepseek2 divides the stored value by 0.1 first),
 *   rope_attn    rope.scaling.attn_factor (1 when absent),
 *   deepseek2    the deepseek2 special case of the mscale pair.
 * ggml's rope multiplies by (1 + 0.1 ln factor) when ext_factor != 0; this
 * value cancels that, as llama.cpp does. */
float yarn_context_attn_factor(float factor, float ext_factor, float log_mul, float rope_attn,
                               bool deepseek2);

/* llama.cpp's rope scaling types (rope.scaling.type, --rope-scaling). */
enum yarn_scaling {
    YARN_SCALING_FILE = 0, /* as the file says (llama.cpp's UNSPECIFIED) */
    YARN_SCALING_NONE,
    YARN_SCALING_LINEAR,
    YARN_SCALING_YARN,
};

/* A run's rope settings over the file's, as llama.cpp's context parameters
 * (--rope-scaling, --rope-scale / --rope-freq-scale, --rope-freq-base,
 * --yarn-orig-ctx, --yarn-ext-factor, --yarn-attn-factor, --yarn-beta-fast,
 * --yarn-beta-slow). Zeroed: everything from the file. A field counts only
 * when its YARN_SET_* bit is in `set`. */
enum {
    YARN_SET_FREQ_BASE = 1 << 0,
    YARN_SET_FREQ_SCALE = 1 << 1,
    YARN_SET_ORIG_CTX = 1 << 2,
    YARN_SET_EXT_FACTOR = 1 << 3,
    YARN_SET_ATTN_FACTOR = 1 << 4,
    YARN_SET_BETA_FAST = 1 << 5,
    YARN_SET_BETA_SLOW = 1 << 6,
};
struct yarn_context {
    enum yarn_scaling scaling;
    unsigned set;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int n_ctx_orig;
};

/* Rope settings of an architecture from GGUF metadata and the run's
 * settings, as llama.cpp's hparams + context creation derive them:
 *   <arch>.rope.freq_base (10000 when absent), .rope.scaling.type
 *   (none|linear|yarn|longrope; linear when absent), .rope.scaling.factor,
 *   .rope.scaling.original_context_length (default <arch>.context_length),
 *   .rope.scaling.attn_factor, .rope.scaling.yarn_log_multiplier;
 * then ctx (may be NULL: the file's alone) over them: scaling `none` sets
 * freq_scale to 1, ext_factor defaults to 1 for yarn and 0 otherwise, and
 * YaRN's attention factor is derived from the resulting scale unless
 * ext_factor is 0 (a given --yarn-attn-factor then counts; with YaRN
 * llama.cpp overwrites it, and so does this).
 * n_dims is the rotated dimension count the caller settled. log_mul_out
 * (may be NULL) receives the yarn_log_multiplier as llama.cpp holds it
 * (after the deepseek2 and deepseek32 /0.1 fix; 0 for glm-dsa, which does
 * not read it) for kq-scale computations.
 * Returns 0, or -EINVAL/-ENOENT with a one-line message. */
int yarn_from_gguf(const struct gguf_file *f, const char *arch, int n_dims,
                   const struct yarn_context *ctx, struct yarn_params *out, float *log_mul_out,
                   struct fl_err *err);

/* Parses a --rope-scaling value (none, linear, yarn); -EINVAL otherwise. */
int yarn_scaling_parse(const char *s, enum yarn_scaling *out);

/* A one-line description of what ctx sets, for a prompt state's signature
 * ("" when nothing is set). */
void yarn_context_describe(const struct yarn_context *ctx, char *buf, size_t cap);

/* deepseek2's attention scale: llama.cpp pre-scales kq by mscale^2 with
 * mscale = attn_factor_org * (1 + 0.1 * log_mul * ln(1/freq_scale)), where
 * attn_factor_org undoes the cancellation above; head_k is the MLA key
 * length (nope + rope). */
float yarn_deepseek2_kq_scale(const struct yarn_params *p, float log_mul, int head_k);

#endif

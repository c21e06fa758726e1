/* delta-net-ref.h: Gated DeltaNet's conv and delta rule in double, straight
 * from the formulas (llama.cpp's ggml_ssm_conv + silu, l2_norm and
 * gated_delta_net; not ggml's transposed layout): the reference of
 * test-recurrent (the CPU ops) and test-cuda-kernels (the device's). Shapes
 * are fixed and small; inputs are random but deterministic in a seed. */
#ifndef FL_TESTS_DELTA_NET_REF_H
#define FL_TESTS_DELTA_NET_REF_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

enum { DN_NK = 2, DN_NV = 4, DN_D = 8, DN_CONV = 4, DN_NTOK = 7 };
enum { DN_W = 2 * DN_NK * DN_D + DN_NV * DN_D }; /* the conv's width: q, k, v */

static float dn_rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

struct dn_inputs {
    float x[DN_NTOK][DN_W], conv_w[DN_W * DN_CONV];
    float alpha[DN_NTOK][DN_NV], beta[DN_NTOK][DN_NV], dt[DN_NV], a[DN_NV];
};

static void dn_make_inputs(struct dn_inputs *in, unsigned seed)
{
    for (int t = 0; t < DN_NTOK; t++) {
        for (int i = 0; i < DN_W; i++)
            in->x[t][i] = dn_rnd(&seed);
        for (int h = 0; h < DN_NV; h++) {
            in->alpha[t][h] = dn_rnd(&seed);
            in->beta[t][h] = 2 * dn_rnd(&seed);
        }
    }
    for (int i = 0; i < DN_W * DN_CONV; i++)
        in->conv_w[i] = 0.5f * dn_rnd(&seed);
    for (int h = 0; h < DN_NV; h++) {
        in->dt[h] = -2 + dn_rnd(&seed);
        in->a[h] = -(1.5f + dn_rnd(&seed));
    }
}

/* The conv then the delta rule in double, straight from the formulas, with
 * each token's log-decay g[t][h][i] per value head and key channel (a
 * plain Gated DeltaNet's is the same for every channel). */
static void dn_reference_decay(const struct dn_inputs *in, bool grouped,
                               const double g[DN_NTOK][DN_NV][DN_D],
                               double out[DN_NTOK][DN_NV * DN_D])
{
    static double S[DN_NV][DN_D][DN_D]; /* S[h][i][j]: key dim i, value dim j */
    double c[DN_NTOK][DN_W];
    memset(S, 0, sizeof(S));
    for (int t = 0; t < DN_NTOK; t++)
        for (int ch = 0; ch < DN_W; ch++) {
            double s = 0;
            for (int i = 0; i < DN_CONV; i++) {
                const int at = t + i - (DN_CONV - 1);
                s += (at < 0 ? 0.0 : in->x[at][ch]) * in->conv_w[ch * DN_CONV + i];
            }
            c[t][ch] = s / (1 + exp(-s));
        }
    for (int t = 0; t < DN_NTOK; t++)
        for (int h = 0; h < DN_NV; h++) {
            double q[DN_D], k[DN_D], nq = 0, nk = 0;
            const int kh = grouped ? h / (DN_NV / DN_NK) : h % DN_NK;
            for (int i = 0; i < DN_D; i++) {
                q[i] = c[t][kh * DN_D + i];
                k[i] = c[t][DN_NK * DN_D + kh * DN_D + i];
                nq += q[i] * q[i];
                nk += k[i] * k[i];
            }
            for (int i = 0; i < DN_D; i++) {
                q[i] /= fmax(sqrt(nq), 1e-6);
                k[i] /= fmax(sqrt(nk), 1e-6);
            }
            const double beta = 1 / (1 + exp(-in->beta[t][h]));
            for (int j = 0; j < DN_D; j++) {
                double sk = 0;
                for (int i = 0; i < DN_D; i++)
                    sk += (S[h][i][j] *= exp(g[t][h][i])) * k[i];
                const double delta = (c[t][2 * DN_NK * DN_D + h * DN_D + j] - sk) * beta;
                for (int i = 0; i < DN_D; i++)
                    S[h][i][j] += k[i] * delta;
            }
            for (int j = 0; j < DN_D; j++) {
                double o = 0;
                for (int i = 0; i < DN_D; i++)
                    o += S[h][i][j] * q[i];
                out[t][h * DN_D + j] = o / sqrt((double)DN_D);
            }
        }
}

/* Gated DeltaNet: one decay per head, softplus(alpha + dt) * a. */
static void dn_reference(const struct dn_inputs *in, bool grouped, double out[DN_NTOK][DN_NV * DN_D])
{
    static double g[DN_NTOK][DN_NV][DN_D];
    for (int t = 0; t < DN_NTOK; t++)
        for (int h = 0; h < DN_NV; h++)
            for (int i = 0; i < DN_D; i++)
                g[t][h][i] = log1p(exp(in->alpha[t][h] + in->dt[h])) * in->a[h];
    dn_reference_decay(in, grouped, g, out);
}

#endif

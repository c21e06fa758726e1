/* test-activation: the gated activations of model/activation.h against
 * their formulas in double: Kimi K3's situ over a sweep of gate and up
 * values (both sides of its tanh's series/exp switch at |y| = 1/8, the
 * saturation at 10, large and tiny values, signed zeros), with and without
 * the up branch's tanh; and gpt-oss's SwiGLU-OAI at its clamps. */
#include <math.h>
#include <stdio.h>

#include "model/activation.h"
#include "tests/check.h"

static double situ_ref(double g, double u, double beta, double lbeta)
{
    const double a = beta * tanh(g / beta) / (1.0 + exp(-g));
    return a * (lbeta > 0 ? lbeta * tanh(u / lbeta) : u);
}

/* Relative error against the double formula, with an absolute floor of a
 * float ulp of the result's scale (both factors) for values near 0. */
static double err_of(float got, double ref, double scale)
{
    return fabs((double)got - ref) / fmax(fabs(ref), scale * 1.2e-7);
}

static void test_situ(float beta, float lbeta)
{
    enum { N = 4001 };
    static float g[N], u[N], out[N];
    for (int i = 0; i < N; i++) { /* -60 .. 60, denser near the switch points */
        const double x = (i - N / 2) / (double)(N / 2);
        g[i] = (float)(60.0 * x * x * x);
        u[i] = (float)(-25.0 * x * fabs(x)) + 0.01f;
    }
    g[0] = 0.0f;
    g[1] = -0.0f;
    g[2] = 0.125f * beta; /* the switch, from both sides */
    g[3] = nextafterf(0.125f * beta, 0.0f);
    g[4] = 1e-30f;
    u[5] = 0.125f * lbeta;
    u[6] = nextafterf(0.125f * lbeta, 0.0f);
    eng_situ_f32(g, u, out, N, beta, lbeta);
    double worst = 0;
    int at = 0;
    for (int i = 0; i < N; i++) {
        const double ref = situ_ref(g[i], u[i], beta, lbeta);
        const double scale = fabs(beta * (lbeta > 0 ? lbeta : fmax(1.0, fabs(u[i]))));
        const double e = err_of(out[i], ref, scale * fmax(1e-30, fabs(g[i]) < 1 ? fabs(g[i]) : 1));
        if (e > worst) {
            worst = e;
            at = i;
        }
    }
    CHECK(worst < 2e-6, "situ beta %g linear %g: relative error %.3g at g %g u %g (%.9g vs %.9g)",
          beta, lbeta, worst, g[at], u[at], out[at], situ_ref(g[at], u[at], beta, lbeta));
    float nan_g = NAN, one = 1.0f, y;
    eng_situ_f32(&nan_g, &one, &y, 1, beta, lbeta);
    CHECK(isnan(y), "situ of a NaN gate: %g", y);
    printf("situ beta %g, linear beta %g: %d values within %.2g of the double formula\n", beta,
           lbeta, N, worst);
}

static void test_swiglu_oai(void)
{
    const float g[4] = { -3.0f, 0.5f, 9.0f, 2.0f }, u[4] = { 1.0f, -9.0f, 2.0f, 8.0f };
    float out[4];
    eng_swiglu_oai(g, u, out, 4, ENG_OAI_ALPHA, ENG_OAI_LIMIT);
    for (int i = 0; i < 4; i++) {
        const double x = fmin(g[i], 7.0), y = fmax(-7.0, fmin(7.0, u[i]));
        const double ref = x / (1.0 + exp(-1.702 * x)) * (y + 1.0);
        CHECK(fabs(out[i] - ref) <= 1e-5 * fmax(1.0, fabs(ref)), "swiglu_oai %d: %g vs %g", i,
              out[i], ref);
    }
    printf("swiglu_oai: clamped gate and up as the formula\n");
}

int main(void)
{
    test_situ(2.0f, 4.0f);
    test_situ(1.0f, 0.0f); /* the up branch left linear */
    test_situ(0.5f, 10.0f);
    test_swiglu_oai();
    return check_summary("test-activation");
}

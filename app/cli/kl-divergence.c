/* kl-divergence.c: llama-perplexity's KL-divergence report (its lines and
 * formulas, so a user compares the two tools' figures line by line). */
#include "app/cli/kl-divergence.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

struct mean_unc {
    double mean, unc;
};

/* Mean and the standard error of the mean (none under 11 values). */
static struct mean_unc mean_and_uncertainty(double sum, double sum2, int64_t count)
{
    if (count < 1)
        return (struct mean_unc){ 0, 0 };
    const double f = sum / count, var = sum2 / count - f * f;
    return (struct mean_unc){ f, var > 0 && count > 10 ? sqrt(var / (count - 1)) : 0 };
}

/* Covariance of the two means (0 under 10 values). */
static double covariance(double sum_a, double sum_b, double sum_ab, int64_t count)
{
    if (count < 10)
        return 0;
    return (sum_ab / count - (sum_a / count) * (sum_b / count)) / (count - 1);
}

int kld_report_init(struct kld_report *k, size_t n_tokens)
{
    *k = (struct kld_report){ .cap = n_tokens };
    k->kld = malloc(sizeof(float) * (n_tokens ? n_tokens : 1));
    k->p_diff = malloc(sizeof(float) * (n_tokens ? n_tokens : 1));
    return k->kld && k->p_diff ? 0 : -ENOMEM;
}

void kld_report_free(struct kld_report *k)
{
    free(k->kld);
    free(k->p_diff);
    k->kld = k->p_diff = NULL;
}

void kld_report_chunk(struct kld_report *k, const float *rows, const uint16_t *base, int n_rows,
                      int32_t n_vocab, const int32_t *next)
{
    const size_t len = fl_kld_row_len(n_vocab);
    for (int i = 0; i < n_rows && k->n < k->cap; i++, k->n++)
        k->kld[k->n] = (float)fl_kld_compare_row(rows + (size_t)i * n_vocab, n_vocab,
                                                 base + (size_t)i * len, next[i], &k->s,
                                                 &k->p_diff[k->n]);
}

void kld_print_header(FILE *out)
{
    fprintf(out, "\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
            "              \xce\x94p RMS            Same top p\n");
}

/* ln(PPL(Q)/PPL(base)) and its uncertainty, the two NLLs being correlated. */
static struct mean_unc log_ppl_ratio(const struct fl_kld_sums *s)
{
    const struct mean_unc q = mean_and_uncertainty(s->nll, s->nll2, s->count);
    const struct mean_unc b = mean_and_uncertainty(s->nll_base, s->nll_base2, s->count);
    const double cov = covariance(s->nll, s->nll_base, s->nll_nll_base, s->count);
    return (struct mean_unc){ q.mean - b.mean, sqrt(q.unc * q.unc + b.unc * b.unc - 2 * cov) };
}

static struct mean_unc p_diff_rms(const struct fl_kld_sums *s)
{
    const struct mean_unc mse = mean_and_uncertainty(s->p_diff2, s->p_diff4, s->count);
    const double rms = sqrt(mse.mean);
    return (struct mean_unc){ rms, 0.5 / rms * mse.unc };
}

void kld_print_chunk(const struct kld_report *k, int chunk, FILE *out)
{
    const struct fl_kld_sums *s = &k->s;
    const struct mean_unc q = mean_and_uncertainty(s->nll, s->nll2, s->count);
    const struct mean_unc ratio = log_ppl_ratio(s);
    const struct mean_unc kl = mean_and_uncertainty(s->kld, s->kld2, s->count);
    const struct mean_unc rms = p_diff_rms(s);
    const double top = 1.0 * s->n_same_top / s->count;
    fprintf(out, "%4d    %9.4lf \xc2\xb1 %9.4lf    %10.5lf \xc2\xb1 %10.5lf    %10.5lf \xc2\xb1 %10.5lf"
            "    %6.3lf \xc2\xb1 %6.3lf %%    %6.3lf \xc2\xb1 %6.3lf %%\n", chunk + 1, exp(q.mean),
            exp(q.mean) * q.unc, ratio.mean, ratio.unc, kl.mean, kl.unc, 100 * rms.mean,
            100 * rms.unc, 100 * top, 100 * sqrt(top * (1 - top) / (s->count - 1)));
    fflush(out);
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The value at fraction of the sorted values, interpolated (in float, as
 * llama.cpp). */
static float percentile(const float *v, size_t n, float fraction)
{
    if (fraction <= 0)
        return v[0];
    if (fraction >= 1)
        return v[n - 1];
    float p = fraction * (float)(n - 1);
    const size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static float median(const float *v, size_t n)
{
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

static void print_ppl(const struct fl_kld_sums *s, FILE *out)
{
    const struct mean_unc q = mean_and_uncertainty(s->nll, s->nll2, s->count);
    const struct mean_unc b = mean_and_uncertainty(s->nll_base, s->nll_base2, s->count);
    const double ppl = exp(q.mean), ppl_unc = ppl * q.unc;
    const double ppl_base = exp(b.mean), ppl_base_unc = ppl_base * b.unc;
    const double cov = covariance(s->nll, s->nll_base, s->nll_nll_base, s->count);
    const struct mean_unc ratio = log_ppl_ratio(s);
    fprintf(out, "====== Perplexity statistics ======\n");
    fprintf(out, "Mean PPL(Q)                   : %10.6lf \xc2\xb1 %10.6lf\n", ppl, ppl_unc);
    fprintf(out, "Mean PPL(base)                : %10.6lf \xc2\xb1 %10.6lf\n", ppl_base, ppl_base_unc);
    fprintf(out, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * cov / (q.unc * b.unc));
    fprintf(out, "Mean ln(PPL(Q)/PPL(base))     : %10.6lf \xc2\xb1 %10.6lf\n", ratio.mean, ratio.unc);
    fprintf(out, "Mean PPL(Q)/PPL(base)         : %10.6lf \xc2\xb1 %10.6lf\n", exp(ratio.mean),
            exp(ratio.mean) * ratio.unc);
    const double ppl_cov = ppl * ppl_base * cov;
    fprintf(out, "Mean PPL(Q)-PPL(base)         : %10.6lf \xc2\xb1 %10.6lf\n\n", ppl - ppl_base,
            sqrt(ppl_unc * ppl_unc + ppl_base_unc * ppl_base_unc - 2.0 * ppl_cov));
}

static void print_kld(const struct kld_report *k, FILE *out)
{
    static const struct { const char *name; float f; } rows[] = {
        { "99.9%   KLD", 0.999f }, { "99.0%   KLD", 0.990f }, { "95.0%   KLD", 0.950f },
        { "90.0%   KLD", 0.900f }, { NULL, 0 }, { "10.0%   KLD", 0.100f },
        { " 5.0%   KLD", 0.050f }, { " 1.0%   KLD", 0.010f }, { " 0.1%   KLD", 0.001f },
    };
    const struct mean_unc kl = mean_and_uncertainty(k->s.kld, k->s.kld2, k->s.count);
    fprintf(out, "====== KL divergence statistics ======\n");
    fprintf(out, "Mean    KLD: %10.6lf \xc2\xb1 %10.6lf\n", kl.mean, kl.unc);
    fprintf(out, "Maximum KLD: %10.6f\n", k->kld[k->n - 1]);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i].name)
            fprintf(out, "%s: %10.6f\n", rows[i].name, percentile(k->kld, k->n, rows[i].f));
        else
            fprintf(out, "Median  KLD: %10.6f\n", median(k->kld, k->n));
    fprintf(out, "Minimum KLD: %10.6f\n\n", k->kld[0]);
}

static void print_p_diff(const struct kld_report *k, FILE *out)
{
    static const float above[] = { 0.999f, 0.990f, 0.950f, 0.900f, 0.750f };
    static const float below[] = { 0.250f, 0.100f, 0.050f, 0.010f, 0.001f };
    const float *v = k->p_diff;
    const struct mean_unc m = mean_and_uncertainty(k->s.p_diff, k->s.p_diff2, k->s.count);
    fprintf(out, "====== Token probability statistics ======\n");
    fprintf(out, "Mean    \xce\x94p: %6.3lf \xc2\xb1 %5.3lf %%\n", 100.0 * m.mean, 100.0 * m.unc);
    fprintf(out, "Maximum \xce\x94p: %6.3lf%%\n", 100.0 * v[k->n - 1]);
    for (size_t i = 0; i < 5; i++)
        fprintf(out, "%4.1f%%   \xce\x94p: %6.3lf%%\n", 100.0 * above[i],
                100.0 * percentile(v, k->n, above[i]));
    fprintf(out, "Median  \xce\x94p: %6.3lf%%\n", 100.0 * median(v, k->n));
    for (size_t i = 0; i < 5; i++)
        fprintf(out, "%4.1f%%   \xce\x94p: %6.3lf%%\n", 100.0 * below[i],
                100.0 * percentile(v, k->n, below[i]));
    fprintf(out, "Minimum \xce\x94p: %6.3lf%%\n", 100.0 * v[0]);
    const struct mean_unc rms = p_diff_rms(&k->s);
    fprintf(out, "RMS \xce\x94p    : %6.3lf \xc2\xb1 %5.3lf %%\n", 100.0 * rms.mean, 100.0 * rms.unc);
    const double top = 1.0 * k->s.n_same_top / k->s.count;
    fprintf(out, "Same top p: %6.3lf \xc2\xb1 %5.3lf %%\n", 100.0 * top,
            100.0 * sqrt(top * (1.0 - top) / (k->s.count - 1)));
}

int kld_print_final(struct kld_report *k, FILE *out)
{
    fprintf(out, "\n");
    if (k->s.count < 100)
        return 1;
    qsort(k->kld, k->n, sizeof(float), cmp_float);
    qsort(k->p_diff, k->n, sizeof(float), cmp_float);
    print_ppl(&k->s, out);
    print_kld(k, out);
    print_p_diff(k, out);
    fflush(out);
    return 0;
}

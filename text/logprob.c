/* logprob.c: log-softmax of a logits row and its top tokens (logprob.h). */
#include "text/logprob.h"

#include <math.h>

double fl_logsumexp(const float *row, int n)
{
    double max = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!isfinite(row[i]))
            return NAN;
        if (row[i] > max)
            max = row[i];
    }
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += exp((double)row[i] - max);
    return max + log(sum);
}

/* Whether (va, a) ranks before (vb, b): the larger logit, then the lower id. */
static int before(float va, int32_t a, float vb, int32_t b)
{
    return va > vb || (va == vb && a < b);
}

int fl_top_logprobs(const float *row, int n, double lse, int k, struct fl_logprob *out)
{
    k = k < 0 ? 0 : k > FL_MAX_TOP_LOGPROBS ? FL_MAX_TOP_LOGPROBS : k;
    int32_t best[FL_MAX_TOP_LOGPROBS];
    int have = 0;
    for (int32_t i = 0; i < n && k > 0; i++) {
        if (have == k && !before(row[i], i, row[best[k - 1]], best[k - 1]))
            continue;
        int at = have < k ? have++ : k - 1; /* insertion: the last place is free */
        while (at > 0 && before(row[i], i, row[best[at - 1]], best[at - 1])) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = i;
    }
    for (int j = 0; j < have; j++)
        out[j] = (struct fl_logprob){ best[j], (float)((double)row[best[j]] - lse) };
    return have;
}

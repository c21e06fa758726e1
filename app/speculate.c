/* speculate.c: see app/speculate.h. */
#include "app/speculate.h"

#include <string.h>

static const char *const type_names[] = { "none", "ngram-simple" };

int eng_spec_type_parse(const char *s)
{
    for (int i = 0; s && i < (int)(sizeof(type_names) / sizeof(type_names[0])); i++)
        if (!strcmp(s, type_names[i]))
            return i;
    return -1;
}

const char *eng_spec_type_name(enum eng_spec_type t)
{
    return (unsigned)t < sizeof(type_names) / sizeof(type_names[0]) ? type_names[t] : "?";
}

/* Token i of the history a ++ b. */
static int32_t at(const int32_t *a, int na, const int32_t *b, int i)
{
    return i < na ? a[i] : b[i - na];
}

int eng_spec_draft(const struct eng_spec_params *p, const int32_t *a, int na, const int32_t *b,
                   int nb, int32_t *out, int max)
{
    const int n = p->size_n, m = p->size_m, all = na + nb;
    /* llama.cpp's `tokens` is the history without the sampled token */
    const int cur = all - 1;
    if (p->type != ENG_SPEC_NGRAM_SIMPLE || n < 1 || max < 1 || cur <= n + m + 1)
        return 0;
    /* the key: the last n tokens, the sampled one included, starting at cur - n + 1;
     * the search goes back from the latest start that ends before the sampled token */
    int match = 0; /* 0: none (position 0 is never a match, as in llama.cpp) */
    for (int j = cur - n - 1; j > 0 && !match; j--) {
        int k = 0;
        while (k < n && at(a, na, b, j + k) == at(a, na, b, cur - n + 1 + k))
            k++;
        if (k == n)
            match = j;
    }
    if (!match)
        return 0;
    int len = cur - (match + n);
    len = len < m ? len : m;
    if (len < n)
        return 0;
    len = len < max ? len : max;
    for (int j = 0; j < len; j++)
        out[j] = at(a, na, b, match + n + j);
    return len;
}

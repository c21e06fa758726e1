/* sampler-order.c: llama.cpp's names and letters for the sampler chain
 * (its common/sampling.cpp: common_sampler_types_from_names and _from_chars),
 * read into fl_sampler_params. llama.cpp warns about a name it does not know
 * and drops it; here it is an error, since a chain silently missing a step
 * samples differently from what the user asked for. */
#include "text/sampler.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/error.h"

/* What a name or letter stands for: a sampler, or one of llama.cpp's that
 * faultline lacks (0). */
struct sampler_name {
    const char *name;
    enum fl_sampler_type type;
};

/* llama.cpp's canonical names, their kebab-case and no-dash spellings, and
 * its three extra aliases (nucleus, temp, typ). mirostat is no --samplers
 * name in llama.cpp (it replaces the chain, with --mirostat); it is listed
 * so that asking for it says so rather than "unknown". */
static const struct sampler_name names[] = {
    { "penalties", FL_SAMPLER_PENALTIES },
    { "top_k", FL_SAMPLER_TOP_K },       { "top-k", FL_SAMPLER_TOP_K },
    { "topk", FL_SAMPLER_TOP_K },
    { "typ_p", FL_SAMPLER_TYPICAL_P },   { "typ-p", FL_SAMPLER_TYPICAL_P },
    { "typp", FL_SAMPLER_TYPICAL_P },    { "typ", FL_SAMPLER_TYPICAL_P },
    { "top_p", FL_SAMPLER_TOP_P },       { "top-p", FL_SAMPLER_TOP_P },
    { "topp", FL_SAMPLER_TOP_P },        { "nucleus", FL_SAMPLER_TOP_P },
    { "min_p", FL_SAMPLER_MIN_P },       { "min-p", FL_SAMPLER_MIN_P },
    { "minp", FL_SAMPLER_MIN_P },
    { "temperature", FL_SAMPLER_TEMPERATURE }, { "temp", FL_SAMPLER_TEMPERATURE },
    { "dry", FL_SAMPLER_DRY },
    { "top_n_sigma", FL_SAMPLER_TOP_N_SIGMA }, { "top-n-sigma", FL_SAMPLER_TOP_N_SIGMA },
    { "topnsigma", FL_SAMPLER_TOP_N_SIGMA },
    { "xtc", FL_SAMPLER_XTC },
    { "infill", 0 },
    { "adaptive_p", 0 },                 { "adaptive-p", 0 },
    { "adaptivep", 0 },
    { "mirostat", 0 },
};

/* --sampling-seq's letters (common_sampler_type_to_chr) */
static const struct {
    char letter;
    const char *name;
    enum fl_sampler_type type;
} letters[] = {
    { 'e', "penalties", FL_SAMPLER_PENALTIES }, { 'k', "top_k", FL_SAMPLER_TOP_K },
    { 'y', "typ_p", FL_SAMPLER_TYPICAL_P },     { 'p', "top_p", FL_SAMPLER_TOP_P },
    { 'm', "min_p", FL_SAMPLER_MIN_P },         { 't', "temperature", FL_SAMPLER_TEMPERATURE },
    { 'd', "dry", FL_SAMPLER_DRY },             { 's', "top_n_sigma", FL_SAMPLER_TOP_N_SIGMA },
    { 'x', "xtc", FL_SAMPLER_XTC },             { 'i', "infill", 0 },
    { 'a', "adaptive_p", 0 },
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define KNOWN "penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature"

const char *fl_sampler_type_name(enum fl_sampler_type t)
{
    for (size_t i = 0; i < N_OF(letters); i++)
        if (letters[i].type && letters[i].type == t)
            return letters[i].name;
    return NULL;
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* The name [s, s + len) as it can go in a one-line message: at most 40
 * bytes, anything but printable ASCII as '?' (it is the user's input). */
static const char *shown(const char *s, size_t len, char out[48])
{
    size_t n = len < 40 ? len : 40, i;
    for (i = 0; i < n; i++)
        out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    strcpy(out + i, len > n ? "..." : "");
    return out;
}

/* The entry of names[] that [s, s + len) spells, ignoring case, or NULL. */
static const struct sampler_name *lookup(const char *s, size_t len)
{
    for (size_t i = 0; i < N_OF(names); i++) {
        const char *n = names[i].name;
        size_t j = 0;
        while (j < len && n[j] && lower(s[j]) == n[j])
            j++;
        if (j == len && !n[j])
            return &names[i];
    }
    return NULL;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* One ';'-separated entry [s, e) into order[*n]; one naming a sampler
 * faultline lacks is left out with skip_missing, else refused. */
static int parse_name(const char *s, const char *e, int32_t pos, bool skip_missing,
                      enum fl_sampler_type *order, int32_t *n, struct fl_err *err)
{
    char buf[48];
    while (s < e && blank(*s))
        s++;
    while (e > s && blank(e[-1]))
        e--;
    if (s == e)
        return fl_err_set(err, -EINVAL, "sampler %d of the order is empty (names: " KNOWN ")",
                          (int)pos + 1);
    const struct sampler_name *m = lookup(s, (size_t)(e - s));
    if (!m)
        return fl_err_set(err, -EINVAL, "unknown sampler '%s' (names: " KNOWN ")",
                          shown(s, (size_t)(e - s), buf));
    if (!m->type && skip_missing)
        return 0;
    if (!m->type && !strcmp(m->name, "mirostat"))
        return fl_err_set(err, -EINVAL, "'mirostat' is no step of the order: --mirostat 1 or 2 "
                          "replaces the chain, as in llama.cpp");
    if (!m->type)
        return fl_err_set(err, -EINVAL, "sampler '%s' is not implemented in faultline",
                          shown(s, (size_t)(e - s), buf));
    if (*n == FL_SAMPLER_MAX_ORDER)
        return fl_err_set(err, -EINVAL, "more than %d samplers in the order",
                          FL_SAMPLER_MAX_ORDER);
    order[(*n)++] = m->type;
    return 0;
}

/* Keeps a parsed order; an order that skipped every entry is refused: n 0
 * means the default chain, not none. */
static int set_order(struct fl_sampler_params *p, const enum fl_sampler_type *order, int32_t n,
                     struct fl_err *err)
{
    if (n == 0)
        return fl_err_set(err, -EINVAL, "the order names no sampler faultline runs (names: "
                          KNOWN ")");
    memcpy(p->order, order, (size_t)n * sizeof(*order));
    p->n_order = n;
    return 0;
}

static int parse_order(const char *names_str, bool skip_missing, struct fl_sampler_params *p,
                       struct fl_err *err)
{
    if (!names_str || !p)
        return fl_err_set(err, -EINVAL, "no sampler order given");
    enum fl_sampler_type order[FL_SAMPLER_MAX_ORDER];
    int32_t n = 0, pos = 0;
    for (const char *s = names_str;; pos++) {
        const char *e = strchr(s, ';');
        if (!e)
            e = s + strlen(s);
        int rc = parse_name(s, e, pos, skip_missing, order, &n, err);
        if (rc)
            return rc;
        if (!*e)
            break;
        s = e + 1;
    }
    return set_order(p, order, n, err);
}

int fl_sampler_parse_order(const char *names_str, struct fl_sampler_params *p, struct fl_err *err)
{
    return parse_order(names_str, false, p, err);
}

int fl_sampler_parse_order_lenient(const char *names_str, struct fl_sampler_params *p,
                                   struct fl_err *err)
{
    return parse_order(names_str, true, p, err);
}

static int parse_seq(const char *seq, bool skip_missing, struct fl_sampler_params *p,
                     struct fl_err *err)
{
    if (!seq || !p)
        return fl_err_set(err, -EINVAL, "no sampler sequence given");
    size_t len = strlen(seq);
    if (len == 0)
        return fl_err_set(err, -EINVAL, "the sampler sequence is empty (letters: edskypmxt)");
    if (len > FL_SAMPLER_MAX_ORDER)
        return fl_err_set(err, -EINVAL, "more than %d samplers in the sequence",
                          FL_SAMPLER_MAX_ORDER);
    enum fl_sampler_type order[FL_SAMPLER_MAX_ORDER];
    int32_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char buf[48];
        size_t j = 0;
        while (j < N_OF(letters) && letters[j].letter != seq[i])
            j++;
        if (j == N_OF(letters))
            return fl_err_set(err, -EINVAL,
                              "unknown sampler letter '%s' (letters: e penalties, d dry, "
                              "s top_n_sigma, k top_k, y typ_p, p top_p, m min_p, x xtc, "
                              "t temperature)",
                              shown(seq + i, 1, buf));
        if (!letters[j].type && skip_missing)
            continue;
        if (!letters[j].type)
            return fl_err_set(err, -EINVAL, "sampler '%c' (%s) is not implemented in faultline",
                              seq[i], letters[j].name);
        order[n++] = letters[j].type;
    }
    return set_order(p, order, n, err);
}

int fl_sampler_parse_seq(const char *seq, struct fl_sampler_params *p, struct fl_err *err)
{
    return parse_seq(seq, false, p, err);
}

int fl_sampler_parse_seq_lenient(const char *seq, struct fl_sampler_params *p, struct fl_err *err)
{
    return parse_seq(seq, true, p, err);
}

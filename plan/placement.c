#define PCRE2_CODE_UNIT_WIDTH 8
#include "plan/placement.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/host-memory.h"
#include "base/units.h"
#include "gguf/gguf.h"
#include "gguf/tensor-names.h"
#include "pager/pager.h"

#define PL_PAGE 4096ull

/* A rule: the user's regex (-ot, --regex-offload), or, for the built-in
 * flags (--cpu-moe, --n-cpu-moe N, ...), the expert tensors of the first
 * n_layers blocks (n_layers < 0: of every block). */
struct pl_rule {
    pcre2_code *re;
    int n_layers;
    enum pl_tier tier;
    char reason[160];
};

struct placement_plan {
    int64_t n_tensors;
    enum pl_tier *tier;
    char (*reason)[160];
    uint64_t bytes[PL_TIER_COUNT];
    uint64_t file_size;
    uint64_t ram_budget;
    bool auto_budget;        /* no --ram-budget: the plan chose it */
    uint64_t min_budget;
    uint64_t largest_unit;   /* the largest paged unit: an expert, or a whole paged tensor */
    uint64_t staging;        /* the pager's staging buffers for such units */
    uint64_t ram_available, vram_available, ram_cgroup_limit;
    enum placement_misfit misfit;
    bool have_gpu;
    char warning[200];
    char why[320];
};

static const char *tier_names[PL_TIER_COUNT] = { "gpu", "ram", "disk" };

const char *placement_tier_name(enum pl_tier t)
{
    return (unsigned)t < PL_TIER_COUNT ? tier_names[t] : "?";
}

int placement_tier_parse(const char *name, enum pl_tier *out)
{
    for (int t = 0; t < PL_TIER_COUNT; t++)
        if (!strcasecmp(name, tier_names[t])) {
            *out = (enum pl_tier)t;
            return 0;
        }
    /* llama.cpp's buffer-type names: CPU (and CPU_*), CUDA<n>[...] */
    if (!strncasecmp(name, "CPU", 3)) {
        *out = PL_TIER_RAM;
        return 0;
    }
    if (!strncasecmp(name, "CUDA", 4) && isdigit((unsigned char)name[4])) {
        *out = PL_TIER_GPU;
        return 0;
    }
    return -EINVAL;
}

void placement_options_init(struct placement_options *o)
{
    memset(o, 0, sizeof(*o));
    o->n_gpu_layers = -1;
    o->last_all_moe = PL_TIER_RAM;
}

static int parse_count(const char *flag, const char *v, int *out, struct fl_err *err)
{
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : -1;
    if (!v || *v == '\0' || *end != '\0' || n < 0 || n > 1000000)
        return fl_err_set(err, -EINVAL, "%s: expected a non-negative integer, got '%s'", flag,
                          v ? v : "");
    *out = (int)n;
    return 0;
}

static int parse_budget(const char *flag, const char *v, uint64_t *out, struct fl_err *err)
{
    if (v && !strcmp(v, "auto")) {
        *out = 0;
        return 0;
    }
    if (!v || fl_parse_size(v, out) || *out == 0)
        return fl_err_set(err, -EINVAL, "%s: expected a size such as 48G or 'auto', got '%s'",
                          flag, v ? v : "");
    return 0;
}

static int check_rules(const struct placement_options *o, struct fl_err *err);

int placement_parse_flag(struct placement_options *o, int argc, char **argv, int *i,
                         struct fl_err *err)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int rc = 1;
    if (!strcmp(a, "--cpu-moe") || !strcmp(a, "-cmoe")) {
        o->cpu_moe = true;
        o->last_all_moe = PL_TIER_RAM;
        return 1;
    }
    if (!strcmp(a, "--disk-moe")) {
        o->disk_moe = true;
        o->last_all_moe = PL_TIER_DISK;
        return 1;
    }
    if (!strcmp(a, "--verbose")) {
        o->verbose = true;
        return 1;
    }
    if (!strcmp(a, "-ot") || !strcmp(a, "--override-tensor")) {
        if (!v || !strchr(v, '='))
            return fl_err_set(err, -EINVAL, "%s: expected REGEX=TIER[,REGEX=TIER...]", a);
        if (o->n_overrides >= (int)(sizeof(o->overrides) / sizeof(o->overrides[0])))
            return fl_err_set(err, -EINVAL, "%s: too many override flags", a);
        o->overrides[o->n_overrides++] = v;
        rc = check_rules(o, err); /* a bad regex is a command-line mistake, found now */
    } else if (!strcmp(a, "--regex-offload")) {
        if (!v)
            return fl_err_set(err, -EINVAL, "%s: expected a regex", a);
        o->regex_offload = v;
        rc = check_rules(o, err);
    } else if (!strcmp(a, "--n-cpu-moe") || !strcmp(a, "-ncmoe")) {
        rc = parse_count(a, v, &o->n_cpu_moe, err);
    } else if (!strcmp(a, "--n-disk-moe")) {
        rc = parse_count(a, v, &o->n_disk_moe, err);
    } else if (!strcmp(a, "-ngl") || !strcmp(a, "--gpu-layers") || !strcmp(a, "--n-gpu-layers")) {
        if (v && !strcmp(v, "all"))
            o->n_gpu_layers = -1;
        else
            rc = parse_count(a, v, &o->n_gpu_layers, err);
    } else if (!strcmp(a, "--ram-budget")) {
        rc = parse_budget(a, v, &o->ram_budget, err);
    } else if (!strcmp(a, "--vram-budget")) {
        rc = parse_budget(a, v, &o->vram_budget, err);
    } else {
        return 0;
    }
    if (rc < 0)
        return rc;
    (*i)++;
    return 1;
}

void placement_print_usage(FILE *out)
{
    fprintf(out,
        "placement (first matching rule wins):\n"
        "  -ot, --override-tensor REGEX=TIER[,...]  TIER: gpu|ram|disk (or llama.cpp's CPU, CUDA0)\n"
        "  --cpu-moe | --disk-moe     all expert tensors in RAM | paged from disk\n"
        "  --n-cpu-moe N              experts of the first N layers in RAM\n"
        "  --n-disk-moe N             experts of the first N layers paged from disk\n"
        "  --regex-offload REGEX      matching tensors on the GPU, the rest on host tiers\n"
        "  -ngl N                     the last N layers on the GPU (default: all when a GPU is present)\n"
        "  --ram-budget SIZE|auto     resident bytes of paged experts (default auto)\n"
        "  --vram-budget SIZE|auto    VRAM for weights and the expert cache\n");
}

void placement_host_detect(struct placement_host *host)
{
    memset(host, 0, sizeof(*host));
    struct fl_mem_headroom mem;
    fl_mem_headroom_read("", &mem);
    host->ram_available = fl_mem_headroom_bytes(&mem);
    if (mem.cgroup != UINT64_MAX && host->ram_available == mem.cgroup)
        host->ram_cgroup_limit = mem.cgroup_limit;
}

static pcre2_code *compile_regex(const char *pattern, struct fl_err *err)
{
    int code = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code,
                                   &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(code, msg, sizeof(msg));
        fl_err_set(err, -EINVAL, "bad tensor regex '%s': %s at %zu", pattern, (char *)msg,
                   (size_t)at);
    }
    return re;
}

static bool regex_search(pcre2_code *re, const char *s)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return false;
    int rc = pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

/* --- rules ------------------------------------------------------------------- */

struct pl_rules {
    struct pl_rule *v;
    int n, cap;
};

static void rules_free(struct pl_rules *r)
{
    for (int i = 0; i < r->n; i++)
        pcre2_code_free(r->v[i].re);
    free(r->v);
}

/* pattern NULL: the experts of the first n_layers blocks (all when < 0). */
static int rules_add(struct pl_rules *r, const char *pattern, int n_layers, enum pl_tier tier,
                     const char *reason, struct fl_err *err)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        struct pl_rule *v = realloc(r->v, (size_t)cap * sizeof(*v));
        if (!v)
            return fl_err_set(err, -ENOMEM, "out of memory building placement rules");
        r->v = v;
        r->cap = cap;
    }
    pcre2_code *re = pattern ? compile_regex(pattern, err) : NULL;
    if (pattern && !re)
        return -EINVAL;
    struct pl_rule *rule = &r->v[r->n++];
    rule->re = re;
    rule->n_layers = n_layers;
    rule->tier = tier;
    snprintf(rule->reason, sizeof(rule->reason), "%s", reason);
    return 0;
}

static bool rule_matches(const struct pl_rule *rule, const char *name)
{
    if (rule->re)
        return regex_search(rule->re, name);
    return fl_tensor_is_expert(name) &&
           (rule->n_layers < 0 || (fl_tensor_block(name) >= 0 &&
                                   fl_tensor_block(name) < rule->n_layers));
}

/* One -ot value: "REGEX=TIER[,REGEX=TIER...]", like llama.cpp. */
static int rules_add_overrides(struct pl_rules *r, const char *spec, struct fl_err *err)
{
    char *copy = strdup(spec);
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
        char *eq = strrchr(item, '=');
        enum pl_tier tier;
        if (!eq || eq == item) {
            rc = fl_err_set(err, -EINVAL, "-ot: '%s' is not REGEX=TIER", item);
            break;
        }
        *eq = '\0';
        if (placement_tier_parse(eq + 1, &tier)) {
            rc = fl_err_set(err, -EINVAL, "-ot: unknown tier '%s' (gpu, ram, disk, CPU, CUDA0)",
                            eq + 1);
            break;
        }
        char reason[160];
        snprintf(reason, sizeof(reason), "-ot %s=%s", item, eq + 1);
        rc = rules_add(r, item, 0, tier, reason, err);
    }
    free(copy);
    return rc;
}

static int rules_add_layers(struct pl_rules *r, int n_layers, enum pl_tier tier,
                            const char *flag, struct fl_err *err)
{
    char reason[64];
    snprintf(reason, sizeof(reason), "%s %d", flag, n_layers);
    return rules_add(r, NULL, n_layers, tier, reason, err);
}

static int rules_build(struct pl_rules *r, const struct placement_options *o, struct fl_err *err);

static int check_rules(const struct placement_options *o, struct fl_err *err)
{
    struct pl_rules r = { 0 };
    int rc = rules_build(&r, o, err);
    rules_free(&r);
    return rc < 0 ? rc : 1;
}

static int rules_build(struct pl_rules *r, const struct placement_options *o, struct fl_err *err)
{
    int rc = 0;
    for (int i = 0; i < o->n_overrides && !rc; i++)
        rc = rules_add_overrides(r, o->overrides[i], err);
    if (!rc && o->n_disk_moe)
        rc = rules_add_layers(r, o->n_disk_moe, PL_TIER_DISK, "--n-disk-moe", err);
    if (!rc && o->n_cpu_moe)
        rc = rules_add_layers(r, o->n_cpu_moe, PL_TIER_RAM, "--n-cpu-moe", err);
    if (!rc && (o->cpu_moe || o->disk_moe)) {
        bool disk = o->disk_moe && (!o->cpu_moe || o->last_all_moe == PL_TIER_DISK);
        rc = rules_add(r, NULL, -1, disk ? PL_TIER_DISK : PL_TIER_RAM,
                       disk ? "--disk-moe" : "--cpu-moe", err);
    }
    if (!rc && o->regex_offload) {
        char reason[160];
        snprintf(reason, sizeof(reason), "--regex-offload %s", o->regex_offload);
        rc = rules_add(r, o->regex_offload, 0, PL_TIER_GPU, reason, err);
    }
    return rc;
}

/* --- the plan ---------------------------------------------------------------- */

struct pl_model {
    int n_layer;       /* <arch>.block_count */
    int n_expert_used; /* <arch>.expert_used_count */
    int n_expert;      /* <arch>.expert_count */
    int n_trunk;       /* blocks the pass runs: block_count minus nextn_predict_layers */
};

static void read_model(const struct gguf_file *f, struct pl_model *m)
{
    const char *arch = NULL;
    char key[128];
    int64_t v;
    memset(m, 0, sizeof(*m));
    if (gguf_get_str(f, "general.architecture", &arch))
        return;
    snprintf(key, sizeof(key), "%s.block_count", arch);
    if (!gguf_get_int(f, key, &v) && v > 0 && v < 100000)
        m->n_layer = (int)v;
    snprintf(key, sizeof(key), "%s.expert_used_count", arch);
    if (!gguf_get_int(f, key, &v) && v > 0 && v < 100000)
        m->n_expert_used = (int)v;
    snprintf(key, sizeof(key), "%s.expert_count", arch);
    if (!gguf_get_int(f, key, &v) && v > 0 && v < 1000000)
        m->n_expert = (int)v;
    m->n_trunk = m->n_layer;
    snprintf(key, sizeof(key), "%s.nextn_predict_layers", arch);
    if (!gguf_get_int(f, key, &v) && v > 0 && v < m->n_layer)
        m->n_trunk = m->n_layer - (int)v;
}

/* The trailing nextn (multi-token prediction) blocks are not run: they stay
 * on disk whatever the rules say, so nothing reads them. */
static bool nextn_block(const char *name, const struct pl_model *m)
{
    return fl_tensor_block(name) >= m->n_trunk;
}

/* Layer index as -ngl counts it: blk.N is N, the input embedding is never
 * offloaded (-1), everything else (output, output_norm, ...) is layer n_layer. */
static int ngl_layer(const char *name, const struct pl_model *m)
{
    int il = fl_tensor_block(name);
    if (il >= 0)
        return il;
    if (!strncmp(name, "token_embd", 10))
        return -1;
    return m->n_layer;
}

static void decide_default(struct placement_plan *p, int64_t i, const char *name,
                           const struct placement_options *o, const struct pl_model *m,
                           bool file_fits)
{
    if (fl_tensor_is_expert(name)) {
        p->tier[i] = file_fits ? PL_TIER_RAM : PL_TIER_DISK;
        snprintf(p->reason[i], sizeof(p->reason[i]), "default: expert, file %s the RAM budget",
                 file_fits ? "fits" : "exceeds");
        return;
    }
    if (o->regex_offload) {
        p->tier[i] = PL_TIER_RAM;
        snprintf(p->reason[i], sizeof(p->reason[i]), "--regex-offload (not matched)");
        return;
    }
    bool ngl_given = o->n_gpu_layers >= 0;
    int ngl = ngl_given ? o->n_gpu_layers : m->n_layer + 1;
    int il = ngl_layer(name, m);
    bool on_gpu = il >= 0 && il >= m->n_layer + 1 - ngl && (p->have_gpu || ngl_given);
    p->tier[i] = on_gpu ? PL_TIER_GPU : PL_TIER_RAM;
    if (il < 0)
        snprintf(p->reason[i], sizeof(p->reason[i]), "default: input embedding stays on the host");
    else if (ngl_given)
        snprintf(p->reason[i], sizeof(p->reason[i]), "-ngl %d", o->n_gpu_layers);
    else
        snprintf(p->reason[i], sizeof(p->reason[i]), "default: non-expert on the %s",
                 on_gpu ? "GPU" : "host");
}

/* Page-rounded bytes of one expert's slice of a paged tensor: the pager
 * resolves whole slices, and a slice that straddles pages costs both. */
static uint64_t expert_slice_bytes(const struct gguf_tensor *t, int n_expert)
{
    if (n_expert <= 0)
        return t->nbytes;
    uint64_t slice = t->nbytes / (uint64_t)n_expert;
    return (slice + PL_PAGE - 1) / PL_PAGE * PL_PAGE + PL_PAGE;
}

static void compute_min_budget(struct placement_plan *p, const struct gguf_file *f,
                               const struct pl_model *m)
{
    int n_layer = m->n_layer > 0 ? m->n_layer : 1;
    uint64_t *per_layer = calloc((size_t)n_layer, sizeof(uint64_t));
    if (!per_layer)
        return;
    for (int64_t i = 0; i < p->n_tensors; i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        int il = fl_tensor_block(t->name);
        if (p->tier[i] != PL_TIER_DISK || il < 0 || il >= n_layer || il >= m->n_trunk)
            continue;
        bool expert = fl_tensor_is_expert(t->name);
        per_layer[il] += expert ? expert_slice_bytes(t, m->n_expert) : t->nbytes;
        if (!expert && t->nbytes > p->largest_unit) /* a paged tensor is one unit */
            p->largest_unit = t->nbytes;
    }
    int k = m->n_expert_used > 0 ? m->n_expert_used : 1;
    for (int il = 0; il < n_layer; il++) {
        if (per_layer[il] * (uint64_t)k > p->min_budget)
            p->min_budget = per_layer[il] * (uint64_t)k;
        if (per_layer[il] > p->largest_unit) /* an expert's slices, an upper bound */
            p->largest_unit = per_layer[il];
    }
    free(per_layer);
}

/* Memory the plan takes on the host: the RAM tier, what the paged tier can
 * hold resident (its budget, or all of it when smaller) and the staging. */
static uint64_t host_bytes(const struct placement_plan *p)
{
    uint64_t disk = p->bytes[PL_TIER_DISK];
    if (!disk)
        return p->bytes[PL_TIER_RAM];
    return p->bytes[PL_TIER_RAM] + (p->ram_budget < disk ? p->ram_budget : disk) + p->staging;
}

/* What is over: a memory cgroup's room (the kernel kills past it) or
 * MemAvailable; and that room in words, e.g. "the 110.57 MiB left under this
 * memory cgroup's limit of 112.00 MiB" or "the 22.18 GiB available". */
static enum placement_misfit over_kind(const struct placement_plan *p, char *room, size_t len)
{
    char a[32], b[32];
    fl_format_size(p->ram_available, a, sizeof(a));
    if (!p->ram_cgroup_limit) {
        snprintf(room, len, "the %s available", a);
        return PL_OVER_RAM;
    }
    snprintf(room, len, "the %s left under this memory cgroup's limit of %s", a,
             fl_format_size(p->ram_cgroup_limit, b, sizeof(b)));
    return PL_OVER_CGROUP;
}

static void over_ram(struct placement_plan *p)
{
    char a[32], b[32], c[32], f[32], room[128];
    const bool paged = p->bytes[PL_TIER_DISK] != 0;
    const uint64_t resident = host_bytes(p) - p->bytes[PL_TIER_RAM] - p->staging;
    int n = snprintf(p->why, sizeof(p->why), "RAM tier %s",
                     fl_format_size(p->bytes[PL_TIER_RAM], a, sizeof(a)));
    if (paged && resident < p->ram_budget) /* the budget holds every paged expert */
        n += snprintf(p->why + n, sizeof(p->why) - (size_t)n,
                      " plus all %s of paged experts (budget %s) and staging %s",
                      fl_format_size(resident, b, sizeof(b)),
                      fl_format_size(p->ram_budget, f, sizeof(f)),
                      fl_format_size(p->staging, c, sizeof(c)));
    else if (paged)
        n += snprintf(p->why + n, sizeof(p->why) - (size_t)n, " plus budget %s and staging %s",
                      fl_format_size(resident, b, sizeof(b)),
                      fl_format_size(p->staging, c, sizeof(c)));
    /* What to change: the budget when experts are paged, else page them. */
    const char *verb = paged ? "exceed" : "exceeds";
    const char *fix = paged ? "give a smaller --ram-budget (or none: auto fits what is left)"
                            : "page the experts from disk instead (--disk-moe)";
    p->misfit = over_kind(p, room, sizeof(room));
    snprintf(p->why + n, sizeof(p->why) - (size_t)n, " %s %s; %s", verb, room, fix);
}

static void check_fit(struct placement_plan *p)
{
    char a[32], b[32];
    p->why[0] = '\0';
    p->misfit = PL_FITS;
    if (p->bytes[PL_TIER_DISK] && p->min_budget > p->ram_budget) {
        snprintf(p->why, sizeof(p->why),
                 "RAM budget %s (%llu bytes) is below the %s (%llu bytes) one layer's selected "
                 "experts need", fl_format_size(p->ram_budget, a, sizeof(a)),
                 (unsigned long long)p->ram_budget, fl_format_size(p->min_budget, b, sizeof(b)),
                 (unsigned long long)p->min_budget);
        p->misfit = PL_BUDGET_BELOW_MIN;
    } else if (p->ram_available && host_bytes(p) > p->ram_available) {
        over_ram(p);
    } else if (p->have_gpu && p->vram_available && p->bytes[PL_TIER_GPU] > p->vram_available) {
        snprintf(p->why, sizeof(p->why), "GPU tier %s exceeds the %s of VRAM",
                 fl_format_size(p->bytes[PL_TIER_GPU], a, sizeof(a)),
                 fl_format_size(p->vram_available, b, sizeof(b)));
        p->misfit = PL_OVER_VRAM;
    }
}

static void resolve(struct placement_plan *p, const struct gguf_file *f,
                    const struct placement_options *o, const struct pl_model *m)
{
    int64_t fell_back = 0;
    for (int64_t i = 0; i < p->n_tensors; i++) {
        if (p->tier[i] == PL_TIER_GPU && !p->have_gpu) {
            size_t len = strlen(p->reason[i]);
            snprintf(p->reason[i] + len, sizeof(p->reason[i]) - len, " (no GPU: ram)");
            p->tier[i] = PL_TIER_RAM;
            fell_back++;
        }
        p->bytes[p->tier[i]] += gguf_tensor(f, i)->nbytes;
    }
    if (fell_back)
        snprintf(p->warning, sizeof(p->warning),
                 "no GPU: %" PRId64 " tensor(s) placed on the gpu tier fall back to ram", fell_back);
    compute_min_budget(p, f, m);
    p->staging = p->bytes[PL_TIER_DISK] ? pager_staging_bytes(p->largest_unit) : 0;
    p->auto_budget = !o->ram_budget;
    if (o->ram_budget) {
        p->ram_budget = o->ram_budget;
    } else { /* auto: 80 % of what is available, less the RAM tier and the staging */
        uint64_t usable = p->ram_available / 10 * 8, taken = p->bytes[PL_TIER_RAM] + p->staging;
        p->ram_budget = usable > taken ? usable - taken : 0;
    }
    check_fit(p);
}

int placement_plan_build(const struct gguf_file *f, const struct placement_options *o,
                         const struct placement_host *host, struct placement_plan **out,
                         struct fl_err *err)
{
    struct pl_rules rules = { 0 };
    struct pl_model m;
    read_model(f, &m);
    int rc = rules_build(&rules, o, err);
    struct placement_plan *p = calloc(1, sizeof(*p));
    int64_t n = gguf_n_tensors(f);
    if (!rc && p) {
        p->n_tensors = n;
        p->tier = calloc((size_t)(n ? n : 1), sizeof(*p->tier));
        p->reason = calloc((size_t)(n ? n : 1), sizeof(*p->reason));
    }
    if (!rc && (!p || !p->tier || !p->reason))
        rc = fl_err_set(err, -ENOMEM, "out of memory building the placement plan");
    if (rc) {
        rules_free(&rules);
        placement_plan_free(p);
        return rc;
    }
    p->have_gpu = host->have_gpu;
    p->ram_available = host->ram_available;
    p->ram_cgroup_limit = host->ram_cgroup_limit;
    p->vram_available = o->vram_budget ? o->vram_budget : host->vram_available;
    p->file_size = gguf_parts_bytes(f); /* all the files of a split model */
    uint64_t fit_budget = o->ram_budget ? o->ram_budget : host->ram_available / 10 * 8;
    bool file_fits = p->file_size <= fit_budget;
    for (int64_t i = 0; i < n; i++) {
        const char *name = gguf_tensor(f, i)->name;
        int r = 0;
        while (r < rules.n && !rule_matches(&rules.v[r], name))
            r++;
        if (nextn_block(name, &m)) {
            p->tier[i] = PL_TIER_DISK;
            snprintf(p->reason[i], sizeof(p->reason[i]), "nextn block: not run, never read");
        } else if (r < rules.n) {
            p->tier[i] = rules.v[r].tier;
            memcpy(p->reason[i], rules.v[r].reason, sizeof(p->reason[i]));
        } else {
            decide_default(p, i, name, o, &m, file_fits);
        }
    }
    rules_free(&rules);
    resolve(p, f, o, &m);
    *out = p;
    return 0;
}

void placement_plan_free(struct placement_plan *p)
{
    if (!p)
        return;
    free(p->tier);
    free(p->reason);
    free(p);
}

enum pl_tier placement_tier(const struct placement_plan *p, int64_t i)
{
    return p->tier[i];
}

const char *placement_reason(const struct placement_plan *p, int64_t i)
{
    return p->reason[i];
}

uint64_t placement_tier_bytes(const struct placement_plan *p, enum pl_tier t)
{
    return p->bytes[t];
}

uint64_t placement_ram_budget(const struct placement_plan *p)
{
    return p->ram_budget;
}

uint64_t placement_min_budget(const struct placement_plan *p)
{
    return p->min_budget;
}

const char *placement_warning(const struct placement_plan *p)
{
    return p->warning[0] ? p->warning : NULL;
}

bool placement_fits(const struct placement_plan *p, const char **why)
{
    if (why)
        *why = p->why[0] ? p->why : NULL;
    return p->why[0] == '\0';
}

enum placement_misfit placement_misfit(const struct placement_plan *p, const char **why)
{
    placement_fits(p, why);
    return p->misfit;
}

enum placement_misfit placement_misfit_with(const struct placement_plan *p, uint64_t extra,
                                            const char *what, char *why, size_t why_len)
{
    const uint64_t plan = host_bytes(p);
    if (!p->ram_available || plan + extra <= p->ram_available)
        return PL_FITS;
    char a[32], b[32], room[128];
    const enum placement_misfit kind = over_kind(p, room, sizeof(room));
    const bool paged = p->bytes[PL_TIER_DISK] != 0;
    snprintf(why, why_len, "%s need %s beside the %s of %s, more than %s; a smaller -c, -b%s fits",
             what, fl_format_size(extra, a, sizeof(a)),
             paged ? "RAM tier, expert budget and staging" : "weights",
             fl_format_size(plan, b, sizeof(b)), room, paged ? " or --ram-budget" : "");
    return kind;
}

bool placement_fit_auto_budget(struct placement_plan *p, uint64_t extra)
{
    if (!p->auto_budget || !p->bytes[PL_TIER_DISK] || !p->ram_available)
        return false;
    const uint64_t fixed = p->bytes[PL_TIER_RAM] + p->staging + extra + p->ram_available / 20;
    if (fixed >= p->ram_available || p->ram_available - fixed < p->min_budget)
        return false;
    if (p->ram_available - fixed < p->ram_budget)
        p->ram_budget = p->ram_available - fixed;
    check_fit(p);
    return true;
}

uint64_t placement_ram_room(const struct placement_plan *p)
{
    if (!p->ram_available)
        return UINT64_MAX;
    const uint64_t plan = host_bytes(p);
    return plan < p->ram_available ? p->ram_available - plan : 0;
}

void placement_print(const struct placement_plan *p, const struct gguf_file *f, FILE *out,
                     bool verbose)
{
    char a[32], b[32];
    int64_t count[PL_TIER_COUNT] = { 0 };
    for (int64_t i = 0; i < p->n_tensors; i++)
        count[p->tier[i]]++;
    if (verbose) {
        fprintf(out, "%-40s %-5s %12s  %s\n", "tensor", "tier", "bytes", "placed by");
        for (int64_t i = 0; i < p->n_tensors; i++) {
            const struct gguf_tensor *t = gguf_tensor(f, i);
            fprintf(out, "%-40s %-5s %12" PRIu64 "  %s\n", t->name, tier_names[p->tier[i]],
                    t->nbytes, p->reason[i]);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "placement plan for %s (%s)\n", gguf_name(f),
            fl_format_size(p->file_size, a, sizeof(a)));
    for (int t = 0; t < PL_TIER_COUNT; t++)
        fprintf(out, "  %-4s  %5" PRId64 " tensors  %12s\n", tier_names[t], count[t],
                fl_format_size(p->bytes[t], a, sizeof(a)));
    if (p->bytes[PL_TIER_DISK])
        fprintf(out, "  paged experts: RAM budget %s, at least %s needed at once\n",
                fl_format_size(p->ram_budget, a, sizeof(a)),
                fl_format_size(p->min_budget, b, sizeof(b)));
    if (p->ram_available)
        fprintf(out, "  memory available: %s%s%s%s\n",
                fl_format_size(p->ram_available, a, sizeof(a)),
                p->ram_cgroup_limit ? " (under a memory cgroup's limit of " : "",
                p->ram_cgroup_limit ? fl_format_size(p->ram_cgroup_limit, b, sizeof(b)) : "",
                p->ram_cgroup_limit ? ")" : "");
    if (p->warning[0])
        fprintf(out, "  warning: %s\n", p->warning);
    fprintf(out, "  fits: %s%s%s\n", p->why[0] ? "no" : "yes", p->why[0] ? " — " : "", p->why);
}

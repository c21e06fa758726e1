/* faultline gen: writes a synthetic MoE model (see gen/model-gen.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/cli/commands.h"
#include "app/cli/progress.h"
#include "base/out-file.h"
#include "gen/model-gen.h"
#include "gguf/gguf.h"
#include "gguf/tensor-types.h"
#include "base/units.h"

static void usage(FILE *out)
{
    fprintf(out,
        "usage: faultline gen --arch ARCH [--size SIZE] [--type TYPE] [--seed N] -o FILE [shape]\n"
        "\n"
        "Writes a synthetic MoE model with random weights that llama.cpp and faultline load.\n"
        "  --arch ARCH        qwen3moe, llama (Mixtral layout), deepseek2, gpt-oss, glm4moe,\n"
        "                     minimax-m2, qwen35moe, qwen3next, deepseek32 (DeepSeek V3.2),\n"
        "                     glm-dsa (GLM-5), kimi-linear (Kimi-Linear), kimi-k3 (Kimi K3),\n"
        "                     minimax-m3 (MiniMax-M3)\n"
        "  --size SIZE        target file size, e.g. 256M, 20G: picks the width, the layer\n"
        "                     and expert counts left free (default 1G unless --layers)\n"
        "  --type TYPE        F16, Q8_0, Q4_K or MXFP4 for the big matrices (default Q8_0)\n"
        "  --seed N           seed (default 1); same seed and options, same bytes\n"
        "  -o, --output FILE  where to write (whole or not at all: a temporary file beside\n"
        "                     it until done); an existing GGUF file is kept unless --force\n"
        "  --force            replace an existing GGUF file\n"
        "shape (default: chosen from --size):\n"
        "  --n-embd N --layers N --experts N --top-k N --expert-ff N --ff N\n"
        "  --heads N --heads-kv N --head-dim N\n"
        "  --rope-dims N                         (glm4moe, minimax-m2, qwen35moe: partial RoPE)\n"
        "  --shared-experts N --dense-layers N   (deepseek2, glm4moe; qwen35moe: shared only)\n"
        "  --indexer-heads N --indexer-dim N --indexer-top-k N\n"
        "                     (deepseek32, glm-dsa: the sparse attention's lightning indexer;\n"
        "                     default top-k 2048 as DeepSeek V3.2; glm-dsa's blocks alternate\n"
        "                     a full indexer and one that reuses its choice; minimax-m3:\n"
        "                     one head per KV head, top-k in blocks, default 16)\n"
        "  --indexer-block N --indexer-local N\n"
        "                     (minimax-m3: positions per block, default 64; the newest\n"
        "                     blocks always read, default 1)\n"
        "  --ssm-state N --ssm-groups N --ssm-heads N\n"
        "                     (qwen35moe, qwen3next: Gated DeltaNet head dims, key heads,\n"
        "                     value heads; kimi-linear: --ssm-state is the KDA head dim,\n"
        "                     its heads are --heads)\n"
        "  --expert-latent N --res-block N\n"
        "                     (kimi-k3: the routed experts' width, default n_embd / 2; every\n"
        "                     N-th block banks its input for the residual attention, default 4)\n"
        "  --ssm-in           (qwen3next) one ssm_in matrix for q, k, v and z, as files\n"
        "                     converted before attn_qkv/attn_gate\n"
        "other:\n"
        "  --vocab FILE       the tokenizer (every tokenizer.* key: vocabulary, merges,\n"
        "                     special tokens, chat template) of another GGUF file, e.g. a\n"
        "                     real model's or llama.cpp's vocab files (default: gen's\n"
        "                     1,025-token byte-level BPE)\n"
        "  --skew X           router power-law exponent (default 0.3, 0 = uniform)\n"
        "  --threads N        synthesis threads (default 2)\n"
        "  --dry-run          print the chosen shape and size, write nothing\n"
        "  -q, --quiet        no shape, progress or statistics\n");
}

enum { O_ARCH = 256, O_SIZE, O_TYPE, O_SEED, O_EMBD, O_LAYERS, O_EXPERTS, O_TOPK, O_EFF,
       O_FF, O_HEADS, O_HKV, O_HDIM, O_ROT, O_SHARED, O_DENSE, O_SKEW, O_THREADS, O_DRY, O_FORCE,
       O_SSM_STATE, O_SSM_GROUPS, O_SSM_HEADS, O_SSM_IN, O_VOCAB, O_IDX_HEADS, O_IDX_DIM,
       O_IDX_TOPK, O_LATENT, O_RES_BLOCK, O_IDX_BLOCK, O_IDX_LOCAL };

static const struct option long_opts[] = {
    { "arch", required_argument, 0, O_ARCH }, { "size", required_argument, 0, O_SIZE },
    { "type", required_argument, 0, O_TYPE }, { "seed", required_argument, 0, O_SEED },
    { "output", required_argument, 0, 'o' }, { "n-embd", required_argument, 0, O_EMBD },
    { "layers", required_argument, 0, O_LAYERS }, { "experts", required_argument, 0, O_EXPERTS },
    { "top-k", required_argument, 0, O_TOPK }, { "expert-ff", required_argument, 0, O_EFF },
    { "ff", required_argument, 0, O_FF }, { "heads", required_argument, 0, O_HEADS },
    { "heads-kv", required_argument, 0, O_HKV }, { "head-dim", required_argument, 0, O_HDIM },
    { "rope-dims", required_argument, 0, O_ROT }, { "shared-experts", required_argument, 0, O_SHARED },
    { "dense-layers", required_argument, 0, O_DENSE }, { "skew", required_argument, 0, O_SKEW },
    { "threads", required_argument, 0, O_THREADS }, { "dry-run", no_argument, 0, O_DRY },
    { "force", no_argument, 0, O_FORCE }, { "ssm-state", required_argument, 0, O_SSM_STATE },
    { "ssm-groups", required_argument, 0, O_SSM_GROUPS },
    { "ssm-heads", required_argument, 0, O_SSM_HEADS }, { "ssm-in", no_argument, 0, O_SSM_IN },
    { "vocab", required_argument, 0, O_VOCAB },
    { "indexer-heads", required_argument, 0, O_IDX_HEADS },
    { "indexer-dim", required_argument, 0, O_IDX_DIM },
    { "indexer-top-k", required_argument, 0, O_IDX_TOPK },
    { "expert-latent", required_argument, 0, O_LATENT },
    { "res-block", required_argument, 0, O_RES_BLOCK },
    { "indexer-block", required_argument, 0, O_IDX_BLOCK },
    { "indexer-local", required_argument, 0, O_IDX_LOCAL },
    { "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
};

/* One line on stderr; the exit status for a usage error. */
static __attribute__((format(printf, 1, 2))) int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "faultline gen: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* A positive integer option value (up to 2^40). */
static int parse_count(const char *opt, const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 1 || v > (1ll << 40))
        return bad("--%s: '%s' is not a positive integer", opt, text);
    *out = v;
    return 0;
}

struct opts {
    struct gen_params p;
    const char *out, *vocab;
    bool quiet, dry, force;
};

static int64_t *count_field(struct gen_params *p, int o)
{
    switch (o) {
    case O_EMBD: return &p->n_embd;
    case O_LAYERS: return &p->n_layer;
    case O_EXPERTS: return &p->n_expert;
    case O_TOPK: return &p->n_expert_used;
    case O_EFF: return &p->n_ff_exp;
    case O_FF: return &p->n_ff;
    case O_HEADS: return &p->n_head;
    case O_HKV: return &p->n_head_kv;
    case O_HDIM: return &p->head_dim;
    case O_ROT: return &p->n_rot;
    case O_SHARED: return &p->n_expert_shared;
    case O_DENSE: return &p->n_layer_dense;
    case O_SSM_STATE: return &p->ssm_d_state;
    case O_SSM_GROUPS: return &p->ssm_n_k_head;
    case O_SSM_HEADS: return &p->ssm_n_v_head;
    case O_IDX_HEADS: return &p->idx_n_head;
    case O_IDX_DIM: return &p->idx_head_dim;
    case O_IDX_TOPK: return &p->idx_top_k;
    case O_LATENT: return &p->expert_latent;
    case O_RES_BLOCK: return &p->res_block;
    case O_IDX_BLOCK: return &p->msa_block;
    case O_IDX_LOCAL: return &p->msa_local;
    default: return NULL;
    }
}

static int parse_one(struct opts *o, int c, const char *arg, const char *name)
{
    int64_t v = 0;
    char *end;
    switch (c) {
    case O_ARCH:
        if (gen_arch_by_name(arg) < 0)
            return bad("unknown --arch '%s' (%s)", arg, gen_arch_names());
        o->p.arch = (enum gen_arch)gen_arch_by_name(arg);
        return 0;
    case O_SIZE:
        if (fl_parse_size(arg, &o->p.target_size) || o->p.target_size < (1u << 20))
            return bad("--size: '%s' is not a size of at least 1M (e.g. 256M, 20G)", arg);
        return 0;
    case O_TYPE:
        if (fl_type_by_name(arg) < 0)
            return bad("unknown --type '%s' (F16, Q8_0, Q4_K, MXFP4)", arg);
        o->p.type = (uint32_t)fl_type_by_name(arg);
        return 0;
    case O_SEED:
        errno = 0;
        o->p.seed = strtoull(arg, &end, 0);
        if (errno || end == arg || *end || *arg == '-')
            return bad("--seed: '%s' is not a non-negative integer", arg);
        return 0;
    case O_SKEW:
        o->p.skew = strtod(arg, &end);
        if (end == arg || *end || !(o->p.skew >= 0 && o->p.skew <= 10))
            return bad("--skew: '%s' is not a number in [0, 10]", arg);
        return 0;
    case O_THREADS:
        if (parse_count(name, arg, &v))
            return 2;
        o->p.n_threads = v > 64 ? 64 : (int)v;
        return 0;
    default:
        if (parse_count(name, arg, &v))
            return 2;
        *count_field(&o->p, c) = v;
        return 0;
    }
}

static int parse(int argc, char **argv, struct opts *o)
{
    int c, idx;
    bool have_arch = false;
    o->p.type = FL_TYPE_Q8_0;
    o->p.seed = 1;
    o->p.skew = -1;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:qh", long_opts, &idx)) != -1) {
        const char *name = c >= O_ARCH ? long_opts[idx].name : "";
        if (c == 'h') {
            usage(stdout);
            return -1;
        } else if (c == '?') {
            return bad("unknown option '%s' (see --help)", argv[optind - 1]);
        } else if (c == ':') {
            return bad("option '%s' needs a value", argv[optind - 1]);
        } else if (c == 'o') {
            o->out = optarg;
        } else if (c == 'q') {
            o->quiet = true;
        } else if (c == O_DRY) {
            o->dry = true;
        } else if (c == O_FORCE) {
            o->force = true;
        } else if (c == O_SSM_IN) {
            o->p.ssm_in = true;
        } else if (c == O_VOCAB) {
            o->vocab = optarg;
        } else {
            have_arch |= c == O_ARCH;
            int rc = parse_one(o, c, optarg, name);
            if (rc)
                return rc;
        }
    }
    if (optind < argc)
        return bad("unexpected argument '%s'", argv[optind]);
    if (!have_arch)
        return bad("--arch is required (%s)", gen_arch_names());
    if (!o->out && !o->dry)
        return bad("-o FILE is required");
    return 0;
}

static void print_shape(const struct gen_params *p, uint64_t size)
{
    char sz[32];
    printf("%s %s: n_embd %lld, %lld layers, %lld experts (top %lld", gen_arch_name(p->arch),
           fl_type_name(p->type), (long long)p->n_embd, (long long)p->n_layer,
           (long long)p->n_expert, (long long)p->n_expert_used);
    if (gen_arch_has_dense(p->arch))
        printf(", %lld shared, %lld dense layers", (long long)p->n_expert_shared,
               (long long)p->n_layer_dense);
    if (gen_arch_is_mla(p->arch) && !gen_arch_is_kimi(p->arch))
        printf(", q/kv lora %lld/%lld", (long long)p->q_lora_rank, (long long)p->kv_lora_rank);
    if (gen_arch_is_kimi(p->arch))
        printf(", kv lora %lld, KDA heads of %lld", (long long)p->kv_lora_rank,
               (long long)p->ssm_d_state);
    if (p->arch == GEN_ARCH_KIMI_K3)
        printf(", experts at %lld wide, residual attention every %lld blocks",
               (long long)p->expert_latent, (long long)p->res_block);
    if (gen_arch_has_indexer(p->arch))
        printf(", indexer %lld x %lld top %lld", (long long)p->idx_n_head,
               (long long)p->idx_head_dim, (long long)p->idx_top_k);
    printf("), expert n_ff %lld, %lld heads", (long long)p->n_ff_exp, (long long)p->n_head);
    if (!gen_arch_is_mla(p->arch))
        printf(" (%lld kv) x %lld", (long long)p->n_head_kv, (long long)p->head_dim);
    if (p->n_rot)
        printf(", RoPE on %lld dims", (long long)p->n_rot);
    if (p->arch == GEN_ARCH_QWEN35MOE || p->arch == GEN_ARCH_QWEN3NEXT)
        printf(", %lld shared, DeltaNet %lld key / %lld value heads x %lld",
               (long long)p->n_expert_shared, (long long)p->ssm_n_k_head,
               (long long)p->ssm_n_v_head, (long long)p->ssm_d_state);
    printf(", %s (%llu bytes)\n", fl_format_size(size, sz, sizeof(sz)), (unsigned long long)size);
    fflush(stdout);
}

/* gen_write's progress, as the other long steps show theirs. */
struct bar {
    struct fl_progress p;
    struct timespec t0;
    bool ended; /* gen_write may report done == total more than once */
};

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void progress(void *ctx, uint64_t done, uint64_t total)
{
    struct bar *b = ctx;
    if (b->ended)
        return;
    b->ended = done == total;
    fl_progress_report(&b->p, "writing the model", "B", done, total, b->ended);
}

static void print_skew(const struct gen_params *p)
{
    double lo = 1, hi = 0, sum = 0;
    int64_t n = 0;
    int64_t first = gen_arch_has_dense(p->arch) ? p->n_layer_dense : 0;
    if (p->n_expert <= 8)
        return;
    for (int64_t il = first; il < p->n_layer; il++, n++) {
        double s = gen_router_top8_share(p, il, 512);
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
        sum += s;
    }
    printf("router skew (planted, simulated): top-8 of %lld experts take %.0f%% of selections "
           "(layers %.0f%%..%.0f%%; uniform %.0f%%)\n", (long long)p->n_expert,
           100 * sum / (double)n, 100 * lo, 100 * hi, 800.0 / (double)p->n_expert);
}

/* Resolves, writes and reports the model o asks for; the exit status. */
static int generate(struct opts *o)
{
    struct fl_err err = {{0}};
    if (gen_resolve(&o->p, &err)) {
        fprintf(stderr, "faultline gen: %s\n", err.msg);
        return 1;
    }
    uint64_t size = gen_file_size(&o->p);
    if (!o->quiet)
        print_shape(&o->p, size);
    if (o->dry)
        return 0;
    struct bar b = { .p = cli_progress_stderr(o->quiet) };
    clock_gettime(CLOCK_MONOTONIC, &b.t0);
    struct fl_out out;
    if (fl_out_begin(&out, o->out, NULL, 0, o->force, &err)) {
        fprintf(stderr, "faultline gen: %s\n", err.msg);
        return 1;
    }
    if (gen_write(&o->p, out.tmp, progress, &b, &err) || fl_out_commit(&out, &err)) {
        fl_out_abort(&out);
        fprintf(stderr, "faultline gen: %s\n", err.msg);
        return 1;
    }
    if (!o->quiet) {
        double s = since(&b.t0);
        printf("wrote %s in %.1f s (%.0f MiB/s)\n", o->out, s,
               (double)size / 1048576.0 / (s > 0 ? s : 1));
        print_skew(&o->p);
    }
    return 0;
}

int cli_gen(int argc, char **argv)
{
    struct opts o = {0};
    struct fl_err err = {{0}};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct gguf_file *vocab = NULL;
    if (o.vocab && gguf_open(o.vocab, &vocab, &err)) {
        fprintf(stderr, "faultline gen: --vocab %s\n", err.msg);
        return 1;
    }
    o.p.vocab = vocab;
    rc = generate(&o);
    gguf_close(vocab);
    return rc;
}

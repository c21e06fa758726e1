/* fuzz-args: libFuzzer target for what users type on the command line and
 * what a GGUF file says about its chat template.
 *
 * The input after the first byte is split at NULs (or newlines) into
 * strings; the first byte chooses what they go to:
 *   0: fl_parse_size on each string (and fl_format_size on what it accepts),
 *      and the sampler order parsers (--samplers, --sampling-seq) on it;
 *   1: placement flags: the strings are an argv ("-ot", "exps=disk", ...)
 *      parsed with placement_parse_flag, then a plan is built for
 *      tests/data/qwen3moe-tiny-F16.gguf and queried for every tensor;
 *   2: the chat template: the first string is general.architecture, the
 *      second tokenizer.chat_template, the rest messages (role, content)
 *      rendered in the detected format and in the format named by the
 *      first string.
 * A broken contract aborts, which libFuzzer reports as a crash. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"
#include "text/sampler.h"
#include "gguf/gguf.h"
#include "base/units.h"
#include "gguf/tensor-names.h"
#include "plan/placement.h"

#ifndef FL_SOURCE_DIR
#define FL_SOURCE_DIR "."
#endif

#define MAX_STRS 64

static uint64_t sink;

static void die(const char *what)
{
    fprintf(stderr, "fuzz-args: %s\n", what);
    abort();
}

static void one_line(const struct fl_err *err)
{
    if (!err->msg[0] || strchr(err->msg, '\n'))
        die("error without a one-line message");
}

/* Splits buf (NUL-terminated by the caller) in place. */
static int split(char *buf, size_t len, char **out)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len && n < MAX_STRS; i++) {
        if (i == len || buf[i] == 0 || buf[i] == '\n') {
            buf[i] = 0;
            out[n++] = buf + start;
            start = i + 1;
        }
    }
    return n;
}

/* An order either parses into one a sampler accepts or is refused in one
 * line, leaving the parameters as they were. */
static void fuzz_order(const char *s, bool seq)
{
    struct fl_sampler_params p;
    struct fl_err err = { "" };
    fl_sampler_defaults(&p, 1);
    const struct fl_sampler_params before = p;
    int rc = seq ? fl_sampler_parse_seq(s, &p, &err) : fl_sampler_parse_order(s, &p, &err);
    if (rc < 0) {
        one_line(&err);
        if (p.n_order != before.n_order || memcmp(p.order, before.order, sizeof(p.order)))
            die("a refused sampler order changed the parameters");
        return;
    }
    struct fl_sampler *smp = NULL;
    if (rc != 0 || p.n_order < 1 || fl_sampler_new(&p, 4, NULL, &smp) != 0)
        die("a parsed sampler order that fl_sampler_new refuses");
    static const float logits[4] = { 0.5f, -1.0f, 2.0f, 0.0f };
    int32_t id = fl_sampler_sample(smp, logits);
    if (id < 0 || id > 3)
        die("a parsed sampler order drew no token");
    fl_sampler_free(smp);
}

static void fuzz_sizes(char **s, int n)
{
    char buf[48];
    for (int i = 0; i < n; i++) {
        uint64_t v = 0, w = 0;
        fuzz_order(s[i], false);
        fuzz_order(s[i], true);
        if (fl_parse_size(s[i], &v) != 0)
            continue;
        if (fl_parse_size(s[i], &w) != 0 || v != w)
            die("fl_parse_size is not deterministic");
        /* Plain integers short enough to be exact in a double must come back exactly. */
        size_t len = strlen(s[i]);
        if (len <= 15 && strspn(s[i], "0123456789") == len && v != strtoull(s[i], NULL, 10))
            die("fl_parse_size got a plain integer wrong");
        for (size_t cap = 1; cap <= sizeof(buf); cap += 7)
            sink += strlen(fl_format_size(v, buf, cap));
    }
}

static const struct gguf_file *model(void)
{
    static struct gguf_file *f;
    if (f)
        return f;
    char path[4096];
    struct fl_err err;
    const char *src = getenv("FL_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/tests/data/qwen3moe-tiny-F16.gguf", src ? src : FL_SOURCE_DIR);
    if (gguf_open(path, &f, &err)) {
        fprintf(stderr, "fuzz-args: %s\n", err.msg);
        abort();
    }
    return f;
}

static void query_plan(const struct placement_plan *p, const struct gguf_file *f)
{
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w")))
        die("cannot open /dev/null");
    uint64_t total = 0;
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        enum pl_tier t = placement_tier(p, i);
        if ((unsigned)t >= PL_TIER_COUNT || !placement_reason(p, i))
            die("a tensor without a tier or a reason");
        total += gguf_tensor(f, i)->nbytes;
    }
    uint64_t sum = 0;
    for (int t = 0; t < PL_TIER_COUNT; t++)
        sum += placement_tier_bytes(p, (enum pl_tier)t);
    if (sum != total)
        die("the tiers' bytes do not add up to the tensors' bytes");
    const char *why = NULL;
    if (!placement_fits(p, &why) && !why)
        die("a plan that does not fit says no why");
    sink += placement_ram_budget(p) + placement_min_budget(p) + (uintptr_t)placement_warning(p);
    placement_print(p, f, null, true);
}

static void fuzz_placement(char **s, int n, uint8_t sel)
{
    struct placement_options o;
    struct fl_err err;
    placement_options_init(&o);
    for (int i = 0; i < n; i++) {
        int rc = placement_parse_flag(&o, n, s, &i, &err);
        if (rc < 0) {
            one_line(&err);
            return;
        }
    }
    struct placement_host host = {
        .have_gpu = sel & 8,
        .ram_available = (sel & 16) ? ((uint64_t)1 << 20) : ((uint64_t)64 << 30),
        .vram_available = (sel & 32) ? ((uint64_t)1 << 20) : ((uint64_t)80 << 30),
    };
    struct placement_plan *p = NULL;
    const struct gguf_file *f = model();
    if (placement_plan_build(f, &o, &host, &p, &err)) {
        if (p)
            die("a failed plan was returned");
        one_line(&err);
        return;
    }
    query_plan(p, f);
    placement_plan_free(p);
    for (int i = 0; i < n; i++) {
        enum pl_tier t;
        bool bias = false;
        const int part = fl_tensor_expert_part(s[i], &bias);
        const int il = fl_tensor_block(s[i]);
        if (il < -1 || il > FL_TENSOR_MAX_BLOCK || part < -1 || part > FL_EXPERT_GATE_UP ||
            (part >= 0 && (il < 0 || !fl_tensor_is_expert(s[i]))))
            die("tensor-names disagree with themselves");
        sink += (uint32_t)il + (uint32_t)fl_tensor_role(s[i]);
        if (placement_tier_parse(s[i], &t) == 0 && (unsigned)t >= PL_TIER_COUNT)
            die("placement_tier_parse gave a bad tier");
    }
}

static void render(enum fl_chat_format fmt, char **s, int n, bool add_assistant)
{
    struct fl_chat_msg msgs[MAX_STRS / 2];
    size_t nm = 0;
    for (int i = 0; i + 1 < n; i += 2)
        msgs[nm++] = (struct fl_chat_msg){ .role = s[i], .content = s[i + 1] };
    char *out = NULL;
    int len = fl_chat_apply(fmt, msgs, nm, add_assistant, &out);
    if (len >= 0 && (!out || strlen(out) != (size_t)len))
        die("fl_chat_apply's length is not the string's");
    if (len < 0 && len != -EINVAL && len != -ENOMEM)
        die("fl_chat_apply: unexpected error");
    if (fmt == FL_CHAT_UNKNOWN && len != -EINVAL)
        die("fl_chat_apply rendered the unknown format");
    free(out);
}

static void fuzz_chat(char **s, int n, uint8_t sel)
{
    const char *arch = n > 0 ? s[0] : NULL, *tmpl = n > 1 ? s[1] : NULL;
    enum fl_chat_format fmt = fl_chat_detect((sel & 8) ? NULL : arch, (sel & 16) ? NULL : tmpl);
    if (fl_chat_format_from_name(fl_chat_format_name(fmt)) != fmt)
        die("a format's name does not name it");
    render(fmt, s + 2 * (n > 1), n - 2 * (n > 1), sel & 32);
    if (arch)
        render(fl_chat_format_from_name(arch), s + 2 * (n > 1), n - 2 * (n > 1), sel & 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char *s[MAX_STRS];
    int n = split(buf, size - 1, s);
    switch (sel % 3) {
    case 0: fuzz_sizes(s, n); break;
    case 1: fuzz_placement(s, n, sel); break;
    default: fuzz_chat(s, n, sel); break;
    }
    free(buf);
    return 0;
}

/* test-param-count: gguf_param_count and llama-bench's size label.
 *
 * 1. Every tests/data model: total, bytes, expert and active parameters
 *    equal a count made here from the tensor table on its own terms
 *    (elements as the product of the shape, an expert tensor as a name
 *    holding "_exps.", the expert counts read from the metadata here), the
 *    bytes fill the data section up to alignment padding, and the label is
 *    the one worked out by hand for each file.
 * 2. Labels for counts of real models: llama.cpp's names where the depth
 *    and the count agree (30B.A3B, 8x7B, 7B vs 8B at 32 layers), a name
 *    made from the counts where they do not (a generated model at a real
 *    model's depth), and the count format (1.5B, 109M, 1B for 999.7M). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/param-count.h"
#define CHECK_OUT stderr
#include "tests/check.h"

struct own_count {
    uint64_t total, bytes, experts, active;
};

static int64_t key_int(const struct gguf_file *f, const char *arch, const char *key)
{
    char full[128];
    int64_t v = 0;
    snprintf(full, sizeof(full), "%s.%s", arch, key);
    return gguf_get_int(f, full, &v) ? 0 : v;
}

/* The count made without param-count.c: shapes multiplied out, experts by name. */
static struct own_count own_count(const struct gguf_file *f)
{
    struct own_count c = { 0 };
    const char *arch = "";
    gguf_get_str(f, "general.architecture", &arch);
    for (int64_t i = 0; i < gguf_n_tensors(f); i++) {
        const struct gguf_tensor *t = gguf_tensor(f, i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n *= (uint64_t)t->ne[d];
        c.total += n;
        c.bytes += t->nbytes;
        if (strstr(t->name, "_exps."))
            c.experts += n;
    }
    const int64_t n_exp = key_int(f, arch, "expert_count");
    const int64_t used = key_int(f, arch, "expert_used_count");
    c.active = c.total - c.experts + (n_exp ? c.experts / (uint64_t)n_exp * (uint64_t)used : 0);
    return c;
}

static void check_file(const char *path, const char *want_label)
{
    struct gguf_file *f = NULL;
    struct fl_err err = { { 0 } };
    if (gguf_open(path, &f, &err)) {
        CHECK(0, "%s: %s", path, err.msg);
        return;
    }
    const struct own_count own = own_count(f);
    struct gguf_param_count c;
    gguf_param_count(f, &c);
    CHECK(c.n_params == own.total, "%s: %" PRIu64 " parameters, counted %" PRIu64, path,
          c.n_params, own.total);
    CHECK(c.n_bytes == own.bytes, "%s: %" PRIu64 " bytes, counted %" PRIu64, path, c.n_bytes,
          own.bytes);
    CHECK(c.n_expert_params == own.experts, "%s: %" PRIu64 " expert parameters, counted %" PRIu64,
          path, c.n_expert_params, own.experts);
    CHECK(c.n_active == own.active, "%s: %" PRIu64 " active, counted %" PRIu64, path, c.n_active,
          own.active);
    CHECK(own.experts > 0 && c.n_active < c.n_params, "%s: a MoE whose experts are not all active",
          path);
    /* the tensors' bytes are the data section less the padding between them */
    const uint64_t data = gguf_file_size(f) - gguf_data_offset(f);
    CHECK(c.n_bytes <= data && data - c.n_bytes < (uint64_t)gguf_n_tensors(f) * gguf_alignment(f),
          "%s: %" PRIu64 " tensor bytes in a data section of %" PRIu64, path, c.n_bytes, data);
    char label[64];
    gguf_size_label(&c, label, sizeof(label));
    CHECK(!strcmp(label, want_label), "%s: label '%s', want '%s' (%" PRIu64 " / %" PRIu64 ")",
          path, label, want_label, c.n_params, c.n_active);
    gguf_close(f);
}

static void check_label(const char *arch, int64_t n_layer, int64_t n_expert, double total,
                        double active, const char *want)
{
    const struct gguf_param_count c = {
        .arch = arch, .n_layer = n_layer, .n_expert = n_expert, .n_params = (uint64_t)total,
        .n_active = (uint64_t)active, .n_expert_params = n_expert ? (uint64_t)(total / 2) : 0,
    };
    char label[64];
    gguf_size_label(&c, label, sizeof(label));
    CHECK(!strcmp(label, want), "%s %" PRId64 " layers %.4g/%.4g: '%s', want '%s'", arch,
          n_layer, total, active, label, want);
}

static void check_count(uint64_t n, const char *want)
{
    char buf[32];
    gguf_count_label(n, buf, sizeof(buf));
    CHECK(!strcmp(buf, want), "%" PRIu64 ": '%s', want '%s'", n, buf, want);
}

int main(void)
{
    /* each count in its own unit, as llama.cpp's "2.8T.A50B": qwen3moe-tiny
     * has 1,152,000 parameters, 562,176 of them per token (4 of 16 experts) */
    check_file("tests/data/qwen3moe-tiny-F16.gguf", "1.2M.A562K");
    check_file("tests/data/qwen3moe-tiny-Q8_0.gguf", "1.2M.A562K");
    check_file("tests/data/mixtral-tiny-Q4_K_M.gguf", "4M.A1.6M");     /* 4,003,584 / 1,644,288 */
    check_file("tests/data/deepseek2-tiny-F16.gguf", "972K.A677K");    /* 972,304 / 677,392 */
    check_file("tests/data/gpt-oss-tiny-MXFP4.gguf", "1.2M.A562K");    /* 1,156,760 / 562,328 */

    check_label("qwen3moe", 48, 128, 30.53e9, 3.35e9, "30B.A3B");
    check_label("qwen3moe", 94, 128, 235.09e9, 22.14e9, "235B.A22B");
    check_label("qwen3moe", 48, 128, 2.4e9, 0.3e9, "2.4B.A300M"); /* gen's, 48 layers */
    check_label("llama", 32, 8, 46.70e9, 12.88e9, "8x7B");
    check_label("llama", 32, 0, 6.74e9, 6.74e9, "7B");
    check_label("llama", 32, 0, 8.03e9, 8.03e9, "8B");
    check_label("llama", 80, 0, 65.29e9, 65.29e9, "65B");
    check_label("llama", 80, 0, 70.55e9, 70.55e9, "70B");
    check_label("deepseek2", 27, 64, 15.71e9, 2.66e9, "16B");
    check_label("gpt-oss", 24, 32, 20.91e9, 3.61e9, "20B");
    check_label("qwen2", 28, 0, 1.54e9, 1.54e9, "1.5B");
    check_label("llama", 2, 8, 31.4e9, 8.1e9, "31B.A8.1B");

    check_count(1540000000, "1.5B");
    check_count(109000000, "109M");
    check_count(999700000, "1B");
    check_count(3000000000, "3B");
    check_count(2400, "2.4K");
    check_count(12, "12");
    check_count(0, "0");
    check_count(1200000000000, "1.2T");
    return check_summary("test-param-count");
}

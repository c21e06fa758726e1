/* test-tensor-names: what gguf/tensor-names.h reads out of names — block
 * indices, routed expert parts, expert tensors as llama.cpp's
 * LLM_FFN_EXPS_REGEX matches them (checked against that regex itself, run
 * by PCRE2 on every name here), and roles. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "gguf/tensor-names.h"
#include "tests/check.h"

static const char *const names[] = {
    "token_embd.weight", "output.weight", "output_norm.weight", "rope_freqs.weight",
    "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_q.bias", "blk.12.attn_k.weight",
    "blk.3.attn_q_norm.weight", "blk.3.post_attention_norm.weight", "blk.1.attn_kv_a_mqa.weight",
    "blk.1.attn_kv_a_norm.weight", "blk.1.attn_k_b.weight", "blk.7.ffn_gate_inp.weight",
    "blk.7.ffn_gate_inp.bias", "blk.7.exp_probs_b.bias", "blk.7.ffn_gate_exps.weight",
    "blk.7.ffn_up_exps.weight", "blk.7.ffn_down_exps.weight", "blk.7.ffn_gate_up_exps.weight",
    "blk.7.ffn_gate_exps.bias", "blk.7.ffn_down_chexps.weight", "blk.7.ffn_up_shexp.weight",
    "blk.7.ffn_gate_shexp.weight", "blk.65535.ffn_up_exps.weight", "blk.65536.ffn_up_exps.weight",
    "blk.x.ffn_up_exps.weight", "blk.3", "blk.3.", "blk.-1.attn_q.weight", "blk.07.attn_q.weight",
    "ffn_up_exps.weight", "x.ffn_up_exps.weight", "blk.2.ffn_up_exps", "blk.2.ffn_up_exps.scale",
    "blk.2.ffn_upx_exps.weight", "blk.2.ffn_up_exps2.weight", "", ".ffn_gate_exps",
};

static void test_regex_agreement(void)
{
    int code;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)FL_TENSOR_EXPERT_REGEX, PCRE2_ZERO_TERMINATED, 0,
                                   &code, &at, NULL);
    CHECK(re != NULL, "the expert regex does not compile");
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    for (size_t i = 0; re && md && i < sizeof(names) / sizeof(names[0]); i++) {
        const bool rx = pcre2_match(re, (PCRE2_SPTR)names[i], strlen(names[i]), 0, 0, md, NULL) >= 0;
        CHECK(rx == fl_tensor_is_expert(names[i]), "%s: regex says %d, fl_tensor_is_expert %d",
              names[i], rx, !rx);
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    printf("fl_tensor_is_expert = LLM_FFN_EXPS_REGEX on %zu names\n", sizeof(names) / sizeof(names[0]));
}

static void test_blocks_and_parts(void)
{
    CHECK(fl_tensor_block("blk.17.ffn_up_exps.weight") == 17, "blk.17");
    CHECK(fl_tensor_block("blk.65535.ffn_up_exps.weight") == 65535, "the highest block");
    CHECK(fl_tensor_block("blk.65536.ffn_up_exps.weight") == -1, "past the highest block");
    CHECK(fl_tensor_block("output.weight") == -1, "output has no block");
    CHECK(fl_tensor_block("blk.x.attn_q.weight") == -1 && fl_tensor_block("blk.3") == -1 &&
              fl_tensor_block("blk.-1.attn_q.weight") == -1, "malformed block names");
    bool bias = true;
    CHECK(fl_tensor_expert_part("blk.7.ffn_gate_exps.weight", &bias) == FL_EXPERT_GATE && !bias,
          "gate weight");
    CHECK(fl_tensor_expert_part("blk.7.ffn_gate_exps.bias", &bias) == FL_EXPERT_GATE && bias,
          "gate bias");
    CHECK(fl_tensor_expert_part("blk.7.ffn_gate_up_exps.weight", &bias) == FL_EXPERT_GATE_UP,
          "gate_up");
    CHECK(fl_tensor_expert_part("blk.7.ffn_down_exps.weight", &bias) == FL_EXPERT_DOWN, "down");
    /* chunked and shared experts are not routed stacks; a name must be whole */
    CHECK(fl_tensor_expert_part("blk.7.ffn_down_chexps.weight", &bias) == -1, "chexps");
    CHECK(fl_tensor_expert_part("blk.7.ffn_up_shexp.weight", &bias) == -1, "shexp");
    CHECK(fl_tensor_expert_part("blk.2.ffn_up_exps", &bias) == -1 &&
              fl_tensor_expert_part("blk.2.ffn_up_exps.scale", &bias) == -1 &&
              fl_tensor_expert_part("ffn_up_exps.weight", &bias) == -1, "partial names");
    CHECK(fl_tensor_is_expert("blk.7.ffn_down_chexps.weight") &&
              !fl_tensor_is_expert("blk.7.ffn_up_shexp.weight"), "chunked yes, shared no");
    printf("blocks and expert parts: checked\n");
}

static void test_roles(void)
{
    const struct { const char *name; enum fl_tensor_role role; } c[] = {
        { "token_embd.weight", FL_TENSOR_TOKEN_EMBD }, { "output.weight", FL_TENSOR_OUTPUT },
        { "output_norm.weight", FL_TENSOR_OUTPUT_NORM }, { "blk.0.attn_norm.weight", FL_TENSOR_NORM },
        { "blk.3.attn_q_norm.weight", FL_TENSOR_NORM },
        { "blk.3.post_attention_norm.weight", FL_TENSOR_NORM },
        { "blk.1.attn_kv_a_norm.weight", FL_TENSOR_NORM },
        { "blk.7.ffn_gate_inp.weight", FL_TENSOR_ROUTER }, { "blk.7.ffn_gate_inp.bias", FL_TENSOR_ROUTER },
        { "blk.7.exp_probs_b.bias", FL_TENSOR_SEL_BIAS }, { "blk.7.ffn_up_exps.weight", FL_TENSOR_EXPERTS },
        { "blk.7.ffn_down_chexps.weight", FL_TENSOR_EXPERTS },
        { "blk.0.attn_q.weight", FL_TENSOR_PROJECTION }, { "blk.1.attn_k_b.weight", FL_TENSOR_PROJECTION },
        { "blk.7.ffn_up_shexp.weight", FL_TENSOR_PROJECTION }, { "rope_freqs.weight", FL_TENSOR_OTHER },
        { "blk.0.attn_sinks.weight", FL_TENSOR_OTHER },
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        CHECK(fl_tensor_role(c[i].name) == c[i].role, "%s: role %d, want %d", c[i].name,
              fl_tensor_role(c[i].name), c[i].role);
    CHECK(fl_tensor_is_weight("blk.0.attn_q.weight") && !fl_tensor_is_weight("blk.0.attn_q.bias"),
          "weight or not");
    printf("roles: %zu names checked\n", sizeof(c) / sizeof(c[0]));
}

int main(void)
{
    test_regex_agreement();
    test_blocks_and_parts();
    test_roles();
    return check_summary("test-tensor-names");
}

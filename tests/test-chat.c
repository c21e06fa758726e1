/* test-chat.c: chat formats (text/chat.h) without a model: the exact
 * string each format makes of one conversation, from llama.cpp's
 * documented outputs (tests/test-chat-template.cpp there) or the model
 * family's own template (tests/data/templates, checked further through the
 * server by tests/serve-tools.py); and which format a GGUF's architecture
 * or template text gets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/whole-file.h"
#include "tests/check.h"
#include "text/chat.h"

static const struct fl_chat_msg conv[] = {
    { .role = "system", .content = "You are a helpful assistant" },
    { .role = "user", .content = "Hello" },
    { .role = "assistant", .content = "Hi there" },
    { .role = "user", .content = "Who are you" },
    { .role = "assistant", .content = "   I am an assistant   " },
    { .role = "user", .content = "Another question" },
};

static void expect_chat(enum fl_chat_format fmt, const char *want)
{
    char *got = NULL;
    int n = fl_chat_apply(fmt, conv, 6, true, &got);
    CHECK(n >= 0 && strcmp(got, want) == 0, "%s:\n  got  '%s'\n  want '%s'",
          fl_chat_format_name(fmt), got ? got : "(null)", want);
    printf("  %s ok\n", fl_chat_format_name(fmt));
    free(got);
}

static void test_chat_formats(void)
{
    expect_chat(FL_CHAT_CHATML,
                "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
                "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\n"
                "Another question<|im_end|>\n<|im_start|>assistant\n");
    expect_chat(FL_CHAT_LLAMA2,
                "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]"
                "   I am an assistant   </s>[INST] Another question [/INST]");
    expect_chat(FL_CHAT_LLAMA2_SYS_BOS,
                "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
                "<s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]");
    expect_chat(FL_CHAT_LLAMA2_SYS_STRIP,
                "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
                "[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]");
    expect_chat(FL_CHAT_MISTRAL_V1,
                " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]"
                "    I am an assistant   </s> [INST] Another question [/INST]");
    expect_chat(FL_CHAT_MISTRAL_V3,
                "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST]"
                " I am an assistant</s>[INST] Another question[/INST]");
    expect_chat(FL_CHAT_MISTRAL_V3_TEKKEN,
                "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]"
                "   I am an assistant   </s>[INST]Another question[/INST]");
    expect_chat(FL_CHAT_MISTRAL_V7,
                "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>"
                "[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]");
    expect_chat(FL_CHAT_LLAMA3,
                "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_chat(FL_CHAT_DEEPSEEK2,
                "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>"
                "User: Who are you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>"
                "User: Another question\n\nAssistant:");
    expect_chat(FL_CHAT_DEEPSEEK3,
                "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜>"
                "<｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜>"
                "<｜User｜>Another question<｜Assistant｜>");
    expect_chat(FL_CHAT_HARMONY,
                "<|start|>system<|message|>You are a helpful assistant<|end|>"
                "<|start|>user<|message|>Hello<|end|><|start|>assistant<|message|>Hi there<|return|>"
                "<|start|>user<|message|>Who are you<|end|>"
                "<|start|>assistant<|message|>   I am an assistant   <|return|>"
                "<|start|>user<|message|>Another question<|end|><|start|>assistant");
    /* gpt-oss's own template: today's date, the system message as the
     * developer's instructions, answers in the final channel */
    char want[1024], date[32];
    const time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof(date), "%Y-%m-%d", localtime_r(&now, &tm));
    snprintf(want, sizeof(want),
             "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
             "Knowledge cutoff: 2024-06\nCurrent date: %s\n\nReasoning: medium\n\n# Valid channels: "
             "analysis, commentary, final. Channel must be included for every message.<|end|>"
             "<|start|>developer<|message|># Instructions\n\nYou are a helpful assistant\n\n<|end|>"
             "<|start|>user<|message|>Hello<|end|><|start|>assistant<|channel|>final<|message|>"
             "Hi there<|end|><|start|>user<|message|>Who are you<|end|>"
             "<|start|>assistant<|channel|>final<|message|>   I am an assistant   <|end|>"
             "<|start|>user<|message|>Another question<|end|><|start|>assistant", date);
    expect_chat(FL_CHAT_GPT_OSS, want);
    /* as llama.cpp's llama_chat_apply_template("kimi-k2") renders it */
    expect_chat(FL_CHAT_KIMI_K2,
                "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>"
                "<|im_user|>user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|>"
                "Hi there<|im_end|><|im_user|>user<|im_middle|>Who are you<|im_end|>"
                "<|im_assistant|>assistant<|im_middle|>   I am an assistant   <|im_end|>"
                "<|im_user|>user<|im_middle|>Another question<|im_end|>"
                "<|im_assistant|>assistant<|im_middle|>");
    /* as llama-server renders DeepSeek V3.1's template (its enable_thinking
     * default: true; the BOS is the tokenizer's) */
    expect_chat(FL_CHAT_DEEPSEEK_V31,
                "You are a helpful assistant<｜User｜>Hello<｜Assistant｜><think></think>Hi there"
                "<｜end▁of▁sentence｜><｜User｜>Who are you<｜Assistant｜><think></think>   I am an "
                "assistant   <｜end▁of▁sentence｜><｜User｜>Another question<｜Assistant｜><think>");
    /* as llama-server renders Qwen3.5's and Qwen3-Coder's templates */
    expect_chat(FL_CHAT_DEEPSEEK_V3_0324, /* each user turn opens the answer */
                "You are a helpful assistant<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜>"
                "<｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜>"
                "<｜User｜>Another question<｜Assistant｜>");
    expect_chat(FL_CHAT_DEEPSEEK_R1, /* the answer opened at the end, thinking */
                "You are a helpful assistant<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜>"
                "<｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜>"
                "<｜User｜>Another question<｜Assistant｜><think>\n");
    expect_chat(FL_CHAT_QWEN35,
                "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello"
                "<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you"
                "<|im_end|>\n<|im_start|>assistant\nI am an assistant<|im_end|>\n<|im_start|>user\n"
                "Another question<|im_end|>\n<|im_start|>assistant\n<think>\n");
    expect_chat(FL_CHAT_QWEN3_CODER,
                "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello"
                "<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you"
                "<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>"
                "user\nAnother question<|im_end|>\n<|im_start|>assistant\n");
    /* as llama-server renders GLM-4.7-Flash's template */
    expect_chat(FL_CHAT_GLM47,
                "[gMASK]<sop><|system|>You are a helpful assistant<|user|>Hello<|assistant|></think>Hi "
                "there<|user|>Who are you<|assistant|></think>I am an assistant<|user|>Another "
                "question<|assistant|><think>");
    /* as llama.cpp's llama_chat_apply_template("chatglm4") renders it */
    expect_chat(FL_CHAT_CHATGLM4,
                "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\n"
                "Hi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\n"
                "Another question<|assistant|>\n");
    /* MiniMax-M2's own template (llama.cpp has no built-in one) */
    expect_chat(FL_CHAT_MINIMAX_M2,
                "]~!b[]~b]system\nYou are a helpful assistant[e~[\n]~b]user\nHello[e~[\n"
                "]~b]ai\nHi there[e~[\n]~b]user\nWho are you[e~[\n]~b]ai\n   I am an assistant   [e~[\n"
                "]~b]user\nAnother question[e~[\n]~b]ai\n<think>\n");
    char *out = NULL;
    CHECK(fl_chat_apply(FL_CHAT_MINIMAX_M2, conv + 1, 1, true, &out) > 0 &&
              !strcmp(out, "]~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nHello[e~[\n"
                           "]~b]ai\n<think>\n"),
          "minimax-m2 without a system turn: '%s'", out ? out : "(null)");
    free(out);
    out = NULL;
    CHECK(fl_chat_apply(FL_CHAT_UNKNOWN, conv, 6, true, &out) == -EINVAL && !out,
          "unknown format is -EINVAL");
    struct fl_chat_msg bad = { .role = "user", .content = NULL };
    CHECK(fl_chat_apply(FL_CHAT_CHATML, &bad, 1, true, &out) == -EINVAL, "NULL content -EINVAL");
    CHECK(fl_chat_apply(FL_CHAT_CHATML, conv, 0, false, &out) == 0 && out && !out[0],
          "empty conversation is an empty string");
    free(out);
}

static void test_chat_detect(void)
{
    CHECK(fl_chat_detect("qwen3moe", NULL) == FL_CHAT_CHATML, "qwen3moe -> chatml");
    CHECK(fl_chat_detect("llama", NULL) == FL_CHAT_LLAMA2, "llama -> [INST]");
    CHECK(fl_chat_detect("deepseek2", NULL) == FL_CHAT_DEEPSEEK3, "deepseek2 -> deepseek3");
    CHECK(fl_chat_detect("deepseek32", NULL) == FL_CHAT_DEEPSEEK_V32, "deepseek32 -> deepseek-v3.2");
    CHECK(fl_chat_detect("glm-dsa", NULL) == FL_CHAT_GLM47, "glm-dsa -> glm-4.7");
    CHECK(fl_chat_detect("kimi-linear", NULL) == FL_CHAT_KIMI_K2_INSTRUCT,
          "kimi-linear -> kimi-k2-instruct");
    /* Kimi K3's and MiniMax-M3's own templates and architectures: their own
     * formats (not K2's or M2's, whose markers theirs share in part) */
    static const struct { const char *arch, *file; enum fl_chat_format want; } own[] = {
        { "kimi-k3", "tests/data/templates/Kimi-K3.jinja", FL_CHAT_KIMI_K3 },
        { NULL, "tests/data/templates/Kimi-K3.jinja", FL_CHAT_KIMI_K3 },
        { NULL, "tests/data/templates/Kimi-K2-Thinking.jinja", FL_CHAT_KIMI_K2_THINKING },
        { "minimax-m3", "tests/data/templates/MiniMax-M3.jinja", FL_CHAT_MINIMAX_M3 },
        { NULL, "tests/data/templates/MiniMax-M3.jinja", FL_CHAT_MINIMAX_M3 },
        { NULL, "tests/data/templates/MiniMax-M2.jinja", FL_CHAT_MINIMAX_M2 },
    };
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        char *t = NULL;
        size_t len;
        CHECK(fl_read_whole_file(own[i].file, 1 << 20, &t, &len) == 0 &&
                  fl_chat_detect(own[i].arch, t) == own[i].want &&
                  (!own[i].arch || fl_chat_detect(own[i].arch, NULL) == own[i].want),
              "%s (%s): format %d", own[i].file, own[i].arch ? own[i].arch : "-",
              (int)fl_chat_detect(own[i].arch, t));
        free(t);
    }
    CHECK(fl_chat_detect("gpt-oss", NULL) == FL_CHAT_GPT_OSS, "gpt-oss -> its own template");
    CHECK(fl_chat_detect("bert", NULL) == FL_CHAT_UNKNOWN, "bert -> unknown");
    CHECK(fl_chat_detect("glm4moe", NULL) == FL_CHAT_GLM45, "glm4moe -> glm-4.5");
    CHECK(fl_chat_detect(NULL, "[gMASK]<sop>{%- if tools -%}<arg_key>{arg-key-1}</arg_key>") ==
              FL_CHAT_GLM45, "GLM-4.5's template (its tool-call pairs) -> glm-4.5");
    CHECK(fl_chat_detect("minimax-m2", NULL) == FL_CHAT_MINIMAX_M2, "minimax-m2 -> minimax-m2");
    CHECK(fl_chat_detect(NULL, "[gMASK]<sop>{% for m in messages %}") == FL_CHAT_CHATGLM4,
          "chatglm4 marker");
    CHECK(fl_chat_detect(NULL, "{{ ']~!b[' ~ ']~b]' ~ role }}{{ '[e~[' }}") == FL_CHAT_MINIMAX_M2,
          "minimax-m2 markers");
    CHECK(fl_chat_detect(NULL, "{%- set think_begin_token = '<mm:think>' -%}{{ ']~b]' }}{{ '[e~[' }}") ==
              FL_CHAT_UNKNOWN, "MiniMax's markers with <mm:think> but no M3 tool tags -> none");
    CHECK(fl_chat_detect("llama", "{{ '<|im_start|>' + role }}") == FL_CHAT_CHATML,
          "template markers win over the architecture");
    CHECK(fl_chat_detect("llama", "{{ '[INST] ' + content }}{{ '[SYSTEM_PROMPT]' }}") ==
              FL_CHAT_MISTRAL_V7, "[SYSTEM_PROMPT] -> mistral-v7");
    CHECK(fl_chat_detect("llama", "{{ bos_token + '[INST] ' }} <<SYS>>") == FL_CHAT_LLAMA2_SYS_BOS,
          "bos inside history");
    CHECK(fl_chat_detect("deepseek2", "{{'Assistant: ' + message['content'] + eos_token}}") ==
              FL_CHAT_DEEPSEEK2, "deepseek v2 marker");
    CHECK(fl_chat_detect(NULL, "<|start|>{{ role }}<|channel|>") == FL_CHAT_GPT_OSS,
          "harmony markers");
    CHECK(fl_chat_detect("deepseek2", "{{ '<｜User｜>' }}{{ '<｜Assistant｜>' }}<｜end▁of▁sentence｜>") ==
              FL_CHAT_DEEPSEEK3, "deepseek v3 markers");
    char *v31 = NULL; /* the template a DeepSeek V3.1 GGUF carries */
    size_t v31_len;
    CHECK(fl_read_whole_file("tests/data/templates/DeepSeek-V3.1.jinja", 1 << 20, &v31, &v31_len) == 0 &&
              fl_chat_detect("deepseek2", v31) == FL_CHAT_DEEPSEEK_V31 &&
              fl_chat_format_from_name("deepseek-v3.1") == FL_CHAT_DEEPSEEK_V31,
          "DeepSeek V3.1's template -> deepseek-v3.1");
    free(v31);
    static const struct {
        const char *file;
        enum fl_chat_format fmt;
    } files[] = { { "tests/data/templates/Qwen3.5-4B.jinja", FL_CHAT_QWEN35 },
                  { "tests/data/templates/Qwen3-Coder.jinja", FL_CHAT_QWEN3_CODER },
                  { "tests/data/templates/Qwen3.jinja", FL_CHAT_CHATML },
                  { "tests/data/templates/GLM-4.6.jinja", FL_CHAT_GLM45 },
                  { "tests/data/templates/GLM-4.7-Flash.jinja", FL_CHAT_GLM47 },
                  { "tests/data/templates/DeepSeek-V3-0324.jinja", FL_CHAT_DEEPSEEK_V3_0324 },
                  { "tests/data/templates/DeepSeek-R1.jinja", FL_CHAT_DEEPSEEK_R1 },
                  { "tests/data/templates/DeepSeek-V3.2.jinja", FL_CHAT_DEEPSEEK_V32 } };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char *t = NULL;
        size_t len;
        CHECK(fl_read_whole_file(files[i].file, 1 << 20, &t, &len) == 0 &&
                  fl_chat_detect("qwen3moe", t) == files[i].fmt,
              "%s -> %s", files[i].file, fl_chat_format_name(files[i].fmt));
        free(t);
    }
    CHECK(fl_chat_detect("qwen35moe", NULL) == FL_CHAT_QWEN35 &&
              fl_chat_format_from_name("qwen3-coder") == FL_CHAT_QWEN3_CODER,
          "qwen35moe -> qwen3.5; qwen3-coder by name");
    CHECK(fl_chat_detect("deepseek2", "{{'<|im_assistant|>assistant<|im_middle|>'}}") ==
              FL_CHAT_KIMI_K2_INSTRUCT &&
              fl_chat_detect("deepseek2", "<|im_assistant|><|im_middle|><think></think>") ==
              FL_CHAT_KIMI_K2_THINKING, "Kimi K2 markers, with <think>");
    CHECK(fl_chat_format_from_name("gpt-oss") == FL_CHAT_HARMONY &&
              fl_chat_format_from_name("kimi-k2") == FL_CHAT_KIMI_K2 &&
              fl_chat_format_from_name("openai-gpt-oss") == FL_CHAT_GPT_OSS &&
              fl_chat_format_from_name("deepseek-v3-0324") == FL_CHAT_DEEPSEEK_V3_0324 &&
              fl_chat_format_from_name("deepseek-r1") == FL_CHAT_DEEPSEEK_R1 &&
              fl_chat_format_from_name("nope") == FL_CHAT_UNKNOWN, "names");
    printf("  format detection ok\n");
}

int main(void)
{
    const char *src = getenv("FL_SOURCE_DIR"); /* data paths are relative to the repo */
    if (src && chdir(src) != 0) {
        printf("cannot enter FL_SOURCE_DIR %s\n", src);
        return 1;
    }
    test_chat_formats();
    test_chat_detect();
    return check_summary("test-chat");
}

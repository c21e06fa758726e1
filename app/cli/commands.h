/* commands.h: the subcommands of the faultline CLI. Each takes argc/argv
 * starting at its own name and returns the process exit status. A module that
 * adds a command declares it here and adds one line to FL_CLI_COMMANDS. */
#ifndef FL_CLI_COMMANDS_H
#define FL_CLI_COMMANDS_H

#include "ebpf/trace.h" /* cli_trace */

int cli_version(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_gen(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_compare(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_batch(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_embed(int argc, char **argv);
int cli_perplexity(int argc, char **argv);

#define FL_CLI_COMMANDS \
    { "version", cli_version, "print the version and the CPU features in use" }, \
    { "inspect", cli_inspect, "show a GGUF file's architecture, tensors and MoE layout" }, \
    { "gen", cli_gen, "write a synthetic MoE model (any size) that llama.cpp also loads" }, \
    { "eval", cli_eval, "write logits/routing files as llama.cpp's reference runs" }, \
    { "compare", cli_compare, "compare two logits (and routing) files" }, \
    { "run", cli_run, "generate text from a prompt" }, \
    { "batch", cli_batch, "run a file of OpenAI Batch API requests, many at once (resumable)" }, \
    { "serve", cli_serve, "an OpenAI-compatible HTTP server, many clients at once" }, \
    { "embed", cli_embed, "print the embeddings of prompts (llama-embedding's output)" }, \
    { "perplexity", cli_perplexity, "a model's perplexity on a text (llama-perplexity's measure)" }, \
    { "bench", cli_bench, "measure prompt and generation speed (llama-bench's table)" }, \
    { "tokenize", cli_tokenize, "print a text's token ids and pieces (llama-tokenize's output)" }, \
    { "trace", cli_trace, "per-expert fault, I/O and copy latency with eBPF (docs/trace.md)" },

#endif

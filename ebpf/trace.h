/* trace.h: `faultline trace` — per-expert fault, read and copy latency with
 * eBPF (docs/trace.md); the command app/cli/main.c dispatches to. */
#ifndef FL_TRACE_H
#define FL_TRACE_H

/* Takes argc/argv starting at "trace"; returns the process exit status. */
int cli_trace(int argc, char **argv);

#endif

/* interrupt.h: what SIGINT, SIGTERM and SIGHUP do to a command.
 *
 * By default (cli_interrupt_default, set by main for every command) the
 * process removes the temporary files of its unfinished outputs
 * (base/out-file.h) and dies of the signal, so nothing half-written is left
 * under a final name or beside it. A command that can stop cleanly (run)
 * asks for cli_interrupt_graceful: the first signal only sets a flag the
 * command polls between steps, so it can print its timings, write its
 * statistics and exit 130; a second signal exits at once, also removing
 * the temporaries. */
#ifndef FL_CLI_INTERRUPT_H
#define FL_CLI_INTERRUPT_H

void cli_interrupt_default(void);
void cli_interrupt_graceful(void);

/* The number of the first signal since the last clear, 0 when none. */
int cli_interrupted(void);

/* Forgets a signal already handled (the chat loop, after an answer was
 * stopped), so the next one is again the "first". */
void cli_interrupt_clear(void);

/* The exit status of a command stopped by signal sig, as a shell reports
 * it (128 + sig: 130 for SIGINT). */
int cli_interrupt_status(int sig);

#endif

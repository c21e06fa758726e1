/* interrupt.c: SIGINT/SIGTERM/SIGHUP for the commands (interrupt.h). */
#include "app/cli/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include "base/out-file.h"

static volatile sig_atomic_t g_first;

static void die_of(int sig)
{
    fl_out_remove_pending();
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL); /* the handler blocks it: die now */
    raise(sig);
    _exit(cli_interrupt_status(sig));
}

static void on_default(int sig)
{
    die_of(sig);
}

static void on_graceful(int sig)
{
    if (g_first) {
        fl_out_remove_pending();
        _exit(cli_interrupt_status(g_first));
    }
    g_first = sig;
}

static void install(void (*fn)(int))
{
    /* no SA_RESTART: a read of the terminal returns EINTR, so the chat
     * loop sees a Ctrl-C typed at its prompt */
    struct sigaction sa = { .sa_handler = fn };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

void cli_interrupt_default(void)
{
    install(on_default);
}

void cli_interrupt_graceful(void)
{
    g_first = 0;
    install(on_graceful);
}

int cli_interrupted(void)
{
    return g_first;
}

void cli_interrupt_clear(void)
{
    g_first = 0;
}

int cli_interrupt_status(int sig)
{
    return 128 + sig;
}

/* A planted defect for the harnesses' verdict on how a relay ended (tools/harness.py `judge`): a prefect-push that
 * exits, however cleanly, dies of SIGSEGV on its way out instead. It arms itself only in a process whose executable
 * is named prefect-push, so it can be preloaded into a whole harness run:
 *
 *   gcc -shared -fPIC -O2 -o .build/planted/crash-at-exit.so tools/planted/crash-at-exit.c
 *   LD_PRELOAD=$PWD/.build/planted/crash-at-exit.so .venv/bin/python tools/release-smoke.py   # must fail
 *
 * Every harness must fail on it, naming the signal: a relay that crashes at stop passed everything before it. */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int armed;

__attribute__((constructor)) static void arm(void) {
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0)
        return;
    path[n] = 0;
    const char *name = strrchr(path, '/');
    armed = strcmp(name ? name + 1 : path, "prefect-push") == 0;
}

/* Runs from exit(), after the relay's orderly shutdown. */
__attribute__((destructor)) static void crash(void) {
    if (armed) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
}

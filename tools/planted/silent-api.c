/* A planted defect for tools/bad-input.py's verdict: a prefect-push whose API reads requests but never answers one.
 * Every connection it accepts after the first (the battery's registration) has its sending side shut at once, so the
 * client sees the connection close without a byte. It arms itself only in a process whose executable is named
 * prefect-push, so it can be preloaded into a whole harness run:
 *
 *   gcc -shared -fPIC -O2 -o .build/planted/silent-api.so tools/planted/silent-api.c -ldl
 *   LD_PRELOAD=$PWD/.build/planted/silent-api.so .venv/bin/python tools/bad-input.py --requests 2000   # must fail
 *
 * A battery that counts a closed connection as fine passes this relay; it must fail it instead. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

static int is_relay(void) {
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = 0;
    const char *name = strrchr(path, '/');
    return strcmp(name ? name + 1 : path, "prefect-push") == 0;
}

static int silence(int fd) {
    static atomic_int accepted;
    if (fd >= 0 && atomic_fetch_add(&accepted, 1) >= 1 && is_relay())
        shutdown(fd, SHUT_WR);
    return fd;
}

int accept4(int socket, struct sockaddr *address, socklen_t *length, int flags) {
    static accept4_fn real;
    if (!real)
        real = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
    return silence(real(socket, address, length, flags));
}

int accept(int socket, struct sockaddr *address, socklen_t *length) {
    return accept4(socket, address, length, 0);
}

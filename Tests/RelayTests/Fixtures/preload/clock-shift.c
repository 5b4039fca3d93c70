/* clock-shift: an LD_PRELOAD that steps a process's wall clock while it runs, as an NTP correction or a restored VM
 * does. CLOCK_SHIFT_FILE names a file whose first 8 bytes are a signed shift in seconds (native byte order), mapped
 * shared: a test writes a new shift into it and the process's next clock_gettime(CLOCK_REALTIME), gettimeofday or
 * time reads the stepped clock. CLOCK_MONOTONIC is left alone. Without the variable nothing is shifted. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const int64_t *shift;

__attribute__((constructor)) static void clock_shift_init(void) {
    const char *path = getenv("CLOCK_SHIFT_FILE");
    if (!path) return;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    void *mapped = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (mapped != MAP_FAILED) shift = mapped;
}

static int64_t clock_shift_seconds(void) { return shift ? __atomic_load_n(shift, __ATOMIC_RELAXED) : 0; }

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += clock_shift_seconds();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    static int (*real)(struct timeval *restrict, void *restrict);
    if (!real) real = (int (*)(struct timeval *restrict, void *restrict))dlsym(RTLD_NEXT, "gettimeofday");
    int rc = real(tv, tz);
    if (rc == 0) tv->tv_sec += clock_shift_seconds();
    return rc;
}

time_t time(time_t *out) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (out) *out = now.tv_sec;
    return now.tv_sec;
}

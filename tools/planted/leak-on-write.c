/* A planted defect for the soak's memory verdict (bench/soak.py): every write(2) the process makes through libc
 * leaks 1 KiB, allocated, touched so that it is resident, and never freed. Preloaded into the relay alone:
 *
 *   gcc -shared -fPIC -O2 -o .build/planted/leak-on-write.so tools/planted/leak-on-write.c -ldl
 *   .venv/bin/python bench/soak.py --pauses 3000 --every 50 --relay-preload .build/planted/leak-on-write.so
 *
 * The soak must fail on it: a memory check that passes a leaking relay proves nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);

/* Kept where the compiler can't prove the block dead, or it would drop the allocation and the stores. */
void *volatile leak_on_write_last;

ssize_t write(int fd, const void *buffer, size_t count) {
    static write_fn real_write;
    if (!real_write)
        real_write = (write_fn)dlsym(RTLD_NEXT, "write");
    char *leaked = malloc(1024);
    if (leaked) {
        memset(leaked, 0xa5, 1024);
        leak_on_write_last = leaked;
    }
    return real_write(fd, buffer, count);
}

/* no-netlink: an LD_PRELOAD that makes a process refuse AF_NETLINK sockets with EAFNOSUPPORT, as systemd's
 * RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX does, and by the same means: a seccomp filter, installed here
 * before main. Wrapping socket() would not do: glibc's getifaddrs opens its netlink socket through an internal alias
 * that no preload sees. Every other system call, and socket() for any other family, is allowed. If the filter can't
 * be installed the process exits 125 at once, so a test never passes without it. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NO_NETLINK_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NO_NETLINK_ARCH AUDIT_ARCH_AARCH64
#else
#error "no-netlink: add this architecture's AUDIT_ARCH"
#endif

__attribute__((constructor)) static void no_netlink_init(void) {
    struct sock_filter filter[] = {
        /* Another architecture's calls (none here): allowed, as the filter can't read their numbers. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_NETLINK_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* socket(domain, ...): the low 32 bits of the first argument (little-endian). */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EAFNOSUPPORT & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        const char *message = "no-netlink: could not install the seccomp filter\n";
        (void)!write(2, message, strlen(message));
        _exit(125);
    }
}

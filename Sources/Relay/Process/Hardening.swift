import CShims
import Glibc

/// Process-wide protections set once at start-up, before any secret is read.
enum Hardening {
    /// No core dumps: the APNs key and the Prefect credential live in this process's memory, and a crash must not
    /// write them to disk. `RLIMIT_CORE` 0 stops the kernel writing a core file; `PR_SET_DUMPABLE` 0 also keeps
    /// other processes of the same user from attaching or reading `/proc/<pid>/mem`, and makes a core-pattern pipe
    /// (systemd-coredump, apport) skip the process. Failures are logged, not fatal: a sandbox may forbid both.
    static func disableCoreDumps() {
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        if setrlimit(Int32(RLIMIT_CORE.rawValue), &limit) != 0 {
            Log.warn("hardening.core_limit_failed", ["errno": String(errno)])
        }
        if CShims_prctl_set_not_dumpable() != 0 {
            Log.warn("hardening.not_dumpable_failed", ["errno": String(errno)])
        }
    }
}

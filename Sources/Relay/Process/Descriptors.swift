import Dispatch
import Glibc
import RelayCore

/// The process's descriptors, set up once at start-up: the soft limit raised to the hard one, and the share API
/// clients may hold (`DescriptorBudget`).
enum Descriptors {
    /// Raises the soft `RLIMIT_NOFILE` toward the hard limit and returns the budget under the limit now in force.
    /// A limit that leaves API clients little room is a warning, not a failure: the relay's own connections keep
    /// their reserve either way.
    static func prepare() -> DescriptorBudget {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else {
            Log.warn("relay.fd_limit_unknown", ["errno": String(errno)])
            return DescriptorBudget(limit: 1024)
        }
        let soft = Int(clamping: limits.rlim_cur)
        let hard = Int(clamping: limits.rlim_max)  // RLIM_INFINITY is all ones: clamped to Int.max
        let wanted = DescriptorBudget.wantedSoftLimit(soft: soft, hard: hard)
        var inForce = soft
        if wanted > soft {
            limits.rlim_cur = rlim_t(wanted)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 { inForce = wanted }
        }
        let budget = DescriptorBudget(limit: inForce)
        if budget.isTight {
            Log.warn("relay.fd_limit_low", ["limit": String(inForce), "api_connections": String(budget.apiConnections),
                                            "fix": "raise the descriptor limit to 4096 (systemd LimitNOFILE, ulimit -n, "
                                                + "the container runtime's nofile ulimit)"])
        }
        return budget
    }

    /// Makes libdispatch create its event loop's descriptors now (its epoll instance, its wake-up eventfd, a timerfd
    /// for each clock Swift's `Task.sleep` and timers use), while descriptors are plentiful. It creates them lazily,
    /// on first use, and crashes the process (DISPATCH_INTERNAL_CRASH, a trap) when the epoll instance or eventfd
    /// can't be had: a first retry timer armed while API clients hold every descriptor would otherwise kill the relay.
    /// All at once: one after another they added ~5 ms to start-up.
    static func warmUpDispatch() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: .milliseconds(1)) }  // ContinuousClock
            group.addTask {
                try? await Task.sleep(until: SuspendingClock.now.advanced(by: .milliseconds(1)), clock: SuspendingClock())
            }
            group.addTask { try? await Task.sleep(nanoseconds: 1_000_000) }
            group.addTask {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().asyncAfter(wallDeadline: .now() + .milliseconds(1)) { done.resume() }
                }
            }
            group.addTask {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { done.resume() }
                }
            }
        }
    }
}

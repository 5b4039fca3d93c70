/// The relay's one retry vocabulary: how long to wait after the n-th failure in a row, in seconds. Every retry in
/// the relay (the events socket's reconnects, the outbox's pushes, the pause jobs, a push retried within one send,
/// a Prefect call answered 503) is one of the presets below, so a change of policy is a change here.
///
/// After the n-th failure in a row (n ≥ 1) the delay is
///
///     delay(n) = min(maximum, initial · 2^(n−1)) · (1 − jitter · r),   r uniform in [0, 1)
///
/// so with initial 1 s, maximum 60 s and jitter 0.25 the ceilings run 1, 2, 4, 8, 16, 32, 60, 60, … s and each
/// delay falls in (¾·ceiling, ceiling]. Jitter only shortens, so the cap holds, and many relays restarted together
/// spread out. `limit`, when set, is how many retries there are before giving up.
///
/// The random draw is the caller's, so tests are exact.
public struct Backoff: Sendable, Equatable {
    public var initial: Double
    public var maximum: Double
    public var jitter: Double
    /// Retries allowed after the first try; nil: until the caller stops (success, expiry, the pause ended).
    public var limit: Int?

    public init(initial: Double, maximum: Double, jitter: Double = 0.25, limit: Int? = nil) {
        precondition(initial > 0 && maximum >= initial && (0...1).contains(jitter) && (limit ?? 0) >= 0,
                     "Backoff: bad parameters")
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self.limit = limit
    }

    /// The events socket's reconnects: a subscribe resets the count, so a flapping link retries after a second,
    /// not after a minute.
    public static let eventsSocket = Backoff(initial: 1, maximum: 60)
    /// A stored push that APNs did not take (429, 5xx, unreachable, no answer): tried again until it expires.
    public static let outbox = Backoff(initial: 1, maximum: 30)
    /// A pause job (announce, remind, refresh, end) or a run read that failed: tried again while it matters.
    public static let pauseJobs = Backoff(initial: 1, maximum: 30)
    /// A push retried within one send (`POST /devices/{id}/test`, `check`): a few quick tries, since its caller
    /// is waiting for the answer.
    public static let withinSend = Backoff(initial: 0.5, maximum: 4, jitter: 0.2, limit: 3)

    /// A Prefect REST call answered 503 or 429: retried after 0.2, 0.4 and 0.8 s (or its `Retry-After`, up to 10 s),
    /// then left to its caller's own schedule (the pause jobs, the listing).
    public static let prefectCall = Backoff(initial: 0.2, maximum: 0.8, jitter: 0, limit: 3)

    /// No retries: a 429 or 5xx is final (a provider-token error still re-signs once). For a caller that keeps the
    /// push and retries it on its own schedule (the outbox), or that only reports (`check`).
    public static let never = Backoff(initial: 1, maximum: 1, jitter: 0, limit: 0)

    /// The formula above, for the `failures`-th failure in a row and `random` in [0, 1).
    public func delay(failures: Int, random: Double) -> Double {
        let exponent = min(max(failures, 1) - 1, 62)
        var ceiling = initial
        for _ in 0..<exponent where ceiling < maximum { ceiling *= 2 }
        ceiling = min(maximum, ceiling)
        return ceiling * (1 - jitter * min(max(random, 0), 1))
    }

    /// The wait before retry number `retry` (1-based), or nil once `limit` is used up.
    public func delay(retry: Int, random: Double) -> Double? {
        guard retry >= 1, retry <= limit ?? .max else { return nil }
        return delay(failures: retry, random: random)
    }
}

/// Failed work by key, each with its failures in a row and when it is due again on `backoff`'s schedule. Times are
/// whatever clock the caller passes (the relay passes the monotonic one).
public struct Retries<Key: Hashable & Comparable & Sendable>: Sendable {
    public let backoff: Backoff
    private var entries: [Key: (failures: Int, at: Double)] = [:]

    public init(_ backoff: Backoff) { self.backoff = backoff }

    public func contains(_ key: Key) -> Bool { entries[key] != nil }

    /// Failures in a row of `key` since it last succeeded.
    public func failures(_ key: Key) -> Int { entries[key]?.failures ?? 0 }

    /// Records a failure; returns the delay until the next try.
    @discardableResult
    public mutating func failed(_ key: Key, now: Double, random: Double) -> Double {
        let failures = failures(key) + 1
        let delay = backoff.delay(failures: failures, random: random)
        entries[key] = (failures, now + delay)
        return delay
    }

    /// Schedules `key` for the next `due` call (work found pending at start-up).
    public mutating func now(_ key: Key, at time: Double) {
        entries[key] = (failures(key), time)
    }

    public mutating func succeeded(_ key: Key) { entries[key] = nil }

    /// Keys whose time has come, oldest first. They stay scheduled until `succeeded` or `failed`. (Closures, not key
    /// paths: a key path into this generic type is built at run time on every call, through the runtime's demangler,
    /// whose code pages then stayed resident: +0.3 MB idle RSS.)
    public func due(now: Double) -> [Key] {
        entries.filter { $0.value.at <= now }.sorted { ($0.value.at, $0.key) < ($1.value.at, $1.key) }.map { $0.key }
    }
}

/// An unbroken run of failures of one dependency (the store, an APNs host), with no success between them.
/// Pure: the edge reports each outcome with the time (monotonic seconds); `HealthVerdict` judges the streak.
public struct FailureStreak: Sendable, Equatable {
    /// The first failure of the streak; nil once something succeeded.
    public private(set) var since: Double?
    /// The streak's latest failure.
    public private(set) var latest: Double?
    /// What the latest failure said (for `/health` and the log; never a credential).
    public private(set) var lastError = ""
    /// Failures in this streak.
    public private(set) var count = 0

    public init() {}

    public var isFailing: Bool { since != nil }

    public mutating func failed(at time: Double, error: String) {
        if since == nil { since = time }
        latest = time
        lastError = String(error.prefix(200))
        count += 1
    }

    public mutating func succeeded() {
        since = nil
        latest = nil
        lastError = ""
        count = 0
    }

    /// How long the failures have gone on, first to latest: a dependency tried once and left alone doesn't age
    /// into an outage by the clock alone, only by failing again.
    public var span: Double {
        guard let since, let latest else { return 0 }
        return latest - since
    }
}

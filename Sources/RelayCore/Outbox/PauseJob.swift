/// Work the relay owes a pause before its pushes are in the outbox: read the context and queue the alert (announce),
/// queue the reminder, or queue the Live Activity ends. A job that fails (Prefect unreachable, the store locked)
/// is kept and tried again on `RetryTimes`' schedule, never dropped after one failure.
public struct PauseJob: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// `origin` is what the pause was learned from; nil when retried from the store after a restart.
        case announce(Watcher.Origin?)
        case remind(minutesLeft: Int)
        case end
        /// A custom event or artifact came for the run after its announce was built: the props are built again
        /// and, when the text changed, stored in place of the announced ones (the reminder and the Live
        /// Activity's end are made from them) and the run's Live Activities updated, silently.
        case refresh
    }

    public var kind: Kind
    public var pause: PauseRecord

    public init(_ kind: Kind, _ pause: PauseRecord) {
        self.kind = kind
        self.pause = pause
    }

    /// One job of each kind per pause at a time.
    public var key: String {
        switch kind {
        case .announce: "announce:" + pause.stateID
        case .remind: "remind:" + pause.stateID
        case .end: "end:" + pause.stateID
        case .refresh: "refresh:" + pause.stateID
        }
    }

    /// How long an end is worth retrying after the pause ended (its push expires after an hour anyway).
    public static let endRetryWindow: Int64 = 3600

    /// Whether the job still matters, given the watcher's current record of the pause (nil: forgotten).
    public func isWorthRetrying(current: PauseRecord?, now: Double) -> Bool {
        switch kind {
        case .announce, .remind, .refresh:
            return current?.isWaiting == true
        case .end:
            return Double((current?.endedAt ?? pause.endedAt ?? 0) + Self.endRetryWindow) > now
        }
    }
}

/// When failed work is tried again, by key: `Backoff`'s doubling from `initial` to `maximum`, jittered.
public struct RetryTimes: Sendable {
    public var initial: Double
    public var maximum: Double
    private var entries: [String: (failures: Int, at: Double)] = [:]

    public init(initial: Double = 1, maximum: Double = 30) {
        self.initial = initial
        self.maximum = maximum
    }

    public func contains(_ key: String) -> Bool { entries[key] != nil }

    /// Records a failure; returns the delay until the next try.
    @discardableResult
    public mutating func failed(_ key: String, now: Double, random: Double) -> Double {
        let failures = (entries[key]?.failures ?? 0) + 1
        let delay = Backoff.delay(failures: failures, random: random, initial: initial, maximum: maximum)
        entries[key] = (failures, now + delay)
        return delay
    }

    /// Schedules `key` for the next `due` call (work found pending at start-up).
    public mutating func now(_ key: String, at time: Double) {
        entries[key] = (entries[key]?.failures ?? 0, time)
    }

    public mutating func succeeded(_ key: String) { entries[key] = nil }

    /// Keys whose time has come, oldest first. They stay scheduled until `succeeded` or `failed`.
    public func due(now: Double) -> [String] {
        entries.filter { $0.value.at <= now }.sorted { ($0.value.at, $0.key) < ($1.value.at, $1.key) }.map(\.key)
    }

}

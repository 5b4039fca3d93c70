/// Work the relay owes a pause before its pushes are in the outbox: read the context and queue the alert (announce),
/// queue the reminder, or queue the Live Activity ends. A job that fails (Prefect unreachable, the store locked)
/// is kept and tried again on `Backoff.pauseJobs`' schedule (`Retries`), never dropped after one failure.
public struct PauseJob: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// `origin` is what the pause was learned from; nil when retried from the store after a restart.
        case announce(PauseWatcher.Origin?)
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

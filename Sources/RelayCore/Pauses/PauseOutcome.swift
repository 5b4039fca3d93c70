/// How a pause ended, as far as the relay can tell from the state that ended it (`PauseWatcher.Action.end`): the
/// `outcome` label of `prefect_push_pause_wait_seconds` (docs/operations.md "Pause outcomes").
///
/// Four values and no more, so the label's cardinality is fixed whatever state names a server invents.
public enum PauseOutcome: String, Sendable, CaseIterable {
    /// A person resumed the run: it went on running (`Running`, or `Resuming` for a suspended run), or paused again
    /// (a paused run leaves its pause only by a resume, a timeout or a cancel, and only a resume can pause again).
    case resumed
    /// Someone cancelled the run (`Cancelling`, `Cancelled`).
    case cancelled
    /// Nobody answered in time: the run left its pause for any other state at or after its timeout (Prefect fails a
    /// blocking pause that times out).
    case timedOut = "timed_out"
    /// Anything else: the run failed, crashed or completed before its timeout, or it is gone from Prefect.
    case other

    /// A state at most this many seconds before the timeout still counts as the timeout: the pause's timeout is
    /// whole seconds (`PauseRecord.timeoutAt`) and Prefect's clock may run a little ahead of the relay's.
    public static let timeoutSlack: Int64 = 5

    /// The outcome of `pause`, ended (`endedAt` set) by the state named `endedState` (nil: the run is gone).
    public static func of(_ pause: PauseRecord) -> PauseOutcome {
        switch pause.endedState {
        case "Running"?, "Resuming"?, "Paused"?, "Suspended"?: return .resumed
        case "Cancelling"?, "Cancelled"?: return .cancelled
        case nil: return .other
        default:
            guard let timeout = pause.timeoutAt, let ended = pause.endedAt else { return .other }
            return ended >= timeout - timeoutSlack ? .timedOut : .other
        }
    }

    /// Seconds the pause waited: from its PAUSED state's timestamp to when the relay saw the state that ended it
    /// (the relay's clock; a relay that was down when the run moved on counts until it caught up). Never negative.
    public static func waited(_ pause: PauseRecord) -> Int64 {
        max(0, (pause.endedAt ?? pause.pausedAt) - pause.pausedAt)
    }

    /// Whether a person answered after the reminder was sent: resumed, with a reminder on record.
    public static func answeredAfterReminder(_ pause: PauseRecord) -> Bool {
        pause.remindedAt != nil && of(pause) == .resumed
    }

    /// Bucket bounds of the wait histogram, in seconds: 10 s to a day. People answer in seconds to hours; a
    /// reminder comes 5 minutes before a timeout of 10 minutes or more, and suspends can wait for days (those land
    /// in `+Inf`).
    public static let waitBuckets: [Double] = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400]
}

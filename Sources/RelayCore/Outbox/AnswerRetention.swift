/// How long, and how many, of APNs' answers (`PushAnswer`) the store keeps once their pause has ended, so
/// `prefect-push status --run/--device` can still say what became of yesterday's alert. A waiting pause's answers
/// are always kept (they are bounded by its devices); an ended pause's go `keepFor` after its end, or sooner when
/// the store holds more than `maxRows` answers: whole pauses at a time, those that ended first going first, so a
/// pause shown is shown with every answer it had.
public struct AnswerRetention: Sendable, Equatable {
    /// Seconds after its pause ended that an answer is kept: a day, as long as the pause itself is kept.
    public var keepFor: Int64 = 24 * 3600
    /// The most answer rows kept. 50,000 rows of ~100 bytes is ~5 MB of store: a day of 10,000 phones is over it,
    /// and the cap keeps the newest ended pauses whole rather than let the file grow with the fleet.
    public var maxRows = 50_000

    public init() {}

    public init(keepFor: Int64, maxRows: Int) {
        self.keepFor = keepFor
        self.maxRows = maxRows
    }

    /// An ended pause that has answers kept, as the pruning sees it.
    public struct Ended: Sendable, Equatable {
        public var stateID: String
        /// Unix seconds.
        public var endedAt: Int64
        public var rows: Int

        public init(stateID: String, endedAt: Int64, rows: Int) {
            self.stateID = stateID
            self.endedAt = endedAt
            self.rows = rows
        }
    }

    /// The ended pauses whose answers go now: those that ended `keepFor` or more before `now`, then, while the store
    /// would still hold more than `maxRows` answers in all (`totalRows`, waiting pauses' included), the ones that
    /// ended first. Ties in end time go by state id, so the choice doesn't depend on the order given.
    public func pausesToForget(ended: [Ended], totalRows: Int, now: Int64) -> [String] {
        let oldestFirst = ended.sorted { ($0.endedAt, $0.stateID) < ($1.endedAt, $1.stateID) }
        var rows = totalRows
        var forget: [String] = []
        for pause in oldestFirst {
            guard pause.endedAt <= now - keepFor || rows > maxRows else { break }
            forget.append(pause.stateID)
            rows -= pause.rows
        }
        return forget
    }
}

/// How many of APNs' answers (`PushAnswer`) the store keeps for ended pauses, so `prefect-push status --run/--device`
/// can still say what became of yesterday's alert. Answers go with their pause a day after it ends
/// (`Store.prunePauses`), and a waiting pause's are always kept (they are bounded by its devices); an ended pause's
/// go sooner when the store holds more than `maxRows` answers: whole pauses at a time, those that ended first going
/// first, so a pause shown is shown with every answer it had.
public struct AnswerRetention: Sendable, Equatable {
    /// The most answer rows kept. 50,000 rows of ~100 bytes is ~5 MB of store: a day of 10,000 phones is over it,
    /// and the cap keeps the newest ended pauses whole rather than let the file grow with the fleet.
    public var maxRows = 50_000

    public init() {}

    public init(maxRows: Int) {
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

    /// The ended pauses whose answers go now: while the store would still hold more than `maxRows` answers in all
    /// (`totalRows`, waiting pauses' included), the ones that ended first. Ties in end time go by state id, so the
    /// choice doesn't depend on the order given.
    public func pausesToForget(ended: [Ended], totalRows: Int) -> [String] {
        let oldestFirst = ended.sorted { ($0.endedAt, $0.stateID) < ($1.endedAt, $1.stateID) }
        var rows = totalRows
        var forget: [String] = []
        for pause in oldestFirst {
            guard rows > maxRows else { break }
            forget.append(pause.stateID)
            rows -= pause.rows
        }
        return forget
    }
}

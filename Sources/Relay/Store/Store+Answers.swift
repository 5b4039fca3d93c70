import RelayCore

// MARK: - APNs' answers kept after their pause

extension Store {
    /// Deletes the answers of ended pauses that `retention` no longer keeps (over its row cap, the pauses that ended
    /// first going first), in one transaction; answers past their pause's day go with it (`prunePauses`). Returns how
    /// many answers went.
    @discardableResult
    func pruneAnswers(retention: AnswerRetention = AnswerRetention()) throws -> Int {
        let ended = try statement("""
            SELECT a.state_id, p.ended_at, count(*) FROM push_answers a JOIN pauses p ON p.state_id = a.state_id
            WHERE p.ended_at IS NOT NULL GROUP BY a.state_id
            """)
        let total = try statement("SELECT count(*) FROM push_answers")
        let forget = try statement("DELETE FROM push_answers WHERE state_id = ?1")
        return try database.transaction {
            let kept = try ended.query([]) {
                AnswerRetention.Ended(stateID: $0.string(0), endedAt: $0.int64(1), rows: Int($0.int64(2)))
            }
            let rows = Int(try total.query([]) { $0.int64(0) }.first ?? 0)
            var removed = 0
            for stateID in retention.pausesToForget(ended: kept, totalRows: rows) {
                removed += try forget.execute([.text(stateID)])
            }
            return removed
        }
    }
}

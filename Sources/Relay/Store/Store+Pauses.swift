import RelayCore

// MARK: - Pauses

extension Store {
    static let pauseColumns =
        "state_id, run_id, state_name, paused_at, timeout_at, announced_at, reminded_at, ended_at, ended_state"

    /// Records a pause unless its state id is already known; returns whether it was new. The relay records a
    /// pause (with `announcedAt` set when it will announce it) before sending anything: that row is the
    /// "announce once" guarantee across restarts, reconnects and event/listing races.
    @discardableResult
    func insertPause(_ p: PauseRecord) throws -> Bool {
        // ON CONFLICT (state_id) DO NOTHING rather than INSERT OR IGNORE: only a known state id is ignored;
        // a NOT NULL or CHECK failure still throws.
        try write("""
            INSERT INTO pauses (\(Store.pauseColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
            ON CONFLICT (state_id) DO NOTHING
            """, [
                .text(p.stateID), .text(p.runID), .text(p.stateName), .integer(p.pausedAt), .integer(p.timeoutAt),
                .integer(p.announcedAt), .integer(p.remindedAt), .integer(p.endedAt), .text(p.endedState),
            ]) > 0
    }

    /// Claims the one reminder of a still-waiting pause. True only the first time, so only one is sent.
    @discardableResult
    func markReminded(stateID: String, at time: Int64) throws -> Bool {
        try write("""
            UPDATE pauses SET reminded_at = ?2 WHERE state_id = ?1 AND reminded_at IS NULL AND ended_at IS NULL
            """, [.text(stateID), .integer(time)]) > 0
    }

    /// Ends a waiting pause with the run's new state name, and drops its alert, start and reminder pushes still
    /// queued (news about a run that moved on). The answers kept for `status` stay as long as the pause
    /// (`prunePauses`), or less over `AnswerRetention`'s cap. True only the first time, so the activity is ended once.
    @discardableResult
    func markEnded(stateID: String, state: String?, at time: Int64) throws -> Bool {
        let end = try statement("UPDATE pauses SET ended_at = ?3, ended_state = ?2 WHERE state_id = ?1 AND ended_at IS NULL")
        // The messages go with their rows (ON DELETE CASCADE): deleting the rows alone left each body behind until
        // the 5-minute prune when the pause ended while its answers were still on their way (1 pause in 14, soak).
        let drop = try statement("""
            DELETE FROM outbox_messages WHERE state_id = ?1 AND purpose IN ('alert', 'start', 'reminder')
            """)
        return try database.transaction {
            guard try end.execute([.text(stateID), .text(state), .integer(time)]) > 0 else { return false }
            try drop.execute([.text(stateID)])
            return true
        }
    }

    /// Waiting pauses that were to be announced but whose alert never made it into the outbox (the context could
    /// not be read, or the store failed): the relay tries them again.
    func unannouncedPauses() throws -> [String] {
        try read("""
            SELECT state_id FROM pauses WHERE announced_at IS NOT NULL AND ended_at IS NULL AND props IS NULL
            ORDER BY paused_at
            """) { $0.string(0) }
    }

    /// Ended pauses whose Live Activities were never ended: the run has activity tokens left (the end's outbox write
    /// forgets them) and no waiting pause. Only a stop between the pause's end and that write leaves one; the
    /// relay ends them after a restart; those that ended before `endedAfter` are past ending
    /// (`PauseJob.endRetryWindow`).
    func pausesWithActivitiesLeft(endedAfter: Int64 = .min) throws -> [String] {
        try read("""
            SELECT p.state_id FROM pauses p
            WHERE p.ended_at IS NOT NULL AND p.ended_at > ?1
              AND EXISTS (SELECT 1 FROM activities a WHERE a.run_id = p.run_id)
              AND NOT EXISTS (SELECT 1 FROM pauses w WHERE w.run_id = p.run_id AND w.ended_at IS NULL)
              AND NOT EXISTS (SELECT 1 FROM pauses l WHERE l.run_id = p.run_id AND l.paused_at > p.paused_at)
            ORDER BY p.ended_at
            """, [.integer(endedAfter)]) { $0.string(0) }
    }

    /// Sets a pause's timeout once it is known (events don't carry it; the run read does).
    @discardableResult
    func setTimeout(stateID: String, timeoutAt: Int64) throws -> Bool {
        try write("UPDATE pauses SET timeout_at = ?2 WHERE state_id = ?1", [.text(stateID), .integer(timeoutAt)]) > 0
    }

    /// Every remembered pause, ended ones included: the watcher needs them to recognise replayed history.
    func allPauses() throws -> [PauseRecord] {
        try read("SELECT \(Store.pauseColumns) FROM pauses ORDER BY paused_at, state_id", row: Store.pause(from:))
    }

    /// Deletes pauses that ended before `cutoff` (the caller passes now minus a day), and any answers left for a
    /// pause or a device no longer stored. Returns how many pauses.
    @discardableResult
    func prunePauses(endedBefore cutoff: Int64) throws -> Int {
        let pauses = try statement("DELETE FROM pauses WHERE ended_at IS NOT NULL AND ended_at < ?1")
        let answers = try statement("""
            DELETE FROM push_answers WHERE NOT EXISTS (SELECT 1 FROM pauses p WHERE p.state_id = push_answers.state_id)
                OR NOT EXISTS (SELECT 1 FROM devices d WHERE d.id = push_answers.device_id)
            """)
        return try database.transaction {
            let pruned = try pauses.execute([.integer(cutoff)])
            try answers.execute([])
            return pruned
        }
    }

    // MARK: - Rows

    static func pause(from row: Statement) -> PauseRecord {
        PauseRecord(stateID: row.string(0), runID: row.string(1), stateName: row.string(2), pausedAt: row.int64(3),
                    timeoutAt: row.optionalInt64(4), announcedAt: row.optionalInt64(5),
                    remindedAt: row.optionalInt64(6), endedAt: row.optionalInt64(7), endedState: row.optionalString(8))
    }
}

// MARK: - Props

extension Store {
    /// What writing an announce's props found.
    enum PropsWrite: Equatable {
        case written
        /// The pause has props already (it was announced), or was stored as not to be announced.
        case alreadyAnnounced
        /// No such pause is stored (its record failed, or hasn't been written yet).
        case unrecorded
    }

    /// Keeps the props an announce was built from (JSON text), for the reminder and the end push: written onto its
    /// recorded pause, only if it has none and was recorded to be announced. The props mark a pause announced
    /// (`unannouncedPauses`), so a second announce of one pause writes nothing and sends nothing.
    @discardableResult
    func setProps(stateID: String, props: String) throws -> PropsWrite {
        if try write("""
            UPDATE pauses SET props = ?2 WHERE state_id = ?1 AND props IS NULL AND announced_at IS NOT NULL
            """, [.text(stateID), .text(props)]) > 0 {
            return .written
        }
        let announced = try read("""
            SELECT props IS NOT NULL OR announced_at IS NULL FROM pauses WHERE state_id = ?1
            """, [.text(stateID)]) {
            $0.int64(0) == 1
        }
        return announced.first == true ? .alreadyAnnounced : .unrecorded
    }

    /// Stores `props` in place of an announced pause's props while it waits. False when nothing changed: the
    /// props are the same, the pause ended or was never announced.
    func replaceProps(stateID: String, props: String) throws -> Bool {
        try write("""
            UPDATE pauses SET props = ?2
            WHERE state_id = ?1 AND props IS NOT NULL AND props != ?2 AND ended_at IS NULL
            """, [.text(stateID), .text(props)]) > 0
    }

    func props(stateID: String) throws -> String? {
        try read("SELECT props FROM pauses WHERE state_id = ?1", [.text(stateID)]) { $0.optionalString(0) }.first ?? nil
    }
}

// MARK: - Flow habits

extension Store {
    func flowHabits() throws -> [String: FlowHabits.Habit] {
        let rows = try read("SELECT flow_id, sends_context FROM flow_habits") {
            ($0.string(0), $0.int64(1) == 1 ? FlowHabits.Habit.sendsContext : .sendsNone)
        }
        return Dictionary(rows, uniquingKeysWith: { _, last in last })
    }

    func setFlowHabit(flowID: String, _ habit: FlowHabits.Habit, at time: Int64) throws {
        try write("""
            INSERT INTO flow_habits (flow_id, sends_context, updated_at) VALUES (?1, ?2, ?3)
            ON CONFLICT (flow_id) DO UPDATE SET sends_context = excluded.sends_context, updated_at = excluded.updated_at
            """, [.text(flowID), .integer(habit == .sendsContext ? 1 : 0), .integer(time)])
    }
}

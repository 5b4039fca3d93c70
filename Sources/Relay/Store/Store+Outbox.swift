import RelayCore

// MARK: - Outbox

extension Store {
    /// Writes every batch (one message row, one row per recipient) and runs `alongside` in the same transaction, so
    /// a fan-out and what it depends on (the pause's props, forgetting activity tokens) commit together or not at
    /// all. Returns the stored items, in batch order, ready to send; `dueMs` is when a drain may pick them up, and
    /// is kept as when the bodies were stored (`oldestPendingMs`).
    func enqueue(_ batches: [OutboxBatch], dueMs: Int64, alongside: () throws -> Void = {}) throws -> [OutboxItem] {
        let insertMessage = try statement("""
            INSERT INTO outbox_messages (state_id, run_id, purpose, push_type, topic, priority, collapse_id, expires_at,
                                         payload, created_ms)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
            """)
        // One row per token and message: a token registered under two device ids is sent the message once.
        let insertRow = try statement("""
            INSERT INTO outbox (message_id, device_id, token, due_ms) VALUES (?1, ?2, ?3, ?4)
            ON CONFLICT (message_id, token) DO NOTHING
            """)
        return try database.transaction {
            try alongside()
            var items: [OutboxItem] = []
            for batch in batches where !batch.recipients.isEmpty {
                let m = batch.message
                try insertMessage.execute([
                    .text(m.stateID), .text(m.runID), .text(m.purpose.rawValue), .text(m.kind.rawValue), .text(m.topic),
                    .integer(Int64(m.priority)), .text(m.collapseID), .integer(m.expiresAt), .text(m.payload),
                    .integer(dueMs),
                ])
                let messageID = database.lastInsertedRowID
                for (device, token) in batch.recipients {
                    guard try insertRow.execute([.integer(messageID), .text(device.id), .text(token), .integer(dueMs)]) > 0
                    else { continue }
                    items.append(OutboxItem(id: database.lastInsertedRowID, purpose: m.purpose, stateID: m.stateID,
                                            runID: m.runID, push: m.push(to: token, of: device), device: device,
                                            attempts: 0))
                }
            }
            return items
        }
    }

    /// Up to `limit` stored pushes due by `nowMs`, soonest first, with each device as it is stored now (its
    /// environment may have been corrected since the push was queued).
    func duePushes(nowMs: Int64, limit: Int) throws -> [OutboxItem] {
        try read("""
            SELECT o.id, o.token, o.attempts, m.state_id, m.run_id, m.purpose, m.push_type, m.topic, m.priority,
                   m.collapse_id, m.expires_at, m.payload, \(Store.deviceColumns(prefix: "d."))
            FROM outbox o JOIN outbox_messages m ON m.id = o.message_id JOIN devices d ON d.id = o.device_id
            WHERE o.due_ms <= ?1 ORDER BY o.due_ms, o.id LIMIT ?2
            """, [.integer(nowMs), .integer(Int64(limit))]) { row in
            let device = try Store.device(from: row, offset: 12)
            let message = OutboxMessage(stateID: row.string(3), runID: row.string(4),
                                        purpose: PushPurpose(rawValue: row.string(5)) ?? .alert,
                                        kind: Push.Kind(rawValue: row.string(6)) ?? .alert, topic: row.string(7),
                                        priority: Int(row.int64(8)), collapseID: row.optionalString(9),
                                        expiresAt: row.int64(10), payload: row.string(11))
            return OutboxItem(id: row.int64(0), purpose: message.purpose, stateID: message.stateID,
                              runID: message.runID, push: message.push(to: row.string(1), of: device), device: device,
                              attempts: Int(row.int64(2)))
        }
    }

    /// When the soonest stored push is due (unix ms), or nil when the outbox is empty; with `afterMs`, the soonest
    /// due later than that.
    func nextDueMs(afterMs: Int64 = .min) throws -> Int64? {
        try read("SELECT min(due_ms) FROM outbox WHERE due_ms > ?1", [.integer(afterMs)]) { $0.optionalInt64(0) }
            .first ?? nil
    }

    func outboxCount() throws -> Int { try count("SELECT count(*) FROM outbox") }

    /// When the oldest push still in the outbox was stored (unix ms), or nil when it is empty.
    func oldestPendingMs() throws -> Int64? {
        try read("SELECT min(m.created_ms) FROM outbox o JOIN outbox_messages m ON m.id = o.message_id", []) {
            $0.optionalInt64(0)
        }.first ?? nil
    }

    /// Applies a batch of answers in one transaction: settled rows are deleted, the others rescheduled, and a
    /// message whose last row went goes with it (its body is only read to send its rows). `answers` are kept for
    /// `prefect-push status` in the same transaction, for a pause still stored, waiting or ended (its end push's
    /// answers come after its end); `pruneAnswers` bounds what ended pauses keep.
    func settle(_ results: [(id: Int64, verdict: OutboxVerdict)], answers: [PushAnswer] = []) throws {
        guard !results.isEmpty || !answers.isEmpty else { return }
        let delete = try statement("DELETE FROM outbox WHERE id = ?1 RETURNING message_id")
        let reschedule = try statement("UPDATE outbox SET attempts = attempts + 1, due_ms = ?2 WHERE id = ?1")
        let deleteMessage = try statement("""
            DELETE FROM outbox_messages WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM outbox WHERE message_id = ?1)
            """)
        let keep = try statement("""
            INSERT INTO push_answers (state_id, device_id, purpose, status, reason, answered_ms)
            SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM pauses WHERE state_id = ?1)
            ON CONFLICT (state_id, device_id, purpose) DO UPDATE
            SET status = excluded.status, reason = excluded.reason, answered_ms = excluded.answered_ms
            """)
        try database.transaction {
            var messages: Set<Int64> = []
            for (id, verdict) in results {
                switch verdict {
                case .settled: messages.formUnion(try delete.query([.integer(id)]) { $0.int64(0) })
                case .retry(let at): _ = try reschedule.execute([.integer(id), .integer(Int64(at * 1000))])
                }
            }
            for message in messages { try deleteMessage.execute([.integer(message)]) }
            for a in answers {
                try keep.execute([.text(a.stateID), .text(a.deviceID), .text(a.purpose), .integer(Int64(a.status)),
                                  .text(a.reason), .integer(a.answeredMs)])
            }
        }
    }

    /// Drops what is no longer worth sending: pushes past their expiry, and message rows nothing points at.
    /// Returns how many pushes were dropped unsent.
    @discardableResult
    func pruneOutbox(now: Int64, wallMs: Int64 = 0) throws -> Int {
        try database.transaction {
            // What status shows for them: dropped unsent at their expiry. (SQLite's upsert after a SELECT needs its
            // WHERE to parse.)
            try statement("""
                INSERT INTO push_answers (state_id, device_id, purpose, status, reason, answered_ms)
                SELECT m.state_id, o.device_id, m.purpose, 0, ?2, ?3
                FROM outbox o JOIN outbox_messages m ON m.id = o.message_id JOIN pauses p ON p.state_id = m.state_id
                WHERE m.expires_at <= ?1
                ON CONFLICT (state_id, device_id, purpose) DO UPDATE
                SET status = excluded.status, reason = excluded.reason, answered_ms = excluded.answered_ms
                """).execute([.integer(now), .text(PushAnswer.expired), .integer(wallMs)])
            let expired = try statement("""
                DELETE FROM outbox WHERE message_id IN (SELECT id FROM outbox_messages WHERE expires_at <= ?1)
                """).execute([.integer(now)])
            try statement("""
                DELETE FROM outbox_messages WHERE NOT EXISTS (SELECT 1 FROM outbox WHERE message_id = outbox_messages.id)
                """).execute([])
            return expired
        }
    }
}

import RelayCore

// MARK: - Outbox

extension Store {
    /// Writes every batch and runs `alongside` in the same transaction, so a fan-out and what it depends on (the
    /// pause's props, forgetting activity tokens) commit together or not at all: one message row each, and one row
    /// per recipient, unless the batch has an audience (a fan-out to the registry), whose message row alone is
    /// written, open (`FanOutAudience`). Returns the items, in batch order, ready to send (a fan-out's members with
    /// row id 0, one per token); `dueMs` is when a drain may pick them up, and is kept as when the bodies were stored
    /// (`oldestPendingMs`).
    func enqueue(_ batches: [OutboxBatch], dueMs: Int64, alongside: () throws -> Void = {}) throws -> [OutboxItem] {
        let insertMessage = try statement("""
            INSERT INTO outbox_messages (state_id, run_id, purpose, push_type, topic, priority, collapse_id, expires_at,
                                         payload, created_ms, audience, audience_server, audience_before, open)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
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
                let audience = batch.audience
                try insertMessage.execute([
                    .text(m.stateID), .text(m.runID), .text(m.purpose.rawValue), .text(m.kind.rawValue), .text(m.topic),
                    .integer(Int64(m.priority)), .text(m.collapseID), .integer(m.expiresAt), .text(m.payload),
                    .integer(dueMs), .text(audience?.token.rawValue), .text(audience?.serverID),
                    audience.map { .integer($0.registeredBy) } ?? .null, .integer(audience == nil ? 0 : 1),
                ])
                let messageID = database.lastInsertedRowID
                // A fan-out's member for a token is its first device id, as `fanout_members` names it (its answer is
                // noted by that id): the position of each token's member among `items`.
                var members: [String: Int] = [:]
                if audience != nil { members.reserveCapacity(batch.recipients.count) }
                for (device, token) in batch.recipients {
                    let row: Int64
                    if audience != nil {
                        if let at = members[token] {
                            // SQLite's BINARY order, as min() compares
                            if device.id.utf8.lexicographicallyPrecedes(items[at].device.id.utf8) {
                                items[at] = m.item(id: 0, messageID, to: token, of: device)
                            }
                            continue
                        }
                        members[token] = items.count
                        row = 0
                    } else {
                        guard try insertRow.execute([.integer(messageID), .text(device.id), .text(token), .integer(dueMs)]) > 0
                        else { continue }
                        row = database.lastInsertedRowID
                    }
                    items.append(m.item(id: row, messageID, to: token, of: device))
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
                   m.collapse_id, m.expires_at, m.payload, \(Store.deviceColumns(prefix: "d.")), o.message_id
            FROM outbox o JOIN outbox_messages m ON m.id = o.message_id JOIN devices d ON d.id = o.device_id
            WHERE o.due_ms <= ?1 ORDER BY o.due_ms, o.id LIMIT ?2
            """, [.integer(nowMs), .integer(Int64(limit))]) { row in
            let device = try Store.device(from: row, offset: 12)
            let message = OutboxMessage(stateID: row.string(3), runID: row.string(4),
                                        purpose: PushPurpose(rawValue: row.string(5)) ?? .alert,
                                        kind: Push.Kind(rawValue: row.string(6)) ?? .alert, topic: row.string(7),
                                        priority: Int(row.int64(8)), collapseID: row.optionalString(9),
                                        expiresAt: row.int64(10), payload: row.string(11))
            return OutboxItem(id: row.int64(0), messageID: row.int64(19), purpose: message.purpose, stateID: message.stateID,
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

    /// Pushes not yet answered (rows, and the members of open fan-outs with no answer written), and when the oldest
    /// was stored (unix ms; nil when there is none): one read of `pending_pushes` for both.
    func pendingSummary() throws -> (count: Int, oldestMs: Int64?) {
        try read("SELECT count(*), min(m.created_ms) FROM pending_pushes p JOIN outbox_messages m ON m.id = p.message_id") {
            (Int($0.int64(0)), $0.optionalInt64(1))
        }.first ?? (0, nil)
    }

    func outboxCount() throws -> Int { try pendingSummary().count }

    func oldestPendingMs() throws -> Int64? { try pendingSummary().oldestMs }

    /// Applies a batch of answers in one transaction: settled rows are deleted, the others rescheduled, and a
    /// message whose last row went goes with it (its body is only read to send its rows). A fan-out member's answer
    /// is noted (`fanout_sent`), and one to be tried again becomes a row; `closing` are fan-outs whose last answers
    /// are in this batch: their notes go and the message with them unless rows remain. `answers` are kept for
    /// `prefect-push status` in the same transaction, for a pause still stored, waiting or ended (its end push's
    /// answers come after its end); `pruneAnswers` bounds what ended pauses keep.
    func settle(_ results: [OutboxSettlement], answers: [PushAnswer] = [], closing: [Int64] = []) throws {
        guard !results.isEmpty || !answers.isEmpty || !closing.isEmpty else { return }
        let delete = try statement("DELETE FROM outbox WHERE id = ?1 RETURNING message_id")
        let reschedule = try statement("UPDATE outbox SET attempts = attempts + 1, due_ms = ?2 WHERE id = ?1")
        let deleteMessage = try statement("""
            DELETE FROM outbox_messages WHERE id = ?1 AND open = 0 AND NOT EXISTS (SELECT 1 FROM outbox WHERE message_id = ?1)
            """)
        let note = try statement("INSERT INTO fanout_sent (message_id, device_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING")
        // A member to try again becomes a row, unless its device (or the message, past its expiry) went meanwhile.
        let keepTrying = try statement("""
            INSERT INTO outbox (message_id, device_id, token, attempts, due_ms)
            SELECT ?1, ?2, ?3, 1, ?4 WHERE EXISTS (SELECT 1 FROM devices WHERE id = ?2)
                AND EXISTS (SELECT 1 FROM outbox_messages WHERE id = ?1)
            ON CONFLICT (message_id, token) DO UPDATE SET attempts = attempts + 1, due_ms = excluded.due_ms
            """)
        let keep = try statement("""
            INSERT INTO push_answers (state_id, device_id, purpose, status, reason, answered_ms)
            SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM pauses WHERE state_id = ?1)
            ON CONFLICT (state_id, device_id, purpose) DO UPDATE
            SET status = excluded.status, reason = excluded.reason, answered_ms = excluded.answered_ms
            """)
        try database.transaction {
            var messages: Set<Int64> = []
            for result in results {
                switch (result.isFanOutMember, result.verdict) {
                case (false, .settled): messages.formUnion(try delete.query([.integer(result.id)]) { $0.int64(0) })
                case (false, .retry(let at)): _ = try reschedule.execute([.integer(result.id), .integer(Int64(at * 1000))])
                case (true, let verdict):
                    _ = try note.execute([.integer(result.messageID), .text(result.deviceID)])
                    if case .retry(let at) = verdict {
                        _ = try keepTrying.execute([.integer(result.messageID), .text(result.deviceID), .text(result.token),
                                                    .integer(Int64(at * 1000))])
                    }
                }
            }
            for message in closing {
                try closeFanOut(message)
                messages.insert(message)
            }
            for message in messages { try deleteMessage.execute([.integer(message)]) }
            for a in answers {
                try keep.execute([.text(a.stateID), .text(a.deviceID), .text(a.purpose), .integer(Int64(a.status)),
                                  .text(a.reason), .integer(a.answeredMs)])
            }
        }
    }

    /// Drops what is no longer worth sending: pushes past their expiry, and message rows nothing points at. An open
    /// fan-out past its expiry goes too, unless it is `live` (being answered now): its members with no answer are
    /// dropped unsent like rows. Returns how many pushes were dropped unsent.
    @discardableResult
    func pruneOutbox(now: Int64, wallMs: Int64 = 0, live: Set<Int64> = []) throws -> Int {
        try database.transaction {
            let stale = try read("SELECT id FROM outbox_messages WHERE open = 1 AND expires_at <= ?1", [.integer(now)]) {
                $0.int64(0)
            }.filter { !live.contains($0) }
            // What status shows for them: dropped unsent at their expiry. (SQLite's upsert after a SELECT needs its
            // WHERE to parse.) Open fan-outs' members count only for the ones closed here.
            let expiredAnswers = try statement("""
                INSERT INTO push_answers (state_id, device_id, purpose, status, reason, answered_ms)
                SELECT m.state_id, p.device_id, m.purpose, 0, ?2, ?3
                FROM pending_pushes p JOIN outbox_messages m ON m.id = p.message_id JOIN pauses ps ON ps.state_id = m.state_id
                WHERE m.expires_at <= ?1 AND (m.open = 0 OR m.id = ?4)
                ON CONFLICT (state_id, device_id, purpose) DO UPDATE
                SET status = excluded.status, reason = excluded.reason, answered_ms = excluded.answered_ms
                """)
            try expiredAnswers.execute([.integer(now), .text(PushAnswer.expired), .integer(wallMs), .integer(0)])
            var dropped = 0
            for message in stale {
                dropped += try count("SELECT count(*) FROM fanout_unanswered WHERE message_id = ?1", [.integer(message)])
                try expiredAnswers.execute([.integer(now), .text(PushAnswer.expired), .integer(wallMs), .integer(message)])
                try closeFanOut(message)
            }
            dropped += try statement("""
                DELETE FROM outbox WHERE message_id IN (SELECT id FROM outbox_messages WHERE expires_at <= ?1)
                """).execute([.integer(now)])
            try statement("""
                DELETE FROM outbox_messages
                WHERE open = 0 AND NOT EXISTS (SELECT 1 FROM outbox WHERE message_id = outbox_messages.id)
                """).execute([])
            return dropped
        }
    }
}

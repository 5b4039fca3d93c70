import RelayCore

// MARK: - Fan-outs written as their audience

extension Store {
    /// Ends an open fan-out's bookkeeping once every member's answer is written (or at its expiry): its notes go, and
    /// the message stays only for the rows still to be tried again (the caller deletes it otherwise).
    func closeFanOut(_ message: Int64) throws {
        _ = try statement("UPDATE outbox_messages SET open = 0 WHERE id = ?1").execute([.integer(message)])
        _ = try statement("DELETE FROM fanout_sent WHERE message_id = ?1").execute([.integer(message)])
    }

    /// At start-up, before anything is sent: each fan-out left open by the last run (killed, or stopped with answers
    /// unwritten) becomes outbox rows for its members with no answer written, due at once, and is closed; the drain
    /// sends them like any stored push. Members are the devices of its audience as the registry holds them now: one
    /// deleted meanwhile is not sent to; one token for two device ids is sent once. Returns (fan-outs, rows).
    @discardableResult
    func reopenFanOuts() throws -> (fanOuts: Int, pushes: Int) {
        try database.transaction {
            let open = try count("SELECT count(*) FROM outbox_messages WHERE open = 1")
            guard open > 0 else { return (0, 0) }
            let pushes = try statement("""
                INSERT INTO outbox (message_id, device_id, token, due_ms)
                SELECT message_id, device_id, token, 0 FROM fanout_unanswered WHERE 1
                ON CONFLICT (message_id, token) DO NOTHING
                """).execute([])
            // Notes of open fan-outs, and of fan-outs whose message went while they were open (their pause ended).
            try statement("""
                DELETE FROM fanout_sent WHERE message_id IN (SELECT id FROM outbox_messages WHERE open = 1)
                    OR message_id NOT IN (SELECT id FROM outbox_messages)
                """).execute([])
            try statement("UPDATE outbox_messages SET open = 0 WHERE open = 1").execute([])
            try statement("""
                DELETE FROM outbox_messages
                WHERE open = 0 AND NOT EXISTS (SELECT 1 FROM outbox WHERE message_id = outbox_messages.id)
                """).execute([])
            return (open, pushes)
        }
    }
}

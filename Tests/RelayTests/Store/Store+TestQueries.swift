@testable import Relay
@testable import RelayCore

/// Reads the tests make of the store that the relay itself never needs.
extension Store {
    func pause(stateID: String) throws -> PauseRecord? {
        try read("SELECT \(Store.pauseColumns) FROM pauses WHERE state_id = ?1", [.text(stateID)],
                 row: Store.pause(from:)).first
    }

    /// Pauses not yet ended, oldest first.
    func waitingPauses() throws -> [PauseRecord] {
        try read("SELECT \(Store.pauseColumns) FROM pauses WHERE ended_at IS NULL ORDER BY paused_at, state_id",
                 row: Store.pause(from:))
    }

    func waitingCount() throws -> Int {
        try count("SELECT count(*) FROM pauses WHERE ended_at IS NULL")
    }

    /// The waiting pause of a run, if any (the newest, should there ever be two).
    func waitingPause(runID: String) throws -> PauseRecord? {
        try read("""
            SELECT \(Store.pauseColumns) FROM pauses WHERE run_id = ?1 AND ended_at IS NULL
            ORDER BY paused_at DESC LIMIT 1
            """, [.text(runID)], row: Store.pause(from:)).first
    }
}

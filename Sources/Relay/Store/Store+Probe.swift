extension Store {
    /// One real write: the header's `user_version` rewritten with the value it holds, in its own transaction. It
    /// takes the write lock and appends a page to the WAL, so it fails as a pause or a registration would (lock,
    /// full disk, I/O error). Run only while writes are failing, to see when they work again (`/health`).
    func probeWrite() throws {
        try database.transaction { try database.execute("PRAGMA user_version = \(Store.migrations.count)") }
    }
}

import RelayCore

/// The registry's reads and writes for the API: devices and their Live Activity tokens. A failure is thrown to the
/// API, which tells the caller whether to try again (`API.storageFailure`).
extension Ledger {
    /// Registers or refreshes a device; a new one only below `maxDevices` (a refresh of a known device always
    /// passes). nil: the registry is full.
    func register(_ registration: DeviceRegistration, maxDevices: Int, now: Int64) throws -> Device? {
        let (device, isNew) = try attemptThrowing("register") { store -> (Device?, Bool) in
            let isNew = try store.device(id: registration.id) == nil
            if maxDevices < .max, isNew, try store.deviceCount() >= maxDevices { return (nil, false) }
            return (try store.upsertDevice(registration, now: now), isNew)
        }
        if device != nil { succeeded() }  // a row written: the store can write
        if isNew && device != nil { countDevices { $0.devicesRegistered += 1 } }
        return device
    }

    /// Whether there was such a device to delete.
    func unregister(id: String) throws -> Bool {
        let deleted = try attemptThrowing("unregister") { try $0.deleteDevice(id: id) }
        if deleted {
            succeeded()
            countDevices { $0.devicesUnregistered += 1 }
        }
        return deleted
    }

    /// Whether the device is known (the token is stored only then).
    func setActivity(deviceID: String, runID: String, token: String) throws -> Bool {
        let stored = try attemptThrowing("activity") { try $0.setActivityToken(deviceID: deviceID, runID: runID, token: token) }
        if stored { succeeded() }
        return stored
    }

    func device(id: String) throws -> Device? {
        try attemptThrowing("device") { try $0.device(id: id) }
    }

    /// What `/health` and `/metrics` need from the store: its failure streak, whether the file is still ours, and
    /// the device count (nil when it could not be read).
    struct Health: Sendable {
        var streak: FailureStreak
        var fileIsStillOurs: Bool
        var devices: Int?
        /// The store connection's page cache (`Store.cacheBytes`).
        var cacheBytes: Int?
    }

    /// `countingDevices` false: the tick's health watch, which needs no count (a scan of the devices table).
    func health(countingDevices: Bool = true) -> Health {
        let devices = countingDevices ? attempt("health") { try $0.deviceCount() } : nil
        return Health(streak: streak, fileIsStillOurs: store.fileIsStillOurs, devices: devices,
                      cacheBytes: store.cacheBytes)
    }
}

import RelayCore

/// The relay's one owner of state: the SQLite store (one connection, touched only here), the Watcher's memory,
/// the live status `/health` reports and the metrics. The API, the events socket's messages and the notifier's
/// APNs answers all come through it, one at a time (see `Coordinator+Watcher.swift`, `Coordinator+Devices.swift`).
actor Coordinator {
    /// On the relay's one executor thread, with the tasks that call it (`RelayExecutor`).
    nonisolated var unownedExecutor: UnownedSerialExecutor { RelayExecutor.shared.asUnownedSerialExecutor() }

    let store: Store
    let prefect: PrefectClient
    let apnsConfigured: Bool
    var subscribed = false
    /// The events socket's last attempt was refused for its credential (close 1008, upgrade 401/403).
    var authRejected = false
    /// When the events socket last went down, or the relay started (monotonic seconds); read while not subscribed.
    var socketDownSince = SystemClock.monotonic()
    /// Store failures since the last write that worked (`Coordinator+Health.swift`).
    var storeStreak = FailureStreak()
    var lastStoreProbe = 0.0
    /// The last verdict `watchHealth` logged; the relay starts healthy.
    var wasHealthy = true
    let healthBounds: HealthBounds
    var watcher: Watcher
    var lastListing = -Double.infinity
    var metrics = Metrics()
    var recentEvents = RecentRunEvents()
    /// Announces waiting for a late custom event, by run (`Coordinator+LiveEvents.swift`).
    var liveWaiters: [String: [LiveWaiter]] = [:]
    var lastLiveWaiter = 0
    /// Announced pauses still waiting, with how many of their run's live events and artifacts their stored props
    /// were built with: one that comes later refreshes them (`refreshIfBehind`). The counts are this process's own:
    /// a start sets every announced waiting pause to 0.
    var propsArrivals: [String: Int] = [:]
    var habits: FlowHabits
    /// Set once at start-up, before any event arrives (it needs the relay itself).
    var notifier: Notifier?
    /// Announce / remind / end work and outbox sends still running (shutdown waits for it, bounded).
    var backgroundWork = 0
    /// Pause jobs owed and not yet done (see `PauseJob`), their retry times, and the ones running now.
    var jobs: [String: PauseJob] = [:]
    var jobRetries = RetryTimes()
    var runningJobs: Set<String> = []
    /// Runs whose latest state could not be recorded (store failure): read again on the retry schedule.
    var unrecordedRuns = RetryTimes()
    /// Outbox rows being sent now (never picked up twice), answers waiting to be written, and when the soonest
    /// stored push is due (unix ms; nil: nothing stored).
    var sending: Set<Int64> = []
    var settling: [(id: Int64, verdict: OutboxVerdict)] = []
    /// A flush of `settling` is due within `settleDelay` (`flushSoon`).
    var settleTimerArmed = false
    var nextDueMs: Int64?
    var lastOutboxPrune = 0.0
    let schedule = OutboxSchedule()
    let now: @Sendable () -> Double

    init(store: consuming Store, prefect: PrefectClient, apnsConfigured: Bool, healthBounds: HealthBounds = HealthBounds(),
         now: @escaping @Sendable () -> Double = SystemClock.unixNow) throws {
        watcher = Watcher(pauses: try store.allPauses())
        // Pauses whose announce never reached the outbox before the last stop, ended pauses whose Live Activities
        // were never ended, and pushes still stored: all resume.
        let started = now()
        let unannounced = try store.unannouncedPauses()
        let unended = try store.pausesWithActivitiesLeft(endedAfter: Int64(started) - PauseJob.endRetryWindow)
        let unfinished = unannounced.map { ($0, PauseJob.Kind.announce(nil)) } + unended.map { ($0, PauseJob.Kind.end) }
        for (stateID, kind) in unfinished {
            guard let pause = watcher.pauses[stateID] else { continue }
            let job = PauseJob(kind, pause)
            jobs[job.key] = job
            jobRetries.now(job.key, at: started)
        }
        // Announced before this start, with props built from events this process never saw: any custom event or
        // artifact that comes for the run from now on may be news, so it gets the props built again (a refresh
        // that finds them unchanged sends nothing).
        let withoutProps = Set(unannounced)
        for pause in watcher.pauses.values
        where pause.isWaiting && pause.announcedAt != nil && !withoutProps.contains(pause.stateID) {
            propsArrivals[pause.stateID] = 0
        }
        nextDueMs = try store.nextDueMs()
        habits = FlowHabits(known: try store.flowHabits())
        self.store = store
        self.prefect = prefect
        self.apnsConfigured = apnsConfigured
        self.healthBounds = healthBounds
        self.now = now
    }

    func attach(_ notifier: Notifier) { self.notifier = notifier }

    // MARK: - API

    func register(_ registration: DeviceRegistration, maxDevices: Int = .max) -> APIResponse {
        do {
            // MAX_DEVICES: a refresh of a known device always passes; a new one only below the cap.
            if maxDevices < .max, try store.device(id: registration.id) == nil, try store.deviceCount() >= maxDevices {
                return APIError(status: 409, message: "the relay already holds \(maxDevices) devices (MAX_DEVICES); "
                                + "unregister one, or raise MAX_DEVICES").response
            }
            let device = try store.upsertDevice(registration, now: Int64(now()))
            storeWrote()
            Log.info("device.registered", ["device": registration.id, "token": Log.short(registration.token),
                                           "environment": registration.environment.rawValue,
                                           "start_token": registration.startToken == nil ? "no" : "yes"])
            return APIResponse(status: 200, json: device.json)
        } catch {
            return storageFailure(error)
        }
    }

    func unregister(id: String) -> APIResponse {
        do {
            guard try store.deleteDevice(id: id) else { return APIError.notFound("no device with id \(id)").response }
            storeWrote()
            Log.info("device.unregistered", ["device": id])
            return .noContent
        } catch {
            return storageFailure(error)
        }
    }

    func setActivity(deviceID: String, runID: String, token: String) -> APIResponse {
        do {
            guard try store.setActivityToken(deviceID: deviceID, runID: runID, token: token) else {
                return APIError.notFound("no device with id \(deviceID); register it first with POST /devices").response
            }
            storeWrote()
            Log.info("activity.registered", ["device": deviceID, "run": runID, "token": Log.short(token)])
            return .noContent
        } catch {
            return storageFailure(error)
        }
    }

    func testPush(deviceID: String) async -> APIResponse {
        let device: Device
        do {
            guard let found = try store.device(id: deviceID) else {
                return APIError.notFound("no device with id \(deviceID)").response
            }
            device = found
        } catch {
            return storageFailure(error)
        }
        guard let notifier else { return APIError.unavailable("the relay is starting; try again").response }
        return await notifier.test(device)
    }

    private func storageFailure(_ error: any Error) -> APIResponse {
        storeFailed(["error": "\(error)"])
        if let sqlite = error as? SQLiteError, ["busy", "full"].contains(sqlite.kind) {
            // Passing: another process holds the lock, or the disk is full for now. Nothing was written.
            return APIError.unavailable("the registry is \(sqlite.kind == "busy" ? "locked by another process" : "on a full disk")"
                                        + "; nothing was changed, try again in a few seconds").response
        }
        return APIError(status: 500, message: "the registry could not be read or written; see the relay's log").response
    }
}

extension Coordinator {
    /// Checkpoints the store's WAL at shutdown, after the background checkpointer has stopped (so the two never
    /// contend); the connection itself closes with the process.
    func checkpoint() {
        store.stopCheckpointing()
        do { try store.database.execute("PRAGMA wal_checkpoint(TRUNCATE)") } catch {
            Log.warn("store.checkpoint_failed", ["error": "\(error)"])
        }
    }
}

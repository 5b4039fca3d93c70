import RelayCore

/// The relay's owners, built in one place, each given what it uses: nothing is attached later, and each holds
/// references only to those it calls (`docs/architecture.md` draws them).
///
/// - `Ledger`: the store's one connection;
/// - `OutboxSender`: the outbox (what is being sent, answers to write, resends) and the APNs client;
/// - `PauseTracker`: the PauseWatcher, the pause jobs and what the socket told about each run;
/// - `PushPlanner`: the batches for a pause, as values;
/// - `RelayStatus`: health and metrics, read from the others.
struct RelayOwners: Sendable {
    let tally: MetricsTally
    let ledger: Ledger
    let outbox: OutboxSender
    let planner: PushPlanner
    let tracker: PauseTracker
    let status: RelayStatus

    /// Throws when the store can't be read at start-up (what it holds is where the relay picks up). `now` is the
    /// wall clock (what Prefect and APNs see), `steady` the clock of retries and intervals (`SystemClock.steadyNow`).
    /// `credentialHTTP`: the API's credential checks' pool, whose counts `/metrics` adds to Prefect's reads'.
    init(store: sending Store, prefect: PrefectClient, readAhead: RunReadAhead? = nil, apns: APNsClient?,
         uiRoot: String, topic: String, healthBounds: HealthBounds = HealthBounds(), credentialHTTP: HTTPPool? = nil,
         now: @escaping @Sendable () -> Double = SystemClock.unixNow,
         steady: @escaping @Sendable () -> Double = SystemClock.steadyNow) throws {
        tally = MetricsTally()
        let startup = try Ledger.Startup(reading: store, now: now())
        ledger = Ledger(store: store, tally: tally)
        outbox = OutboxSender(ledger: ledger, apns: apns, nextDueMs: startup.nextDueMs, tally: tally, now: steady)
        planner = PushPlanner(uiRoot: uiRoot, topic: topic)
        let runner = PauseJobs(outbox: outbox, ledger: ledger,
                               gatherer: ContextGatherer(prefect: prefect, readAhead: readAhead), planner: planner,
                               now: now)
        tracker = PauseTracker(ledger: ledger, startup: startup, prefect: prefect, runner: runner, tally: tally, now: now,
                               steady: steady)
        status = RelayStatus(tracker: tracker, ledger: ledger, outbox: outbox, apnsConfigured: apns != nil,
                             bounds: healthBounds, restPools: [prefect.http] + (credentialHTTP.map { [$0] } ?? []))
    }
}

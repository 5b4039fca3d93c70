import Glibc
import RelayCore

/// The relay's start-up and shutdown, wiring only: config → store → APNs → loop (HTTP API, Prefect client,
/// events socket) → wait for a signal → finish in-flight pushes → close. The `prefect-push` executable calls
/// `RelayMain.run()`; everything else in the module stays internal.
package enum RelayMain {
    /// The environment as it was at start-up, before `launch` took lws's `http_proxy` out of it.
    static func environment() -> [String: String] { startEnvironment }

    private static let startEnvironment: [String: String] = {
        var env: [String: String] = [:]
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            if let eq = text.firstIndex(of: "=") {
                env[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            cursor += 1
        }
        return env
    }()

    static func fail(_ message: String) -> Never {
        Log.error("startup.failed", ["error": message])
        exit(2)
    }

    static let versionUsage = "--version    print the version and commit; with --verbose, also one line per library "
        + "built in or loaded, name version (linkage), as the image's SBOM lists them"

    static let schemaUsage = "schema       print the store schema version this binary writes (a store with another is "
        + "migrated up at start, or refused if newer), then exit"

    static func usage() -> String {
        var text = """
            prefect-push \(BuildInfo.version): tells phones when a Prefect flow run starts waiting on a person.

            usage: prefect-push [check | \(StatusQuery.synopsis) | backup FILE | restore FILE | schema
                   | health | --help | --version [--verbose]]
              \(CheckCommand.usage)
              \(StatusCommand.usage)
              \(BackupCommand.usage)
              \(RestoreCommand.usage)
              \(schemaUsage)
              \(HealthCommand.usage)
              \(versionUsage)
            Configuration comes from the environment:

            """
        let width = Settings.all.map(\.name.count).max() ?? 0
        for variable in Settings.all {
            let pad = String(repeating: " ", count: width - variable.name.count + 2)
            text += "  \(variable.name)\(pad)\(variable.meaning) (default: \(variable.defaultValue))\n"
        }
        return text
    }


    /// The executable's entry: SIGTERM/SIGINT routed to the orderly shutdown, the relay started on the concurrency
    /// runtime's pool, and the main thread parked for good. A top-level `await` would instead hand the main thread to
    /// `dispatch_main()`, which ends it with `pthread_exit`: a forced unwind that searches the binary's unwind tables
    /// and keeps ~0.4 MB of their pages resident for nothing. Nothing in the relay runs on the main actor.
    ///
    /// The main thread waits in `sigsuspend` with an empty mask, as `dispatch_main()` did: it is the thread that
    /// takes SIGTERM and SIGINT even when the relay was started with them blocked (a mask inherited through exec,
    /// from a supervisor's worker thread), since every other thread of the relay blocks them.
    package static func launch() -> Never {
        Allocator.configure()
        // libwebsockets reads `http_proxy` itself when a context is made, ignoring NO_PROXY: `ProxyRule` decides
        // for every connection instead, so lws must not see it. Read the environment first, then drop it (still
        // one thread here).
        _ = environment()
        unsetenv("http_proxy")
        Signals.install()
        Task.detached(executorPreference: RelayExecutor.shared) { await run() }
        var none = sigset_t()
        sigemptyset(&none)
        while true { sigsuspend(&none) }
    }

    private static func run() async -> Never {
        await handleCommand()
        Hardening.disableCoreDumps()
        // First, so that even a configuration error is written in the format asked for (a bad value: logfmt).
        Log.setFormat((try? Config.logFormat(environment: environment())) ?? .logfmt)
        // Before the settings are read: a misspelt variable is often why they are refused.
        for miss in NearMissVariables.find(in: environment().keys) {
            Log.warn("config.unknown_variable", ["variable": miss.given, "did_you_mean": miss.known,
                                                 "note": "not a setting the relay reads; rename or remove it"])
        }
        let config: Config
        do { config = try Config(environment: environment()) } catch { fail(error.description) }
        Log.setLevel(config.logLevel)
        let budget = Descriptors.prepare()
        await Descriptors.warmUpDispatch()
        let parts = build(config)
        let running = start(parts, config: config, budget: budget)
        let stopSignal = await Signals.next()
        Log.info("relay.stopping", ["signal": stopSignal == SIGTERM ? "SIGTERM" : "SIGINT"])
        await stop(running, parts)
        Log.info("relay.stopped")
        exit(0)
    }

    /// `--help`, `--version`, `check`, `status`, `backup`, `restore`, `schema` and `health` run and exit here; no
    /// argument goes on to run the relay.
    private static func handleCommand() async {
        switch CommandLine.arguments.dropFirst().first {
        case "--help", "-h", "help":
            print(usage(), terminator: "")
            exit(0)
        case "--version", "-V", "version":
            switch CommandLine.arguments.dropFirst(2).first {
            case nil: print(BuildInfo.versionLine)
            case "--verbose", "-v": print(BuildInfo.verboseText, terminator: "")
            case let other?:
                Stderr.write("unknown argument \(other) after --version; see prefect-push --help\n")
                exit(2)
            }
            exit(0)
        case "check":
            exit(await CheckCommand.run(environment: environment()))
        case "status":
            exit(StatusCommand.run(arguments: Array(CommandLine.arguments.dropFirst(2)), environment: environment()))
        case "backup":
            exit(BackupCommand.run(arguments: Array(CommandLine.arguments.dropFirst(2)), environment: environment()))
        case "health":
            exit(await HealthCommand.run(arguments: Array(CommandLine.arguments.dropFirst(2)), environment: environment()))
        case "restore":
            exit(RestoreCommand.run(arguments: Array(CommandLine.arguments.dropFirst(2)), environment: environment()))
        case "schema":
            guard CommandLine.arguments.count == 2 else {
                Stderr.write("usage: prefect-push schema (takes no arguments)\n")
                exit(2)
            }
            print(Store.migrations.count)
            exit(0)
        case nil:
            return
        case let other?:
            Stderr.write("unknown argument \(other); see prefect-push --help\n")
            exit(2)
        }
    }

    /// The relay's parts, each owning its C handles or its state.
    private struct Parts {
        let apns: APNsClient?
        let prefectHTTP: HTTPPool
        /// The API's credential checks' own connections.
        let credentialHTTP: HTTPPool
        let prefect: PrefectClient
        let readAhead: RunReadAhead
        let owners: RelayOwners
    }

    private static func build(_ config: Config) -> Parts {
        let store: Store
        do { store = try Store(path: config.dbPath) } catch { fail("DB_PATH: \(error)") }
        let apns: APNsClient?
        do { apns = try Wiring.apnsClient(config) } catch { fail("\(error)") }
        let prefectHTTP: HTTPPool
        let credentialHTTP: HTTPPool
        do {
            prefectHTTP = try Wiring.prefectPool(config)
            credentialHTTP = try Wiring.credentialPool(config)
        } catch {
            fail("\(error)")
        }
        let prefect = PrefectClient(config: config, http: prefectHTTP)
        let readAhead = RunReadAhead(prefect: prefect)
        let owners: RelayOwners
        do {
            owners = try RelayOwners(store: store, prefect: prefect, readAhead: readAhead, apns: apns, uiRoot: config.prefectUI,
                                     topic: config.apnsTopic, healthBounds: HealthBounds(grace: Double(config.healthGrace),
                                                                              startup: Double(config.healthStartup)),
                                     credentialHTTP: credentialHTTP)
        } catch {
            fail("DB_PATH: \(error)")
        }
        return Parts(apns: apns, prefectHTTP: prefectHTTP, credentialHTTP: credentialHTTP, prefect: prefect, readAhead: readAhead, owners: owners)
    }

    /// What runs until the stop signal: the two lws loops and what they drive, the socket's stream and the ticker.
    private struct Running {
        let loop: WebSocketsLoop
        let apiLoop: WebSocketsLoop
        let metricsLoop: WebSocketsLoop?
        let socketSink: AsyncStream<SocketMessage>.Continuation
        let ticker: Task<Void, Never>
    }

    private static func start(_ parts: Parts, config: Config, budget: DescriptorBudget) -> Running {
        let (owners, tracker) = (parts.owners, parts.owners.tracker)
        let server = apiServer(parts, config: config, budget: budget)
        // Socket messages reach the relay one at a time, in order. Bounded: if the relay ever fell this far behind,
        // the oldest events go first; the paused listing (every 60 s and on each subscribe) recovers what they carried.
        let (socketMessages, socketSink) = AsyncStream.makeStream(of: SocketMessage.self,
                                                                  bufferingPolicy: .bufferingNewest(10_000))
        let readAhead = parts.readAhead
        let events = EventsSocket(config: config) { message in
            readAhead.consider(message)
            socketSink.yield(message)
        }
        // Two contexts, two threads: API clients can't starve the relay's own Prefect connections.
        let loop: WebSocketsLoop
        let apiLoop: WebSocketsLoop
        let metricsLoop: WebSocketsLoop?
        do {
            loop = try Wiring.eventsLoop(config, events: events)
            apiLoop = try WebSocketsLoop(settings: .init(port: config.port, clientTLS: false,
                                                         maxConnections: budget.apiConnections,
                                                         bindAddress: config.apiBind, threadName: "pp-api"),
                                         handlers: [server])
            metricsLoop = try config.metricsPort.map { port throws(StartupError) in
                try MetricsListener.start(port: port, bind: config.metricsBind, status: owners.status)
            }
        } catch {
            fail("\(error)")
        }
        do {
            try loop.start()
            try apiLoop.start()
        } catch {
            fail("\(error)")
        }
        logStarted(config, apiPort: apiLoop.listenPort ?? config.port, metrics: metricsLoop?.listenAddress,
                   apns: parts.apns != nil)
        if config.prefectAuthorization == nil { warnIfOpen(parts.prefect) }
        _ = Task(executorPreference: RelayExecutor.shared) {
            for await message in socketMessages { await tracker.received(message) }
        }
        let ticker = startTicker(owners)
        loop.startEvents()
        return Running(loop: loop, apiLoop: apiLoop, metricsLoop: metricsLoop, socketSink: socketSink, ticker: ticker)
    }

    /// The HTTP API: its handlers on the API's executor, its credential checks on connections of their own (up to
    /// `Authorizer.maxConcurrentChecks` may hang at Prefect without a pause's reads waiting behind them).
    private static func apiServer(_ parts: Parts, config: Config, budget: DescriptorBudget) -> HTTPServer {
        let owners = parts.owners
        let checks = PrefectClient(config: config, http: parts.credentialHTTP)
        let authorizer = Authorizer(check: { header in await checks.checkCredential(header) })
        let api = API(ledger: owners.ledger, outbox: owners.outbox, planner: owners.planner, status: owners.status,
                      authorizer: authorizer, maxDevices: config.maxDevices)
        var limits = HTTPServer.Limits()
        limits.maxConnections = budget.apiConnections
        limits.maxPerAddress = min(limits.maxPerAddress, budget.apiConnections)
        return HTTPServer(router: Router(basePath: config.basePath), limits: limits,
                          trustedProxies: config.trustedProxies, requests: owners.status.requests) { request, reply in
            Task(executorPreference: RelayExecutor.api) { reply(await api.handle(request)) }
        }
    }

    /// `metrics`: the metrics listener's address and port as its socket reads them back.
    private static func logStarted(_ config: Config, apiPort: Int, metrics: String?, apns: Bool) {
        Log.info("relay.started", ["version": BuildInfo.version, "commit": BuildInfo.commit, "port": String(apiPort),
                                   "base_path": config.basePath.isEmpty ? "/" : config.basePath,
                                   "prefect": config.prefectAPI.string, "apns": apns ? "on" : "off",
                                   "db": config.dbPath,
                                   "prefect_route": config.proxy.route(for: config.prefectAPI).description,
                                   "apns_route": config.proxy.route(for: config.apnsProduction).description,
                                   "metrics": metrics ?? "off"])
        if !apns { Log.warn("apns.disabled", ["note": "no APNs key: running, nothing will be sent"]) }
    }

    /// Every `PauseTracker.tickInterval`, each owner's tick in turn, then the health watch.
    private static func startTicker(_ owners: RelayOwners) -> Task<Void, Never> {
        let (tracker, outbox, status) = (owners.tracker, owners.outbox, owners.status)
        return Task(executorPreference: RelayExecutor.shared) {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(PauseTracker.tickInterval))
                await tracker.tick()
                await outbox.tick()
                await status.watch()
                Log.writeSuppressedCounts()
            }
        }
    }

    /// Without a credential configured, asks Prefect once whether it answers without one, and warns if so (the API
    /// then admits anyone). Off the start-up path; while Prefect doesn't answer, asked again every 30 s, 10 times.
    private static func warnIfOpen(_ prefect: PrefectClient) {
        Task(executorPreference: RelayExecutor.shared) {
            for _ in 0..<10 {
                switch await prefect.answersWithoutCredential() {
                case true?:
                    return Log.warn("prefect.open_server", ["warning": Config.openServerWarning, "fix": Config.openServerFix])
                case false?:
                    return
                case nil:
                    try? await Task.sleep(for: .seconds(30))
                }
            }
        }
    }

    /// Stops taking events, lets pushes under way finish (bounded), then closes everything in reverse order.
    private static func stop(_ running: Running, _ parts: Parts) async {
        running.loop.stopEvents()
        running.ticker.cancel()
        let deadline = SystemClock.monotonic() + 5
        while await parts.owners.tracker.backgroundWork + parts.owners.outbox.backgroundWork > 0 && SystemClock.monotonic() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        parts.apns?.shutdown()
        running.apiLoop.stop()
        running.metricsLoop?.stop()
        parts.prefectHTTP.close()
        parts.credentialHTTP.close()
        running.loop.stop()
        running.socketSink.finish()
        await parts.owners.outbox.flushSettled()
        await parts.owners.ledger.checkpoint()
    }
}

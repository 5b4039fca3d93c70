/// What `/health` judges from (README "Operate"): the relay's live state at one moment, monotonic seconds.
public struct HealthSnapshot: Sendable, Equatable {
    public var now: Double
    /// When the events socket last stopped being subscribed (or the relay started); nil while subscribed.
    public var socketDownSince: Double?
    /// When the relay started, while its events socket has never been subscribed since; nil once it has been. Such a
    /// relay is judged by `HealthBounds.startup` as well: it has not reached Prefect's events even once.
    public var neverSubscribedSince: Double?
    /// Prefect refuses the relay's credential.
    public var credentialRefused = false
    /// The database file was deleted or replaced (the relay exits 1 at its next tick).
    public var storeLost = false
    public var store = FailureStreak()
    public var apnsConfigured = false
    /// Per APNs host (authority) the relay has tried.
    public var apns: [String: FailureStreak] = [:]

    public init(now: Double, socketDownSince: Double?) {
        self.now = now
        self.socketDownSince = socketDownSince
    }
}

/// How long each dependency may fail before the relay says it can't do its job.
public struct HealthBounds: Sendable, Equatable {
    /// The events socket may be down this long: pauses are still found by the 3 s listing meanwhile, so only a
    /// socket that stays down (a proxy that drops upgrades, a stuck connection) counts.
    public var socketDown: Double
    /// APNs connection attempts may keep failing this long (first failure to latest, no success between).
    public var apnsUnreachable: Double
    /// Store writes may keep failing this long: a backup's lock of a few seconds must not take the relay out.
    public var storeFailing: Double
    /// A relay whose events socket has never subscribed since it started is not ready this long after start: a wrong
    /// `PREFECT_API_URL` or credential must fail a rollout's readiness, not pass it for the whole grace.
    public var startup: Double

    public static let defaultGrace: Double = 300
    public static let defaultStartup: Double = 60
    public static let storeCeiling: Double = 30

    /// One grace for the socket and APNs; the store's is 30 s, or the grace if that is shorter.
    public init(grace: Double = HealthBounds.defaultGrace, startup: Double = HealthBounds.defaultStartup) {
        socketDown = grace
        apnsUnreachable = grace
        storeFailing = min(HealthBounds.storeCeiling, grace)
        self.startup = startup
    }
}

/// The relay's health verdict: `ok` false (503) when it can't do its job, with one line per reason.
public struct HealthVerdict: Sendable, Equatable {
    public enum Check: String, Sendable, CaseIterable {
        case store, credential, events, apns
    }

    public struct Problem: Sendable, Equatable {
        public var check: Check
        public var reason: String
    }

    public var problems: [Problem] = []
    public var ok: Bool { problems.isEmpty }
    public var status: Int { ok ? 200 : 503 }

    public func failing(_ check: Check) -> Bool { problems.contains { $0.check == check } }

    public init(_ s: HealthSnapshot, bounds: HealthBounds) {
        if s.storeLost {
            problems.append(.init(check: .store, reason: "the database file was deleted or replaced; the relay restarts"))
        } else if s.store.isFailing, let since = s.store.since, s.now - since >= bounds.storeFailing {
            problems.append(.init(check: .store, reason: "store writes failing for \(Int(s.now - since)) s: \(s.store.lastError)"))
        }
        if s.credentialRefused {
            problems.append(.init(check: .credential,
                                  reason: "Prefect refuses the relay's credential; fix PREFECT_API_KEY or PREFECT_API_AUTH_STRING"))
        }
        // A refused credential keeps the socket down too; the credential says why, so the socket isn't counted twice.
        if !s.credentialRefused, let started = s.neverSubscribedSince, s.now - started >= bounds.startup {
            problems.append(.init(check: .events,
                                  reason: "never subscribed to Prefect's events socket in the \(Int(s.now - started)) s "
                                      + "since start (bound \(Int(bounds.startup)) s): check that PREFECT_API_URL "
                                      + "reaches the Prefect API and that its credential (PREFECT_API_AUTH_STRING or "
                                      + "PREFECT_API_KEY) is right; the log's events.connect_failed says why"))
        } else if !s.credentialRefused, let since = s.socketDownSince, s.now - since >= bounds.socketDown {
            problems.append(.init(check: .events,
                                  reason: "events socket down for \(Int(s.now - since)) s (bound \(Int(bounds.socketDown)) s)"))
        }
        if s.apnsConfigured {
            for (host, streak) in s.apns.sorted(by: { $0.key < $1.key }) where streak.isFailing {
                // Still failing lately, and for long enough: one old failure on an idle relay is not an outage.
                guard streak.span >= bounds.apnsUnreachable, let latest = streak.latest,
                      s.now - latest < bounds.apnsUnreachable else { continue }
                problems.append(.init(check: .apns,
                                      reason: "APNs \(host) unreachable for \(Int(streak.span)) s: \(streak.lastError)"))
            }
        }
    }
}

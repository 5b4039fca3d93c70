import Testing
@testable import RelayCore

/// Every cell of the delivery table, and that the outbox, a send's own retries and the wrong-host rule read it.
@Suite struct DeliveryTableTests {
    /// The whole table as it is meant to be: purpose, fate, step. A new purpose or fate fails here until it has a row.
    static let expected: [PushPurpose: [DeliveryFate: DeliveryStep]] = {
        let common: [DeliveryFate: DeliveryStep] = [
            .delivered: .settle, .tokenGone: .dropToken, .wrongHost: .tryOtherHost,
            .providerTokenRefused: .renewProviderToken, .throttled: .retryLater, .refused: .settle,
            .unreachable: .retryLater, .neverProcessed: .resendNow,
        ]
        let repeats = common.merging([.deadlinePassedAfterSending: .retryLater, .connectionLostAfterSending: .retryLater]) { $1 }
        let once = common.merging([.deadlinePassedAfterSending: .settle, .connectionLostAfterSending: .settle]) { $1 }
        return [.alert: repeats, .reminder: repeats, .update: repeats, .end: repeats, .start: once, .test: once]
    }()

    @Test(arguments: PushPurpose.allCases)
    func everyCellOfARow(_ purpose: PushPurpose) throws {
        let row = try #require(Self.expected[purpose], "no expected row for \(purpose)")
        for fate in DeliveryFate.allCases {
            #expect(DeliveryTable.step(purpose, fate) == row[fate], "\(purpose) after \(fate)")
        }
    }

    @Test func onlyAnUnknownFateTellsPurposesApart() {
        for fate in DeliveryFate.allCases where fate != .deadlinePassedAfterSending && fate != .connectionLostAfterSending {
            let steps = Set(PushPurpose.allCases.map { "\(DeliveryTable.step($0, fate))" })
            #expect(steps.count == 1, "\(fate): \(steps)")
        }
    }

    @Test func aStartIsNeverRepeatedWhenItMayHaveArrived() {
        #expect(!DeliveryTable.mayRepeat(.start))
        #expect(DeliveryTable.step(.start, .deadlinePassedAfterSending) != .retryLater)
        #expect(DeliveryTable.step(.start, .connectionLostAfterSending) != .resendNow)
    }

    /// The outbox retries exactly the cells the table says `retryLater` for, and settles the rest.
    @Test(arguments: PushPurpose.allCases)
    func theOutboxFollowsTheTable(_ purpose: PushPurpose) {
        for (outcome, fate) in Self.outcomes {
            let verdict = OutboxVerdict.after(outcome, purpose: purpose, attempts: 1, expiresAt: 10_000, now: 100,
                                              random: 0, backoff: Backoff(initial: 1, maximum: 30, jitter: 0))
            let retried = if case .retry = verdict { true } else { false }
            #expect(retried == (DeliveryTable.step(purpose, fate) == .retryLater), "\(purpose) after \(outcome)")
        }
    }

    /// Within one send: a retryLater cell waits and tries again, a renewal cell re-signs once, the rest finish.
    @Test(arguments: PushPurpose.allCases)
    func aSendsOwnRetriesFollowTheTable(_ purpose: PushPurpose) {
        let backoff = Backoff(initial: 1, maximum: 4, jitter: 0, limit: 3)
        for (outcome, fate) in Self.outcomes {
            var (retries, renewed) = (0, false)
            let step = outcome.nextStep(purpose, retries: &retries, renewed: &renewed, backoff: backoff, random: 0)
            switch DeliveryTable.step(purpose, fate) {
            case .retryLater: #expect(step == .retry(afterMs: 1_000), "\(purpose) after \(outcome)")
            case .renewProviderToken: #expect(step == .renewToken(.invalidProviderToken), "\(purpose) after \(outcome)")
            default: #expect(step == .finish, "\(purpose) after \(outcome)")
            }
        }
    }

    @Test func theWrongHostRuleReadsTheTable() {
        let bad = APNsOutcome.rejected(APNsRejection(status: 400, reason: .badDeviceToken))
        for purpose in PushPurpose.allCases {
            let moved = Delivery.resolve(purpose, first: bad, stored: .production, second: .delivered(apnsID: nil),
                                         role: .device)
            #expect(moved.effect == .updateEnvironment(.development))
            let lost = Delivery.resolve(purpose, first: bad, stored: .production, second: .timedOut, role: .device)
            #expect(lost.effect == .none)
        }
    }

    /// One outcome of each fate an APNs answer (or its absence) can have; `neverProcessed` stays inside the
    /// connection, which resends it, so no outcome carries it.
    static let outcomes: [(APNsOutcome, DeliveryFate)] = [
        (.delivered(apnsID: nil), .delivered),
        (.rejected(APNsRejection(status: 410, reason: .unregistered)), .tokenGone),
        (.rejected(APNsRejection(status: 400, reason: .badDeviceToken)), .wrongHost),
        (.rejected(APNsRejection(status: 403, reason: .invalidProviderToken)), .providerTokenRefused),
        (.rejected(APNsRejection(status: 503, reason: nil)), .throttled),
        (.rejected(APNsRejection(status: 400, reason: .badTopic)), .refused),
        (.unreachable("refused"), .unreachable),
        (.timedOut, .deadlinePassedAfterSending),
        (.connectionLost("reset"), .connectionLostAfterSending),
    ]

    @Test func everyOutcomeHasTheFateListed() {
        for (outcome, fate) in Self.outcomes { #expect(outcome.fate == fate) }
        let listed = Set(Self.outcomes.map { "\($0.1)" })
        #expect(listed == Set(DeliveryFate.allCases.filter { $0 != .neverProcessed }.map { "\($0)" }))
    }
}

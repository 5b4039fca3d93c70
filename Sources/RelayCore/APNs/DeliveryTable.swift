/// The delivery rule, written once: for each push purpose and each fate of a push, what the relay does next. The
/// outbox (`OutboxVerdict`), a send's own retries (`APNsOutcome.nextStep`) and the wrong-host rule
/// (`Delivery.resolve`) read it; docs/architecture.md ("The delivery table") prints it. The one row no caller reads,
/// `neverProcessed`, is the APNs connection's own (`APNsConnectionMachine` resends such a stream at once, whatever
/// its purpose, and never resends one that went out).
///
/// The one column where purposes differ is the unknown fate: a request that went out and whose answer never came
/// (its deadline passed, or its connection died). APNs may have delivered it. An alert, a reminder, a Live Activity
/// update or end may go again: the alert's and reminder's `apns-collapse-id` folds a copy into one notification,
/// and an update or end applied twice leaves the activity as once. A Live Activity start may not: a second start
/// makes a second activity for the same run, which is worse than the alert (always sent beside it) arriving alone.
/// A test push reports what happened to the caller, who can ask again.
public enum DeliveryTable {
    /// The row of one purpose: the step for each fate.
    public static func step(_ purpose: PushPurpose, _ fate: DeliveryFate) -> DeliveryStep {
        switch fate {
        case .delivered: return .settle
        case .tokenGone: return .dropToken
        case .wrongHost: return .tryOtherHost
        case .providerTokenRefused: return .renewProviderToken
        case .throttled, .unreachable: return .retryLater
        case .refused: return .settle
        case .neverProcessed: return .resendNow
        case .deadlinePassedAfterSending, .connectionLostAfterSending:
            return mayRepeat(purpose) ? .retryLater : .settle
        }
    }

    /// Whether a push of this purpose may go again when it may already have arrived (see the type's comment).
    public static func mayRepeat(_ purpose: PushPurpose) -> Bool {
        switch purpose {
        case .alert, .reminder, .update, .end: return true
        case .start, .test: return false
        }
    }
}

/// What became of one push on one host, as the delivery table tells fates apart.
public enum DeliveryFate: Sendable, Equatable, CaseIterable {
    /// 200.
    case delivered
    /// 410, or Unregistered, ExpiredToken, DeviceTokenNotForTopic: the token is dead.
    case tokenGone
    /// 400 BadDeviceToken: the token may belong to the other environment.
    case wrongHost
    /// 403 with a provider-token reason: our JWT was refused.
    case providerTokenRefused
    /// 429, 5xx, IdleTimeout: APNs asks us to come back later.
    case throttled
    /// Any other error answer: a bug or a configuration problem; keep the token, report it.
    case refused
    /// APNs was never reached (connect, TLS, or the connection closed before the request went out).
    case unreachable
    /// The request was on a connection but APNs never processed it (REFUSED_STREAM, a stream above a GOAWAY's
    /// last-stream-id, HEADERS nghttp2 never sent): it can go on a fresh connection at once without a copy.
    case neverProcessed
    /// Sent, and no answer by its deadline: it may have arrived.
    case deadlinePassedAfterSending
    /// Sent, and the connection died before the answer: it may have arrived.
    case connectionLostAfterSending
}

/// What the relay does about a fate.
public enum DeliveryStep: Sendable, Equatable, CaseIterable {
    /// Done with it: delivered, refused for good, or not to be repeated.
    case settle
    /// Forget the token the push went to (the device, its start token or its activity).
    case dropToken
    /// Send it to the other APNs host; the answer there decides the device's environment.
    case tryOtherHost
    /// Sign a new provider token (once, policy permitting) and send again.
    case renewProviderToken
    /// Send again after a bounded backoff (`Backoff`), at least as late as a `Retry-After`.
    case retryLater
    /// Send again at once on a fresh connection: APNs never saw it.
    case resendNow
}

/// A push to one device, resolved: the final outcome, the host it ended on, and what the store should do.
/// The APNs client decides; the relay (which owns the store) applies the effect.
public struct Delivery: Sendable, Equatable {
    public var outcome: APNsOutcome
    public var environment: APNsEnvironment
    public var effect: DeliveryEffect

    public init(outcome: APNsOutcome, environment: APNsEnvironment, effect: DeliveryEffect) {
        self.outcome = outcome
        self.environment = environment
        self.effect = effect
    }
}

/// A change to the device registry that an APNs answer calls for (`docs/architecture.md`, "APNs").
public enum DeliveryEffect: Sendable, Equatable {
    case none
    /// The token was accepted by the other host: store this environment and keep the device.
    case updateEnvironment(APNsEnvironment)
    /// The device's alert token is dead: remove the device.
    case dropDevice
    /// Only the push-to-start token is dead: clear it, keep the device.
    case dropStartToken
    /// A live activity's update token is dead: forget that activity.
    case dropActivityToken
}

/// Which of a device's tokens a push went to; decides what a dead-token answer removes.
public enum TokenRole: Sendable, Equatable {
    case device, startToken, activity

    public init(token: String, device: Device) {
        // Tokens are stored as registered (lowercase hex); the case-blind comparison is the fallback.
        if token == device.token || token.lowercased() == device.token.lowercased() {
            self = .device
        } else if let start = device.startToken, token == start || token.lowercased() == start.lowercased() {
            self = .startToken
        } else {
            self = .activity
        }
    }

    public var dropEffect: DeliveryEffect {
        switch self {
        case .device: return .dropDevice
        case .startToken: return .dropStartToken
        case .activity: return .dropActivityToken
        }
    }
}

extension Delivery {
    /// Resolves the wrong-host rule, as `DeliveryTable` says for `purpose`. `first` is the answer from the device's
    /// stored environment; `second` is the answer from the other host, present only when `first`'s step was to try
    /// it. `role` is only worked out when a token is to be dropped (it compares tokens, and most answers are 200s).
    public static func resolve(_ purpose: PushPurpose, first: APNsOutcome, stored: APNsEnvironment,
                               second: APNsOutcome?, role: @autoclosure () -> TokenRole) -> Delivery {
        switch DeliveryTable.step(purpose, first.fate) {
        case .dropToken:
            return Delivery(outcome: first, environment: stored, effect: role().dropEffect)
        case .tryOtherHost:
            guard let second else { return Delivery(outcome: first, environment: stored, effect: .none) }
            let other = stored.other
            if second.isDelivered {
                // Every token of one app install shares its aps-environment, so any of them moves the device.
                return Delivery(outcome: second, environment: other, effect: .updateEnvironment(other))
            }
            switch DeliveryTable.step(purpose, second.fate) {
            case .tryOtherHost, .dropToken:
                return Delivery(outcome: second, environment: other, effect: role().dropEffect)
            default:
                // The other host could not say (e.g. unreachable): keep everything and report the failure.
                return Delivery(outcome: second, environment: other, effect: .none)
            }
        default:
            return Delivery(outcome: first, environment: stored, effect: .none)
        }
    }
}

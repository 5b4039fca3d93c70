import RelayCore

extension APNsClient {
    /// Sends `push` to `device` on the host of the device's stored environment (`push.environment` is
    /// ignored) and applies the device rules: BadDeviceToken tries the other host, and dead tokens come back
    /// as `.dropDevice`, `.dropStartToken` or `.dropActivityToken` depending on which token the push used.
    /// `retry` overrides the client's policy for 429/5xx (the outbox passes `.noRetries`: it retries on its own).
    package func deliver(_ push: Push, to device: Device, retry: RetryPolicy? = nil) async -> Delivery {
        let role = TokenRole(token: push.deviceToken, device: device)
        let first = await send(push.on(device.environment), retry: retry)
        var second: APNsOutcome?
        if first.action == .tryOtherHost {
            second = await send(push.on(device.environment.other), retry: retry)
        }
        let delivery = Delivery.resolve(first: first, stored: device.environment, second: second, role: role)
        if delivery.effect != .none {
            Log.info("apns.device_effect", ["device": Log.short(push.deviceToken), "effect": "\(delivery.effect)",
                                            "reason": delivery.outcome.label])
        }
        return delivery
    }
}

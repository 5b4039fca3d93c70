import RelayCore

extension APNsClient {
    /// Sends `push` to `device` on the host of the device's stored environment (`push.environment` is
    /// ignored) and applies the device rules: BadDeviceToken tries the other host, and dead tokens come back
    /// as `.dropDevice`, `.dropStartToken` or `.dropActivityToken` depending on which token the push used.
    package func deliver(_ push: Push, to device: Device) async -> Delivery {
        let role = TokenRole(token: push.deviceToken, device: device)
        let first = await send(push.on(device.environment))
        var second: APNsOutcome?
        if DeliveryTable.step(push.purpose, first.fate) == .tryOtherHost {
            second = await send(push.on(device.environment.other))
        }
        let delivery = Delivery.resolve(push.purpose, first: first, stored: device.environment, second: second, role: role)
        if delivery.effect != .none {
            Log.info("apns.device_effect", ["device": Log.short(push.deviceToken), "effect": "\(delivery.effect)",
                                            "reason": delivery.outcome.label])
        }
        return delivery
    }
}

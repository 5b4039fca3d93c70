// APNs answer classification: any status and body give one outcome, one action and one store effect; a 200 is
// always delivered; a label (used in logs and metrics) is bounded.

func fuzzOne(_ data: [UInt8]) {
    guard data.count >= 3 else { return }
    let status = 100 + Int(UInt16(data[0]) << 8 | UInt16(data[1])) % 500
    let body = Array(data.dropFirst(3))
    // The same reading as APNsClient.outcome(of:): the body's reason and timestamp.
    let outcome: APNsOutcome
    if status == 200 {
        outcome = .delivered(apnsID: text(body))
    } else {
        let json = try? JSONParser.parse(body)
        let reason = json?["reason"]?.string.map(APNsReason.init(rawValue:))
        outcome = .rejected(APNsRejection(status: status, reason: reason, timestamp: json?["timestamp"]?.int, apnsID: nil))
    }
    let action = outcome.action
    if status == 200 { fuzzCheck(action == .delivered, "200 not delivered") }
    _ = outcome.label
    let device = Device(id: "d", token: String(repeating: "ab", count: 32), startToken: nil, environment: .production,
                        serverID: "s", createdAt: 0, updatedAt: 0)
    let role: TokenRole = data[2] % 3 == 0 ? .device : (data[2] % 3 == 1 ? .startToken : .activity)
    let second: APNsOutcome? = data[2] & 0x80 != 0 ? outcome : nil
    _ = Delivery.resolve(first: outcome, stored: device.environment, second: second, role: role)
}

// APNs answer classification: any status and body give one outcome, one fate and one store effect; a 200 is
// always delivered; a label (used in logs and metrics) is bounded.

func fuzzAPNs(_ data: [UInt8]) {
    guard data.count >= 3 else { return }
    let status = 100 + Int(UInt16(data[0]) << 8 | UInt16(data[1])) % 500
    let body = Array(data.dropFirst(3))
    // The relay's own classification (APNsClient.outcome(of:) is this initializer).
    let retryAfter = data[2] & 0x40 != 0 ? Int(data[2] & 0x3f) : nil
    let outcome = APNsOutcome(.response(status: status, apnsID: text(Array(body.prefix(8))), body: body, retryAfter: retryAfter))
    let fate = outcome.fate
    if status == 200 { fuzzCheck(fate == .delivered, "200 not delivered") }
    if status != 200, case .rejected(let rejection) = outcome {
        fuzzCheck(rejection.status == status && rejection.retryAfter == retryAfter, "rejection lost its status")
    } else if status != 200 {
        fuzzCheck(false, "a non-200 answer was not a rejection")
    }
    _ = outcome.label
    let device = Device(id: "d", token: String(repeating: "ab", count: 32), startToken: nil, environment: .production,
                        serverID: "s", createdAt: 0, updatedAt: 0)
    let role: TokenRole = data[2] % 3 == 0 ? .device : (data[2] % 3 == 1 ? .startToken : .activity)
    let second: APNsOutcome? = data[2] & 0x80 != 0 ? outcome : nil
    let purpose = PushPurpose.allCases[Int(data[0]) % PushPurpose.allCases.count]
    _ = Delivery.resolve(purpose, first: outcome, stored: device.environment, second: second, role: role)
}

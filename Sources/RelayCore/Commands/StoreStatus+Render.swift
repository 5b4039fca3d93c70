/// `prefect-push status` output: lines for a person, or one JSON object for scripts (`--json`). `now` is unix
/// seconds; `path` the store's path as given.
extension StoreStatus {
    // MARK: - Text

    public func text(path: String, now: Double) -> String {
        var out = "store: \(path), schema \(schemaVersion)\n"
        if query.isFiltered {
            let filters = [query.run.map { "run \($0)" }, query.device.map { "device \($0)" }].compactMap { $0 }
            let ended = pauses.filter { $0.record.endedAt != nil }.count
            out += "filter: \(filters.joined(separator: ", ")) (ended pauses' answers are kept a day)\n"
            out += "pauses: \(pauses.count) (\(pauses.count - ended) waiting, \(ended) ended)\n"
        } else {
            out += "waiting pauses: \(pauses.count)\n"
        }
        for pause in pauses {
            out += "  " + (query.isFiltered ? (pause.record.endedAt == nil ? "waiting: " : "ended: ") : "")
                + pauseLine(pause, now: now) + "\n"
            for device in devices {
                out += "    \(device.id): " + outcomeText(outcome(of: pause.record, for: device), device: device,
                                                        now: now) + "\n"
            }
        }
        if let device = query.device, devices.isEmpty {
            out += "no device \(device) is registered (an unregistered device's answers go with it)\n"
        }
        out += "devices: \(devices.count)\n"
        for device in devices {
            let pendingCount = pending.filter { $0.deviceID == device.id }.count
            out += "  \(device.id): token \(Self.short(device.token)), \(device.environment.rawValue), server "
                + "\(device.serverID), start token \(device.startToken.map(Self.short) ?? "none"), last registered "
                + "\(Self.ago(Double(device.updatedAt), now: now)), \(pendingCount) pushes pending, last delivery "
                + (lastDelivery(to: device).map { Self.ago(Double($0) / 1000, now: now) } ?? "none kept")
            if let refusal = lastRefusal(of: device) {
                out += ", last refusal \(Self.answerText(refusal)) \(Self.ago(refusal.seconds, now: now))"
            }
            out += "\n"
        }
        out += "outbox: \(pending.count) pending"
        if let oldest = oldestPendingMs { out += ", oldest stored \(Self.ago(Double(oldest) / 1000, now: now))" }
        return out + "\n"
    }

    private func pauseLine(_ pause: Pause, now: Double) -> String {
        let p = pause.record
        var line = "run \(p.runID)"
        let names = [pause.flowName, pause.runName].filter { !$0.isEmpty }
        if !names.isEmpty { line += " (\(names.joined(separator: " / ")))" }
        if let ended = p.endedAt {
            line += ", \(p.stateName) at \(Timestamp.format(Double(p.pausedAt))), ended \(Self.ago(Double(ended), now: now))"
                + " (\(p.endedState ?? "state unknown") after \(Self.duration(Double(ended - p.pausedAt))))"
            line += p.announcedAt == nil ? ", not announced" : ", announced"
            if p.remindedAt != nil { line += ", reminded" }
            return line + ", state \(p.stateID)"
        }
        line += ", \(p.stateName) since \(Timestamp.format(Double(p.pausedAt))) "
            + "(\(Self.duration(now - Double(p.pausedAt))))"
        if let timeout = p.timeoutAt {
            let left = Double(timeout) - now
            line += left > 0 ? ", times out in \(Self.duration(left))" : ", timed out \(Self.duration(-left)) ago"
        } else {
            line += ", no timeout"
        }
        line += p.announcedAt == nil ? ", not announced" : ", announced"
        if p.remindedAt != nil { line += ", reminded" }
        return line + ", state \(p.stateID)"
    }

    private func outcomeText(_ outcome: Outcome, device: Device, now: Double) -> String {
        switch outcome {
        case .notAnnounced: return "nothing sent (the pause was over 15 minutes old when first seen)"
        case .registeredLater: return "nothing sent (registered after the announce)"
        case .answered: return "answered (before this version kept APNs' answers: see the apns.* log lines)"
        case .noneKept: return "no answer kept (past the store's row cap, or ended before answers were kept after the end)"
        case .pushes(let fates): return fates.map { fateText($0, now: now) }.joined(separator: "; ")
        }
    }

    private func fateText(_ fate: Fate, now: Double) -> String {
        switch fate {
        case .pending(let push, let last):
            let due = Double(push.dueMs) / 1000 - now
            var text = "\(push.purpose) pending after \(push.attempts) attempts"
            if let last { text += " (last answer \(Self.answerText(last)) \(Self.ago(last.seconds, now: now)))" }
            return text + ", " + (due > 0 ? "next try in \(Self.duration(due))" : "due now")
        case .delivered(let answer):
            return "\(answer.purpose) delivered \(Self.ago(answer.seconds, now: now))"
        case .dropped(let answer):
            return "\(answer.purpose) dropped \(Self.ago(answer.seconds, now: now)): \(Self.answerText(answer))"
        }
    }

    /// `410 Unregistered`, `0 timeout`, `0 expired`.
    private static func answerText(_ answer: PushAnswer) -> String { "\(answer.status) \(answer.reason)" }

    // MARK: - JSON

    public func json(path: String, now: Double) -> JSONValue {
        var outbox: [String: JSONValue] = ["pending": .int(Int64(pending.count))]
        if let oldest = oldestPendingMs { outbox["oldest_stored_ms"] = .int(oldest) }
        var object: [String: JSONValue] = [
            "store": .string(path), "schema": .int(Int64(schemaVersion)), "now": .int(Int64(now)),
            "pauses": .array(pauses.map { pauseJSON($0, now: now) }),
            "devices": .array(devices.map(deviceJSON)),
            "outbox": .object(outbox),
        ]
        if query.isFiltered {
            var filter: [String: JSONValue] = [:]
            if let run = query.run { filter["run"] = .string(run) }
            if let device = query.device { filter["device"] = .string(device) }
            object["filter"] = .object(filter)
        }
        return .object(object)
    }

    private func pauseJSON(_ pause: Pause, now: Double) -> JSONValue {
        let p = pause.record
        var object: [String: JSONValue] = [
            "run_id": .string(p.runID), "state_id": .string(p.stateID), "state_name": .string(p.stateName),
            "flow_name": .string(pause.flowName), "run_name": .string(pause.runName), "paused_at": .int(p.pausedAt),
            "phase": .string(p.endedAt == nil ? "waiting" : "ended"),
        ]
        if let ended = p.endedAt {
            object["ended_at"] = .int(ended)
            if let state = p.endedState { object["ended_state"] = .string(state) }
        } else {
            object["waiting_s"] = .int(max(0, Int64(now) - p.pausedAt))
        }
        if let timeout = p.timeoutAt { object["timeout_at"] = .int(timeout) }
        if let announced = p.announcedAt { object["announced_at"] = .int(announced) }
        if let reminded = p.remindedAt { object["reminded_at"] = .int(reminded) }
        object["devices"] = .array(devices.map { device in
            let outcome = outcome(of: p, for: device)
            var entry: [String: JSONValue] = ["device": .string(device.id), "outcome": .string(outcome.label)]
            if case .pushes(let fates) = outcome { entry["pushes"] = .array(fates.map(Self.fateJSON)) }
            return .object(entry)
        })
        return .object(object)
    }

    private static func fateJSON(_ fate: Fate) -> JSONValue {
        var object: [String: JSONValue] = ["purpose": .string(fate.purpose), "outcome": .string(fate.label)]
        let answer: PushAnswer?
        switch fate {
        case .pending(let push, let last):
            object["attempts"] = .int(Int64(push.attempts))
            object["next_try_ms"] = .int(push.dueMs)
            answer = last
        case .delivered(let kept), .dropped(let kept):
            answer = kept
        }
        if let answer {
            object["status"] = .int(Int64(answer.status))
            object["reason"] = .string(answer.reason)
            object["answered_ms"] = .int(answer.answeredMs)
        }
        return .object(object)
    }

    private func deviceJSON(_ device: Device) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(device.id), "token": .string(Self.short(device.token)),
            "environment": .string(device.environment.rawValue), "server_id": .string(device.serverID),
            "created_at": .int(device.createdAt), "updated_at": .int(device.updatedAt),
            "pending": .int(Int64(pending.filter { $0.deviceID == device.id }.count)),
        ]
        if let start = device.startToken { object["start_token"] = .string(Self.short(start)) }
        if let delivered = lastDelivery(to: device) { object["last_delivery_ms"] = .int(delivered) }
        if let refusal = lastRefusal(of: device) {
            object["last_refusal"] = ["status": .int(Int64(refusal.status)), "reason": .string(refusal.reason),
                                      "answered_ms": .int(refusal.answeredMs)]
        }
        return .object(object)
    }

    // MARK: - Durations

    /// `42s`, `3m 12s`, `2h 5m`, `3d 4h`.
    public static func duration(_ seconds: Double) -> String {
        let s = max(0, Int64(seconds.rounded(.down)))
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(s % 60)s" }
        if s < 86_400 { return "\(s / 3600)h \((s % 3600) / 60)m" }
        return "\(s / 86_400)d \((s % 86_400) / 3600)h"
    }

    static func ago(_ time: Double, now: Double) -> String { duration(now - time) + " ago" }
}

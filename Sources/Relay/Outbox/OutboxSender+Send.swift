import RelayCore

/// Sending what the outbox holds and writing down what APNs answered.
extension OutboxSender {
    /// Sends stored pushes over the shared connections (`APNsClient.fanOut`, each push tried once here: the outbox
    /// owns retries) and settles each answer; one `apns.fanout` line sums it up.
    func send(_ items: [OutboxItem], receivedAt: Double, runID: String?, purpose: String) async {
        guard !items.isEmpty, let apns else { return }
        let started = SystemClock.monotonic()
        // Answers reach the relay in batches: those that came together (one actor hop per burst, at most
        // `OutboxSender.settleBatch` a hop), not held back for more, so the relay can make them durable at once.
        // Each names its item by index: a copy of the item per answer cost a retain of each of its strings.
        let answered = Locked<[Answered]>([])
        let handOver: @Sendable () async -> Void = {
            let batch = answered.withLock { answers in defer { answers.removeAll(keepingCapacity: true) }; return answers }
            if !batch.isEmpty { await self.settled(batch, of: items) }
        }
        let delivered = await apns.fanOut(items.map { ($0.push, $0.device) }, retry: .never,
                                          drained: handOver) { index, delivery in
            let full = answered.withLock { answers in
                answers.append(Answered(index: index, delivery: delivery, seconds: SystemClock.monotonic() - receivedAt))
                return answers.count >= OutboxSender.settleBatch
            }
            if full { await handOver() }
        }
        await handOver()
        flushSettled()
        Log.info("apns.fanout", ["run": runID ?? "", "for": purpose, "pushes": String(items.count),
                                 "delivered": String(delivered), "ms": String(Int((SystemClock.monotonic() - started) * 1000))])
    }

    /// One answer of a fan-out: which of its items, APNs' answer, and the seconds since the event.
    struct Answered: Sendable {
        let index: Int
        let delivery: Delivery
        let seconds: Double
    }

    /// A batch of answers to `items`: see `settled(_:_:)`.
    func settled(_ answers: [Answered], of items: [OutboxItem]) {
        // Counted under one lock for the batch, not one per answer.
        tally.count { metrics in
            for answer in answers {
                OutboxSender.count(answer.delivery, kind: items[answer.index].push.kind, seconds: answer.seconds, in: &metrics)
            }
        }
        for answer in answers { settled(items[answer.index], answer.delivery) }
        flushSoon()
    }

    /// Writes the answers gathered so far once `settleDelay` has passed, unless a full batch writes them first.
    /// One timer at a time: it is armed with the first unwritten answer.
    private func flushSoon() {
        guard !settling.isEmpty, !settleTimerArmed else { return }
        settleTimerArmed = true
        Task {
            await withTaskExecutorPreference(RelayExecutor.shared) {
                try? await Task.sleep(for: OutboxSender.settleDelay)
                settleTimerArmed = false
                flushSettled()
            }
        }
    }

    /// One answer (counted by the caller): what it means for the registry, and what becomes of the stored push.
    private func settled(_ item: OutboxItem, _ delivery: Delivery) {
        apply(delivery.effect, device: item.device, runID: item.runID)
        // Jitter only matters for a retry; drawing it for every answer cost a getrandom(2) each.
        let verdict = OutboxVerdict.after(delivery.outcome, purpose: item.purpose, attempts: item.attempts + 1,
                                          expiresAt: item.push.expiration ?? .max, now: now(),
                                          random: delivery.outcome.isDelivered ? 0 : Double.random(in: 0..<1),
                                          backoff: backoff)
        let fate = delivery.outcome.fate
        if case .retry = verdict {
            tally.count { $0.pushRetries += 1 }
        } else if fate == .deadlinePassedAfterSending || fate == .connectionLostAfterSending {
            // It may have arrived, and its purpose may not repeat (`DeliveryTable`): counted apart, for operators
            // and for the fault rounds that tell it from a push the relay forgot.
            tally.count { $0.pushesUnconfirmed += 1 }
        }
        if case .settled = verdict, !delivery.outcome.isDelivered {
            Log.warn("apns.gave_up", ["device": Log.short(item.push.deviceToken), "for": item.purpose.rawValue,
                                      "run": item.runID, "reason": delivery.outcome.label,
                                      "attempts": String(item.attempts + 1)])
        }
        settling.append(item.settlement(verdict))
        answersKept.append(PushAnswer(stateID: item.stateID, deviceID: item.device.id,
                                      purpose: item.purpose.rawValue, status: delivery.outcome.status,
                                      reason: delivery.outcome.label, answeredMs: Int64(SystemClock.unixNow() * 1000)))
        if settling.count >= OutboxSender.settleBatch { flushSettled() }
    }

    /// Writes the answers gathered so far in one transaction. If the store refuses, they stay in memory (and their
    /// pushes stay marked as being sent) until the next flush: nothing is sent twice meanwhile.
    func flushSettled() {
        guard !settling.isEmpty else { return }
        let (results, kept) = (settling, answersKept)
        // Fan-outs whose last members' answers are in this batch are closed with them.
        var answered: [Int64: Int] = [:]
        for result in results where result.isFanOutMember { answered[result.messageID, default: 0] += 1 }
        let closing = answered.compactMap { message, count in openFanOuts[message] == count ? message : nil }
        guard ledger.inOrder({ ledger in
            ledger.attempt("settle", wrote: true) { try $0.settle(results, answers: kept, closing: closing) }
        }) != nil
        else { return }
        for (message, count) in answered {
            let left = (openFanOuts[message] ?? 0) - count
            openFanOuts[message] = left > 0 ? left : nil
        }
        for result in settling {
            if !result.isFanOutMember { sending.remove(result.id) }
            // Only now is the row rescheduled in the store, so only now may the drain count on it.
            if case .retry(let at) = result.verdict { nextDueMs = min(nextDueMs ?? .max, Int64(at * 1000)) }
        }
        settling.removeAll(keepingCapacity: true)
        answersKept.removeAll(keepingCapacity: true)
    }

    /// Sends the stored pushes that are due and not already under way, at most a fan-out window at a time.
    func drain() {
        guard let due = nextDueMs, due <= nowMs(), apns != nil else { return }
        // Fan-outs' members being answered count as under way too (they have no rows in `sending`).
        let room = APNsClient.fanOutWindow - sending.count - openFanOuts.values.reduce(0, +)
        guard room > 0 else { return }
        let items: [OutboxItem]
        let now = nowMs()
        let limit = room + sending.count
        guard let (due, next) = ledger.inOrder({ ledger in
            ledger.attempt("drain") { store in
                let due = try store.duePushes(nowMs: now, limit: limit)
                // Every row due now is taken here or under way (its answer reschedules it), unless the read hit its
                // limit; so the next look is at the soonest later row, not at once on every tick of a fan-out.
                return (due, due.count == limit ? now : try store.nextDueMs(afterMs: now))
            }
        }) else { return }
        items = Array(due.filter { !sending.contains($0.id) }.prefix(room))
        nextDueMs = next
        // Empty: only pushes already under way are due; their answers reschedule what needs it.
        guard !items.isEmpty else { return }
        for item in items { sending.insert(item.id) }
        Log.info("outbox.resend", ["pushes": String(items.count)])
        backgroundWork += 1
        Task {
            await withTaskExecutorPreference(RelayExecutor.shared) {
                await self.send(items, receivedAt: SystemClock.monotonic(), runID: nil, purpose: "resend")
                self.backgroundWork -= 1
            }
        }
    }

    /// Drops stored pushes past their expiry and message rows nothing refers to.
    func prune() {
        lastPrune = now()
        let time = Int64(now())
        let wallMs = Int64(SystemClock.unixNow() * 1000)
        let live = Set(openFanOuts.keys)
        let expired = ledger.inOrder { $0.attempt("prune_outbox") { try $0.pruneOutbox(now: time, wallMs: wallMs, live: live) } }
        if let expired, expired > 0 { Log.warn("outbox.expired", ["pushes": String(expired)]) }
    }

    /// Counts one push's answer in `metrics`.
    private static func count(_ delivery: Delivery, kind: Push.Kind, seconds: Double, in metrics: inout Metrics) {
        let status = delivery.outcome.status
        let reason: String = if case .rejected(let r) = delivery.outcome { r.reason?.rawValue ?? "" } else { "" }
        metrics.recordPush(kind: kind.rawValue, status: status > 0 ? String(status) : delivery.outcome.label,
                           reason: reason, seconds: delivery.outcome.isDelivered ? seconds : nil)
    }

    /// What APNs' answer means for the registry. Most answers change nothing there: no store call for them.
    private func apply(_ effect: DeliveryEffect, device: Device, runID: String?) {
        if effect != .none { ledger.inOrder { $0.apply(effect, device: device, runID: runID) } }
    }

    /// `POST /devices/{id}/test`: one push, outside the outbox (nothing to retry: the caller sees the answer), its
    /// answer counted and applied like any other.
    func deliverNow(_ push: Push, to device: Device) async -> Delivery? {
        guard let apns else { return nil }
        let started = SystemClock.monotonic()
        let delivery = await apns.deliver(push, to: device)
        tally.count { OutboxSender.count(delivery, kind: push.kind, seconds: SystemClock.monotonic() - started, in: &$0) }
        apply(delivery.effect, device: device, runID: nil)
        return delivery
    }
}

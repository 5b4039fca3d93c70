import RelayCore

/// The durable outbox's bookkeeping on the actor that owns the store: a fan-out is written before it is sent
/// (`enqueue`), each answer is settled in batches (one transaction per `settleBatch` answers or per `settleDelay`:
/// not per push, nor held until the fan-out ends), and stored pushes that are due (after a restart, a lost
/// connection, a 429/5xx) are sent again (`drainOutbox`).
extension Coordinator {
    /// Answers written per transaction at most; fewer when `settleDelay` passes first.
    static let settleBatch = 64

    /// How long an answer may wait in memory for others to share its transaction. A kill loses the answers not yet
    /// written, and their pushes are sent again after the restart: this bounds them to the ones APNs answered in
    /// the last few ms (or still in flight), not a fan-out's worth.
    static let settleDelay: Duration = .milliseconds(4)

    private func nowMs() -> Int64 { Int64(now() * 1000) }

    /// Writes `batches` and returns the pushes to send now; in the same transaction, the announce's props, the
    /// end's forgotten activities, or the reminder's claim (`reminded`: the pause's one reminder; when it was
    /// already claimed or the pause ended, nothing is queued and the answer is no pushes; likewise for `props` on
    /// a pause already announced). nil when the store refused, or holds no record of the announce's pause: nothing
    /// was queued and the caller's job is tried again.
    /// `props.replacing`: a refresh's props, stored in place of the announced ones with its Live Activity updates;
    /// when they are the same (or the pause ended), nothing is queued. `props.arrivals`: how many of the run's live
    /// events and artifacts the props were built with; one that comes later refreshes them (`refreshIfBehind`).
    func enqueue(_ batches: [OutboxBatch], props: (stateID: String, json: String, arrivals: Int, replacing: Bool)? = nil,
                 forgetActivitiesOf runID: String? = nil, reminded: (stateID: String, at: Int64)? = nil) -> [OutboxItem]? {
        do {
            let items = try store.enqueue(batches, dueMs: nowMs()) {
                if let props, props.replacing {
                    if try !store.replaceProps(stateID: props.stateID, props: props.json) { throw NothingOwed() }
                } else if let props {
                    switch try store.setProps(stateID: props.stateID, props: props.json) {
                    case .written: break
                    case .alreadyAnnounced: throw NothingOwed()
                    case .unrecorded: throw PauseUnrecorded()
                    }
                }
                if let runID { try store.deleteActivities(runID: runID) }
                if let reminded, try !store.markReminded(stateID: reminded.stateID, at: reminded.at) {
                    throw NothingOwed()
                }
            }
            if !items.isEmpty || props != nil || reminded != nil { storeWrote() }  // rows written, not an empty commit
            // Under way now; their answers reschedule what needs another try (`settled`).
            for item in items { sending.insert(item.id) }
            if let props {
                builtWith(props.arrivals, stateID: props.stateID, replacing: props.replacing)
                if props.replacing {
                    Log.info("pause.refreshed", ["run": watcher.pauses[props.stateID]?.runID ?? "",
                                                 "state": props.stateID, "updates": String(items.count)])
                } else {
                    metrics.announced += 1
                }
            }
            return items
        } catch is NothingOwed {
            // A refresh that found nothing new still counts what it was built with (or it would be started again).
            if let props { builtWith(props.arrivals, stateID: props.stateID, replacing: props.replacing) }
            return []
        } catch is PauseUnrecorded {
            // The announce started before its pause's record was written, and that write failed: the watcher
            // forgot the pause and the run is read again, so the job's retry is dropped unless it is recorded by then.
            Log.warn("pause.unrecorded", ["state": props?.stateID ?? "", "note": "announce held until the pause is stored"])
            return nil
        } catch {
            storeFailed(["action": "enqueue", "error": "\(error)"])
            return nil
        }
    }

    /// Records how many of the run's live events the pause's stored props were built with: set by its announce, only
    /// raised by a refresh (and never for a pause that has ended meanwhile, which has no entry left).
    private func builtWith(_ arrivals: Int, stateID: String, replacing: Bool) {
        if !replacing {
            propsArrivals[stateID] = arrivals
        } else if let used = propsArrivals[stateID] {
            propsArrivals[stateID] = max(used, arrivals)
        }
    }

    /// The reminder was already claimed, or its pause ended, or the announce's pause was already announced: the
    /// transaction is rolled back, nothing is sent.
    private struct NothingOwed: Error {}
    private struct PauseUnrecorded: Error {}

    /// A batch of answers (item, answer, seconds since the event): see `settled(_:_:seconds:)`.
    func settled(_ answers: [(OutboxItem, Delivery, Double)]) {
        for (item, delivery, seconds) in answers { settled(item, delivery, seconds: seconds) }
        flushSoon()
    }

    /// Writes the answers gathered so far once `settleDelay` has passed, unless a full batch writes them first.
    /// One timer at a time: it is armed with the first unwritten answer.
    private func flushSoon() {
        guard !settling.isEmpty, !settleTimerArmed else { return }
        settleTimerArmed = true
        Task {
            try? await Task.sleep(for: Coordinator.settleDelay)
            settleTimerArmed = false
            flushSettled()
        }
    }

    /// One answer: metrics, what it means for the registry, and what becomes of the stored push.
    func settled(_ item: OutboxItem, _ delivery: Delivery, seconds: Double) {
        delivered(delivery, push: item.push, device: item.device, runID: item.runID, seconds: seconds)
        // Jitter only matters for a retry; drawing it for every answer cost a getrandom(2) each.
        let verdict = schedule.verdict(delivery.outcome, attempts: item.attempts + 1,
                                       expiresAt: item.push.expiration ?? .max, now: now(),
                                       random: delivery.outcome.isDelivered ? 0 : Double.random(in: 0..<1))
        if case .retry = verdict {
            metrics.pushRetries += 1
        } else if !delivery.outcome.isDelivered {
            Log.warn("apns.gave_up", ["device": Log.short(item.push.deviceToken), "for": item.purpose.rawValue,
                                      "run": item.runID, "reason": delivery.outcome.label,
                                      "attempts": String(item.attempts + 1)])
        }
        settling.append((item.id, verdict))
        if settling.count >= Coordinator.settleBatch { flushSettled() }
    }

    /// Writes the answers gathered so far in one transaction. If the store refuses, they stay in memory (and their
    /// pushes stay marked as being sent) until the next flush: nothing is sent twice meanwhile.
    func flushSettled() {
        guard !settling.isEmpty else { return }
        do {
            try store.settle(settling)
            storeWrote()
            for (id, verdict) in settling {
                sending.remove(id)
                // Only now is the row rescheduled in the store, so only now may the drain count on it.
                if case .retry(let at) = verdict { nextDueMs = min(nextDueMs ?? .max, Int64(at * 1000)) }
            }
            settling.removeAll(keepingCapacity: true)
        } catch {
            storeFailed(["action": "settle", "pushes": String(settling.count), "error": "\(error)"])
        }
    }

    /// Sends the stored pushes that are due and not already under way, at most a fan-out window at a time.
    func drainOutbox() {
        guard let due = nextDueMs, due <= nowMs(), notifier?.apns != nil else { return }
        let room = APNsClient.fanOutWindow - sending.count
        guard room > 0 else { return }
        let items: [OutboxItem]
        let now = nowMs()
        do {
            let due = try store.duePushes(nowMs: now, limit: room + sending.count)
            items = Array(due.filter { !sending.contains($0.id) }.prefix(room))
            // Every row due now is taken here or under way (its answer reschedules it), unless the read hit its
            // limit; so the next look is at the soonest later row, not at once on every tick of a fan-out.
            nextDueMs = due.count == room + sending.count ? now : try store.nextDueMs(afterMs: now)
        } catch {
            storeFailed(["action": "drain", "error": "\(error)"])
            return
        }
        // Empty: only pushes already under way are due; their answers reschedule what needs it.
        guard !items.isEmpty else { return }
        for item in items { sending.insert(item.id) }
        Log.info("outbox.resend", ["pushes": String(items.count)])
        background { notifier in await notifier.send(items, receivedAt: SystemClock.monotonic(), runID: nil, purpose: "resend") }
    }

    /// Drops stored pushes past their expiry and message rows nothing refers to.
    func pruneOutbox() {
        lastOutboxPrune = now()
        do {
            let expired = try store.pruneOutbox(now: Int64(now()))
            if expired > 0 { Log.warn("outbox.expired", ["pushes": String(expired)]) }
        } catch {
            storeFailed(["action": "prune_outbox", "error": "\(error)"])
        }
        pruneStore()
    }

    /// Ended pauses past the store's retention (a day) go; memory forgot them long before (`Watcher.Rules`).
    func pruneStore() {
        do {
            let pruned = try store.prunePauses(endedBefore: Int64(now() - watcher.rules.retention))
            if pruned > 0 { Log.debug("pauses.pruned", ["count": String(pruned)]) }
        } catch {
            storeFailed(["action": "prune_pauses", "error": "\(error)"])
        }
    }
}

// Where waiting calls go, which connections open and close for them, and the stall count.

extension HTTPPoolStateMachine {
    // MARK: - Placing calls

    /// Hands waiting calls, oldest first, to the open copy of the same request when its caller gave up on it, or
    /// to an idle connection of their origin (unless their group has its share open).
    mutating func placeWaiting(now: Int64, into actions: inout [Action]) {
        var index = 0
        while index < waiting.count {
            let call = waiting[index]
            if let copy = openCopy(of: call) {
                waiting.remove(at: index)
                withRequest(at: copy) { $0.joined.append(call) }
                actions.append(.join(call.id, on: connections[copy].id))
            } else if !atGroupLimit(call), let idle = idleConnection(for: call) {
                waiting.remove(at: index)
                connections[idle].state = .leased(OpenRequest(call: call, sentAt: now))
                actions.append(.send(call.id, on: connections[idle].id))
            } else {
                index += 1
            }
        }
    }

    /// The connection whose open, abandoned request `call` repeats (same origin, same bytes).
    private func openCopy(of call: Call) -> Int? {
        connections.firstIndex { connection in
            guard connection.origin == call.origin, case .leased(let open) = connection.state else { return false }
            return open.abandoned && open.call.request == call.request
        }
    }

    /// `call`'s group has as many requests open as it may.
    private func atGroupLimit(_ call: Call) -> Bool {
        guard let group = call.group else { return false }
        return policy.groupIsFull(open: connections.count { connection in
            if case .leased(let open) = connection.state { open.call.group == group } else { false }
        })
    }

    /// The most recently used idle connection for `call` (so spare ones age out); a retried call takes only one
    /// that has answered nothing yet.
    private func idleConnection(for call: Call) -> Int? {
        var best: (index: Int, since: Int64)?
        for (index, connection) in connections.enumerated() where connection.origin == call.origin {
            guard case .idle(let since) = connection.state, !(call.retried && connection.served > 0) else { continue }
            if best == nil || since > best!.since { best = (index, since) }
        }
        return best?.index
    }

    // MARK: - Opening and closing for them

    /// For each origin with calls still waiting: the policy's plan (how many to open, which idle or abandoned
    /// connections make room), carried out, and asked again until it has nothing more to do. One plan can leave
    /// work for a second (it makes room only at the limit, and opening the first connection reaches it): what a
    /// turn right after would do, this turn does, so the loop never sleeps with a plan pending.
    mutating func openForWaiting(now: Int64, into actions: inout [Action]) {
        // The origins in the order their first call waits; a relay talks to one or two, so the list stays tiny
        // however many calls wait (a scan of the earlier calls for each would grow with their square).
        var origins: [OriginID] = []
        for call in waiting where !origins.contains(call.origin) { origins.append(call.origin) }
        for origin in origins {
            while carryOutPlan(for: origin, now: now, into: &actions) {}
        }
    }

    /// Asks the policy what `origin`'s waiting calls need and does it; false when that is nothing.
    private mutating func carryOutPlan(for origin: OriginID, now: Int64, into actions: inout [Action]) -> Bool {
        var open = 0, pending = 0, idle = 0, slow = 0, abandoned = 0
        for connection in connections where connection.origin == origin {
            open += 1
            switch connection.state {
            case .connecting: pending += 1
            case .idle: idle += 1
            case .leased(let request):
                if policy.isSlow(sentAt: request.sentAt, now: now) { slow += 1 }
                if request.abandoned && request.joined.isEmpty { abandoned += 1 }
            }
        }
        // Calls held back by their group's limit need no connection yet; connects under way serve the first.
        let needed = waiting.count { $0.origin == origin && !atGroupLimit($0) } - pending
        let plan = policy.plan(needed: needed, open: open, limit: policy.limit(slow: slow), idle: idle,
                               abandoned: abandoned)
        for _ in 0..<plan.closeIdle {
            close(at: connections.firstIndex { $0.origin == origin && $0.isIdle }!, .makingRoom, into: &actions)
        }
        for _ in 0..<plan.closeAbandoned {
            close(at: oldestAbandoned(of: origin)!, .makingRoomForWaiting, into: &actions)
        }
        for _ in 0..<plan.open {
            lastConnectionID += 1
            let id = ConnectionID(lastConnectionID)
            connections.append(Connection(id: id, origin: origin,
                                          state: .connecting(deadline: now + Int64(connectTimeoutMs))))
            actions.append(.connect(id, origin))
        }
        return plan != HTTPPoolPolicy.Plan()
    }

    /// The connection of `origin` whose abandoned request, with no repeat waiting on it, was sent first.
    private func oldestAbandoned(of origin: OriginID) -> Int? {
        var oldest: (index: Int, sentAt: Int64)?
        for (index, connection) in connections.enumerated() where connection.origin == origin {
            guard case .leased(let request) = connection.state, request.abandoned, request.joined.isEmpty else { continue }
            if oldest == nil || request.sentAt < oldest!.sentAt { oldest = (index, request.sentAt) }
        }
        return oldest?.index
    }

    // MARK: - Stalls

    /// Counts requests that became stalled, asks for the warning while any is (at most once per
    /// `stallWarningEveryMs`) and updates the in-flight count.
    mutating func watchStalls(now: Int64, into actions: inout [Action]) {
        var stalled = 0, newly = 0, inFlight = 0
        var oldest: (index: Int, sentAt: Int64)?
        for index in connections.indices {
            guard case .leased(let request) = connections[index].state else { continue }
            inFlight += 1
            guard policy.isStalled(sentAt: request.sentAt, now: now) else { continue }
            stalled += 1
            if oldest == nil || request.sentAt < oldest!.sentAt { oldest = (index, request.sentAt) }
            if !request.stalled {
                withRequest(at: index) { $0.stalled = true }
                newly += 1
            }
        }
        self.inFlight = inFlight
        if newly > 0 { actions.append(.countStalled(newly)) }
        stalledSinceWarning += newly
        guard let oldest, policy.stallWarningDue(now: now, lastWarning: lastStallWarning) else { return }
        lastStallWarning = now
        let connection = connections[oldest.index]
        actions.append(.warnStalled(StallReport(oldest: connection.id, origin: connection.origin,
                                                oldestMs: now - oldest.sentAt, stalled: stalled,
                                                newlyStalled: stalledSinceWarning, inFlight: inFlight,
                                                waiting: waiting.count)))
        stalledSinceWarning = 0
    }
}

extension HTTPPoolStateMachine.Connection {
    var isIdle: Bool { if case .idle = state { true } else { false } }
}

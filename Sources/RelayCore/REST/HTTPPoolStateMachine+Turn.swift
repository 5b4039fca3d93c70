// One turn of the loop: deadlines, then placing the waiting calls, then stalls; and how long the loop may sleep after.

extension HTTPPoolStateMachine {
    /// A turn of the loop at `now`, after it fed what it saw: callers past their deadline hear so, connections that
    /// are done close, waiting calls go on idle connections (or join their open copy) and connections open for the
    /// rest, and stalled requests are counted and logged.
    public mutating func turn(now: Int64, into actions: inout [Action]) {
        expireWaiting(now: now, into: &actions)
        expireConnects(now: now, into: &actions)
        expireConnections(now: now, into: &actions)
        if !waiting.isEmpty {
            placeWaiting(now: now, into: &actions)
            openForWaiting(now: now, into: &actions)
        }
        watchStalls(now: now, into: &actions)
        turnDue = false  // what this turn closed or freed, it has placed already
    }

    /// How long the loop may sleep in poll() after a turn at `now` (ms; -1: until woken). 0 while an event since
    /// the last turn wants one.
    public func pollTimeout(now: Int64) -> Int64 {
        if turnDue { return 0 }
        var wake = HTTPPoolPolicy.Wake(now: now)
        for call in waiting { wake.at(call.deadline) }
        for connection in connections {
            switch connection.state {
            case .connecting(let deadline):
                wake.at(deadline)
            case .idle(let since):
                policy.wake(&wake, for: .idle(since: since), callsWait: !waiting.isEmpty, lastStallWarning: lastStallWarning)
            case .leased(let request):
                policy.wake(&wake, for: .busy(view(request)), callsWait: !waiting.isEmpty,
                            lastStallWarning: lastStallWarning)
            }
        }
        return wake.timeout
    }

    func view(_ request: OpenRequest) -> HTTPPoolPolicy.OpenRequest {
        HTTPPoolPolicy.OpenRequest(sentAt: request.sentAt, deadline: request.call.deadline, abandoned: request.abandoned,
                                   stalled: request.stalled, joinedDeadline: request.joined.lazy.map(\.deadline).min())
    }

    // MARK: - Deadlines

    /// Calls that waited past their deadline with no connection fail.
    private mutating func expireWaiting(now: Int64, into actions: inout [Action]) {
        waiting.removeAll { call in
            guard now >= call.deadline else { return false }
            actions.append(.fail(call.id, .noConnectionFree))
            return true
        }
    }

    /// Connects past `connectTimeoutMs` stop, and fail the oldest call waiting for their origin.
    private mutating func expireConnects(now: Int64, into actions: inout [Action]) {
        var index = 0
        while index < connections.count {
            guard case .connecting(let deadline) = connections[index].state, now >= deadline else {
                index += 1
                continue
            }
            let connection = connections.remove(at: index)
            actions.append(.abortConnect(connection.id))
            failOldestWaiting(for: connection.origin, .connectTimedOut, into: &actions)
        }
    }

    /// Callers past their deadline on an open request fail (a repeat) or abandon it (its own caller: the request
    /// stays open, the server is still working on it); an abandoned request held `abandonedHoldMs` gives its
    /// connection up; idle connections unused too long close.
    private mutating func expireConnections(now: Int64, into actions: inout [Action]) {
        var index = 0
        while index < connections.count {
            switch connections[index].state {
            case .connecting:
                break
            case .idle(let since):
                let open = connections.count { $0.origin == connections[index].origin }
                if let reason = policy.idleClose(since: since, openToOrigin: open, now: now) {
                    close(at: index, .idle(reason), into: &actions)
                    continue
                }
            case .leased(let request):
                if request.abandoned ? request.joined.contains(where: { now >= $0.deadline }) : now >= request.call.deadline {
                    expireCallers(at: index, now: now, into: &actions)
                }
                if case .leased(let request) = connections[index].state, policy.holdIsOver(view(request), now: now) {
                    close(at: index, .holdOver, into: &actions)
                    continue
                }
            }
            index += 1
        }
    }

    private mutating func expireCallers(at index: Int, now: Int64, into actions: inout [Action]) {
        let id = connections[index].id
        withRequest(at: index) { request in
            request.joined.removeAll { joined in
                guard now >= joined.deadline else { return false }
                actions.append(.fail(joined.id, .timedOut))
                return true
            }
            if !request.abandoned, now >= request.call.deadline {
                request.abandoned = true
                actions.append(.abandon(request.call.id, on: id))
            }
        }
    }
}

import Glibc
import RelayCore

// The pool's loop: everything here runs on its own thread and owns the connections and the waiting calls.

extension HTTPPool {
    func run() {
        while true {
            let (calls, connected, closing) = takeInbox()
            // Before the close check: calls handed over in the same turn as the close are failed with the rest,
            // not dropped unanswered (their callers would wait forever).
            waiting.append(contentsOf: calls)
            if closing {
                shutDown()
                return
            }
            let now = monotonicMs()
            for result in connected { adopt(result, now: now) }
            expire(now: now)
            expireConnects(now: now)
            dispatch(now: now)
            watchStalls(now: now)
            waitForEvents(now: now)
        }
    }

    // MARK: - Scheduling

    /// Fails calls past their deadline (a request already sent stays open for its answer: abandoned), closes
    /// connections whose abandoned request went unanswered too long, and drops connections idle too long.
    private func expire(now: Int64) {
        waiting.removeAll { call in
            guard call.isFinished || now >= call.deadline else { return false }
            call.finish(.failure(HTTPFailure(.noConnectionFree, "\(call.origin.authority): no connection free within "
                                                     + "\(call.call.timeoutSeconds) s")))
            return true
        }
        for connection in connections {
            guard let call = connection.call else {
                if let reason = policy.idleClose(since: connection.idleSince, openToOrigin: count(of: connection.origin),
                                                 now: now) {
                    drop(connection, reason: reason)
                }
                continue
            }
            call.joined.removeAll { joined in
                guard joined.isFinished || now >= joined.deadline else { return false }
                joined.finish(.failure(timedOut(joined)))
                return true
            }
            if !call.isFinished, now >= call.deadline {
                counts.readsAbandoned.add(1, ordering: .relaxed)  // before the caller hears of it
                call.finish(.failure(timedOut(call)))
                Log.debug("prefect.http_abandoned", ["host": call.origin.authority, "connection": String(connection.id),
                                                     "path": call.call.path])
            }
            if policy.holdIsOver(view(call), now: now) {
                drop(connection, reason: "no answer within \(options.abandonedHoldMs / 1000) s")
            }
        }
    }

    private func timedOut(_ call: PooledCall) -> HTTPFailure {
        HTTPFailure(.timedOut, "\(call.origin.authority) did not answer within \(call.call.timeoutSeconds) s "
                            + "(the request stays open; asking again waits for its answer)")
    }

    /// Connections open or being opened to `origin`.
    private func count(of origin: Origin) -> Int {
        connecting.values.count { $0 == origin } + connections.count { $0.origin == origin }
    }

    /// Hands waiting calls, oldest first, to idle connections of their origin (or to the open copy of the same
    /// request, when its caller gave up on it), and opens connections for the rest, up to `limit(for:now:)`.
    private func dispatch(now: Int64) {
        var index = 0
        while index < waiting.count {
            let call = waiting[index]
            if let copy = openCopy(of: call) {
                waiting.remove(at: index)
                copy.joined.append(call)
                Log.debug("prefect.http_joined", ["host": call.origin.authority, "path": call.call.path])
            } else if !atGroupLimit(call), let connection = idleConnection(for: call) {
                waiting.remove(at: index)
                call.sentAt = now
                call.stalled = false
                handle(connection.start(call), on: connection, now: now)
            } else {
                index += 1
            }
        }
        var origins: [Origin] = []
        for call in waiting where !origins.contains(call.origin) { origins.append(call.origin) }
        for origin in origins {
            let pending = connecting.values.count { $0 == origin }
            let mine = connections.filter { $0.origin == origin }
            let idle = mine.filter(\.isIdle)
            let abandoned = mine.filter { $0.call?.isAbandoned == true && $0.call?.joined.isEmpty == true }
                .sorted { $0.call!.sentAt < $1.call!.sentAt }
            // Calls held back by their group's limit need no connection yet.
            let needed = waiting.count { $0.origin == origin && !atGroupLimit($0) } - pending
            let plan = policy.plan(needed: needed, open: count(of: origin), limit: policy.limit(mine.map(view), now: now),
                                   idle: idle.count, abandoned: abandoned.count)
            for connection in idle.prefix(plan.closeIdle) { drop(connection, reason: "making room for a fresh connection") }
            for connection in abandoned.prefix(plan.closeAbandoned) {
                drop(connection, reason: "making room: its caller gave up and new calls wait")
            }
            for _ in 0..<plan.open { startConnect(origin) }
        }
    }

    private func view(_ call: PooledCall) -> HTTPPoolPolicy.OpenRequest {
        HTTPPoolPolicy.OpenRequest(sentAt: call.sentAt, deadline: call.deadline, abandoned: call.isAbandoned,
                                   stalled: call.stalled, joinedDeadline: call.joined.lazy.map(\.deadline).min())
    }

    private func view(_ connection: HTTPConnection) -> HTTPPoolPolicy.Connection {
        connection.call.map { .busy(view($0)) } ?? .idle(since: connection.idleSince)
    }

    /// The open request `call` repeats, sent for a caller that gave up on it.
    private func openCopy(of call: PooledCall) -> PooledCall? {
        for connection in connections where connection.origin == call.origin {
            if let open = connection.call, open.isAbandoned, open.request == call.request { return open }
        }
        return nil
    }

    /// `call`'s group has as many requests open as it may.
    private func atGroupLimit(_ call: PooledCall) -> Bool {
        guard let group = call.call.group else { return false }
        return policy.groupIsFull(open: connections.count { $0.call?.call.group == group })
    }

    /// Counts requests that became stalled, logs while any is (at most once per `stallWarningEveryMs`) and updates
    /// the in-flight gauge.
    private func watchStalls(now: Int64) {
        var stalled = 0
        var newly = 0
        var oldest: PooledCall?
        for connection in connections {
            guard let call = connection.call, policy.isStalled(sentAt: call.sentAt, now: now) else { continue }
            stalled += 1
            if oldest == nil || call.sentAt < oldest!.sentAt { oldest = call }
            if !call.stalled {
                call.stalled = true
                newly += 1
            }
        }
        let inFlight = connections.count { $0.call != nil }
        counts.readsInFlight.store(inFlight, ordering: .relaxed)
        counts.readsStalled.add(newly, ordering: .relaxed)
        stalledSinceWarning += newly
        guard let oldest, policy.stallWarningDue(now: now, lastWarning: lastStallWarning) else {
            return
        }
        lastStallWarning = now
        Log.warn("prefect.reads_stalled", [
            "host": oldest.origin.authority, "stalled": String(stalled),
            "newly_stalled": String(stalledSinceWarning), "in_flight": String(inFlight), "waiting": String(waiting.count),
            "oldest_s": String((now - oldest.sentAt) / 1000), "oldest": oldest.call.path,
            "note": "Prefect has not answered these reads for over \(options.stallMs) ms; other reads go on up to "
                + "\(options.extraConnectionsPerHost) extra connections. Check the server's database and its load.",
        ])
        stalledSinceWarning = 0
    }

    /// The most recently used idle connection for `call` (so spare ones age out); a retried call takes only a
    /// connection that has not answered anything yet.
    private func idleConnection(for call: PooledCall) -> HTTPConnection? {
        var best: HTTPConnection?
        for connection in connections where connection.isIdle && connection.origin == call.origin {
            if call.retried && connection.served > 0 { continue }
            if best == nil || connection.idleSince > best!.idleSince { best = connection }
        }
        return best
    }

    private func handle(_ outcome: HTTPConnection.Outcome, on connection: HTTPConnection, now: Int64) {
        switch outcome {
        case .pending:
            break
        case .answered(let reply, let reusable, let call):
            call.finish(.success(reply))
            for joined in call.joined { joined.finish(.success(reply)) }
            call.joined = []
            if reusable { connection.becameIdle(now: now) } else { drop(connection, reason: "not kept alive") }
        case .failed(let reason, let beforeAnyByte):
            let reused = connection.served > 0
            let call = connection.takeCall()
            drop(connection, reason: reason)
            guard let call else { return }
            requeueJoined(call)
            if beforeAnyByte && reused && !call.retried && !call.isFinished {
                call.retried = true
                waiting.insert(call, at: 0)
                Log.debug("prefect.http_retry", ["host": call.origin.authority, "reason": reason])
            } else {
                call.finish(.failure(HTTPFailure(.connectionLost, "\(call.origin.authority): \(reason)")))
            }
        case .idleClosed(let reason):
            drop(connection, reason: reason)
        }
    }

    /// The calls that waited on `call`'s answer are sent themselves: its copy is no longer open.
    private func requeueJoined(_ call: PooledCall) {
        waiting.insert(contentsOf: call.joined.filter { !$0.isFinished }, at: 0)
        call.joined = []
    }

    private func drop(_ connection: HTTPConnection, reason: String) {
        if let call = connection.call { requeueJoined(call) }
        connections.removeAll { $0 === connection }
        Log.debug("prefect.http_closed", ["host": connection.origin.authority, "connection": String(connection.id),
                                          "reason": reason])
    }

    // MARK: - Waiting

    private func waitForEvents(now: Int64) {
        let timeout = policy.pollTimeout(now: now, waitingDeadlines: waiting.map(\.deadline),
                                         connections: connections.map(view), connectDeadlines: opening.map(\.deadline),
                                         lastStallWarning: lastStallWarning)
        let polled = connections
        let connects = opening
        var fds = [pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)]
        for connection in polled { fds.append(pollfd(fd: connection.stream.fd, events: connection.pollEvents, revents: 0)) }
        for pending in connects { fds.append(pollfd(fd: pending.fd, events: pending.events, revents: 0)) }
        let ready = poll(&fds, nfds_t(fds.count), Int32(clamping: timeout))
        guard ready > 0 else { return }
        if fds[0].revents != 0 { drainWake() }
        let after = monotonicMs()
        for (index, connection) in polled.enumerated() where fds[index + 1].revents != 0 || connection.stream.readWantsWrite {
            handle(connection.service(fds[index + 1].revents), on: connection, now: after)
        }
        for (index, pending) in connects.enumerated() where fds[polled.count + index + 1].revents != 0 {
            step(pending, now: after)
        }
    }

    private func shutDown() {
        let reason = HTTPFailure(.notAccepted, "the relay is shutting down")
        counts.readsInFlight.store(0, ordering: .relaxed)
        for connection in connections {
            guard let call = connection.takeCall() else { continue }
            call.finish(.failure(reason))
            for joined in call.joined { joined.finish(.failure(reason)) }
        }
        connections.removeAll()
        opening.removeAll()  // each closes its socket
        for call in waiting { call.finish(.failure(reason)) }
        waiting.removeAll()
        for call in takeInbox().calls { call.finish(.failure(reason)) }
    }
}

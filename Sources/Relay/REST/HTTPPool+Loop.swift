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
            waitForEvents(now: now)
        }
    }

    // MARK: - Scheduling

    /// Fails calls past their deadline and drops connections idle too long.
    private func expire(now: Int64) {
        waiting.removeAll { call in
            guard call.isFinished || now >= call.deadline else { return false }
            call.finish(.failure(HTTPFailure(reason: "\(call.origin.authority): no connection free within "
                                                     + "\(call.call.timeoutSeconds) s")))
            return true
        }
        for connection in connections {
            if let call = connection.call, now >= call.deadline {
                call.finish(.failure(HTTPFailure(reason: "\(call.origin.authority) did not answer within "
                                                         + "\(call.call.timeoutSeconds) s")))
                drop(connection, reason: "timed out")
            } else if connection.isIdle, now - connection.idleSince >= Int64(options.idleTimeoutMs) {
                drop(connection, reason: "idle")
            }
        }
    }

    /// Hands waiting calls, oldest first, to idle connections of their origin, and opens connections for the rest
    /// (up to the per-host limit).
    private func dispatch(now: Int64) {
        var index = 0
        while index < waiting.count {
            let call = waiting[index]
            if let connection = idleConnection(for: call) {
                waiting.remove(at: index)
                handle(connection.start(call), on: connection, now: now)
            } else {
                index += 1
            }
        }
        var origins: [Origin] = []
        for call in waiting where !origins.contains(call.origin) { origins.append(call.origin) }
        for origin in origins {
            let pending = connecting.values.count { $0 == origin }
            var open = pending + connections.count { $0.origin == origin }
            var needed = waiting.count { $0.origin == origin } - pending
            // A retried call waits for a fresh connection: idle reused ones must make room for it at the limit.
            while needed > 0, open >= options.maxConnectionsPerHost,
                  let idle = connections.first(where: { $0.origin == origin && $0.isIdle }) {
                drop(idle, reason: "making room for a fresh connection")
                open -= 1
            }
            while needed > 0, open < options.maxConnectionsPerHost {
                startConnect(origin)
                needed -= 1
                open += 1
            }
        }
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
            if reusable { connection.becameIdle(now: now) } else { drop(connection, reason: "not kept alive") }
        case .failed(let reason, let beforeAnyByte):
            let reused = connection.served > 0
            let call = connection.takeCall()
            drop(connection, reason: reason)
            guard let call else { return }
            if beforeAnyByte && reused && !call.retried && !call.isFinished {
                call.retried = true
                waiting.insert(call, at: 0)
                Log.debug("prefect.http_retry", ["host": call.origin.authority, "reason": reason])
            } else {
                call.finish(.failure(HTTPFailure(reason: "\(call.origin.authority): \(reason)")))
            }
        case .idleClosed(let reason):
            drop(connection, reason: reason)
        }
    }

    private func drop(_ connection: HTTPConnection, reason: String) {
        connections.removeAll { $0 === connection }
        Log.debug("prefect.http_closed", ["host": connection.origin.authority, "connection": String(connection.id),
                                          "reason": reason])
    }

    // MARK: - Waiting

    private func waitForEvents(now: Int64) {
        var timeout: Int64 = -1
        func soonest(_ at: Int64) { timeout = timeout < 0 ? max(0, at - now) : min(timeout, max(0, at - now)) }
        for call in waiting { soonest(call.deadline) }
        for connection in connections {
            if let call = connection.call { soonest(call.deadline) } else {
                soonest(connection.idleSince + Int64(options.idleTimeoutMs))
            }
        }
        for pending in opening { soonest(pending.deadline) }
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
        let reason = HTTPFailure(reason: "the relay is shutting down")
        for connection in connections { connection.takeCall()?.finish(.failure(reason)) }
        connections.removeAll()
        opening.removeAll()  // each closes its socket
        for call in waiting { call.finish(.failure(reason)) }
        waiting.removeAll()
        for call in takeInbox().calls { call.finish(.failure(reason)) }
    }
}

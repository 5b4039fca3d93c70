import RelayCore

// Carrying out the machine's actions, on the loop thread: the sockets, the callers' answers, the counts and the log
// lines. What to do and when is the machine's (`HTTPPoolStateMachine`).

extension HTTPPool {
    /// Carries out every action in the buffer, and those that carrying them out brings (a send that fails at
    /// once feeds the machine again), then empties it. `answer`: the reply the `.succeed` actions hand out.
    func perform(answer: HTTPReply? = nil) {
        assertOnLoop()
        var index = 0
        while index < actions.count {
            let action = actions[index]
            index += 1
            perform(action, answer: answer)
        }
        actions.removeAll(keepingCapacity: true)
    }

    private func perform(_ action: HTTPPoolStateMachine.Action, answer: HTTPReply?) {
        switch action {
        case .connect(let id, let origin):
            startConnect(id, to: origins[origin.value])
        case .abortConnect(let id):
            abortConnect(id)
        case .send(let id, on: let connectionID):
            guard let call = calls[id], let connection = connection(connectionID) else {
                preconditionFailure("send: \(id) or connection \(connectionID) unknown")
            }
            // Only a failed write can come of it at once; an answer comes through poll().
            _ = feed(connection.start(call), on: connection, now: monotonicMs())
        case .close(let id, let reason):
            guard let index = connections.firstIndex(where: { $0.id == id }) else {
                preconditionFailure("close: no connection \(id)")
            }
            let connection = connections.remove(at: index)
            Log.debug("prefect.http_closed", ["host": connection.origin.authority, "connection": String(id.value),
                                              "reason": words(for: reason)])
        case .succeed(let id):
            guard let answer else { preconditionFailure("succeed: \(id) with no answer read") }
            caller(id).finish(.success(answer))
        case .fail(let id, let failure):
            let call = caller(id)
            call.finish(.failure(httpFailure(failure, for: call)))
        case .abandon(let id, on: let connection):
            let call = caller(id)
            counts.readsAbandoned.add(1, ordering: .relaxed)  // before the caller hears of it
            call.finish(.failure(httpFailure(.timedOut, for: call)))
            Log.debug("prefect.http_abandoned", ["host": call.origin.authority, "connection": String(connection.value),
                                                 "path": call.call.path])
        case .join(let id, on: _):
            guard let call = calls[id] else { preconditionFailure("join: \(id) unknown") }
            Log.debug("prefect.http_joined", ["host": call.origin.authority, "path": call.call.path])
        case .retry(let id, let reason):
            guard let call = calls[id] else { preconditionFailure("retry: \(id) unknown") }
            Log.debug("prefect.http_retry", ["host": call.origin.authority, "reason": reason])
        case .countStalled(let count):
            counts.readsStalled.add(count, ordering: .relaxed)
        case .warnStalled(let report):
            warn(report)
        }
    }

    /// The caller the machine is done with: taken out, for its answer.
    private func caller(_ id: HTTPPoolStateMachine.CallID) -> PooledCall {
        guard let call = calls.removeValue(forKey: id) else { preconditionFailure("\(id) answered twice or unknown") }
        return call
    }

    private func connection(_ id: HTTPPoolStateMachine.ConnectionID) -> HTTPConnection? {
        connections.first { $0.id == id }
    }

    private func httpFailure(_ failure: HTTPPoolStateMachine.Failure, for call: PooledCall) -> HTTPFailure {
        let host = call.origin.authority
        switch failure {
        case .noConnectionFree:
            return HTTPFailure(.noConnectionFree, "\(host): no connection free within \(call.call.timeoutSeconds) s")
        case .timedOut:
            return HTTPFailure(.timedOut, "\(host) did not answer within \(call.call.timeoutSeconds) s "
                                   + "(the request stays open; asking again waits for its answer)")
        case .connectFailed(let reason): return HTTPFailure(.connectFailed, "\(host): \(reason)")
        case .connectTimedOut: return HTTPFailure(.connectFailed, "\(host): connect to \(host) timed out")
        case .connectionLost(let reason): return HTTPFailure(.connectionLost, "\(host): \(reason)")
        case .shuttingDown: return HTTPFailure(.notAccepted, "the relay is shutting down")
        }
    }

    private func words(for reason: HTTPPoolStateMachine.CloseReason) -> String {
        switch reason {
        case .idle(let words): words
        case .holdOver: "no answer within \(options.abandonedHoldMs / 1000) s"
        case .makingRoom: "making room for a fresh connection"
        case .makingRoomForWaiting: "making room: its caller gave up and new calls wait"
        case .notKeptAlive: "not kept alive"
        case .failed(let words): words
        case .shuttingDown: "the relay is shutting down"
        }
    }

    private func warn(_ report: HTTPPoolStateMachine.StallReport) {
        Log.warn("prefect.reads_stalled", [
            "host": origins[report.origin.value].authority, "stalled": String(report.stalled),
            "newly_stalled": String(report.newlyStalled), "in_flight": String(report.inFlight),
            "waiting": String(report.waiting), "oldest_s": String(report.oldestMs / 1000),
            "oldest": connection(report.oldest)?.call?.call.path ?? "",
            "note": "Prefect has not answered these reads for over \(options.stallMs) ms; other reads go on up to "
                + "\(options.extraConnectionsPerHost) extra connections. Check the server's database and its load.",
        ])
    }
}

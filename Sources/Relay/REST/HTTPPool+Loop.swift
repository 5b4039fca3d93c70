import Glibc
import RelayCore

// The pool's loop: everything here runs on its own thread. It turns what the inbox and poll() report into the
// machine's events, and carries out the actions the machine answers (`HTTPPool+Actions`); it decides nothing.

extension HTTPPool {
    func run() {
        enterLoop()
        while true {
            let (calls, connected, closing) = takeInbox()
            // Before the close check: calls handed over in the same turn as the close are failed with the rest,
            // not dropped unanswered (their callers would wait forever).
            for call in calls { admit(call) }
            if closing {
                shutDown()
                return
            }
            let now = monotonicMs()
            for result in connected { adopt(result, now: now) }
            machine.turn(now: now, into: &actions)
            perform()
            counts.readsInFlight.store(machine.inFlight, ordering: .relaxed)
            waitForEvents(timeout: machine.pollTimeout(now: now))
        }
    }

    /// Numbers a caller's call and hands it to the machine.
    private func admit(_ call: PooledCall) {
        lastCallID += 1
        let id = HTTPPoolStateMachine.CallID(lastCallID)
        calls[id] = call
        machine.callArrived(HTTPPoolStateMachine.Call(id: id, origin: originID(call.origin), group: call.call.group,
                                                      request: call.request, deadline: call.deadline))
    }

    private func originID(_ origin: Origin) -> HTTPPoolStateMachine.OriginID {
        if let id = originIDs[origin] { return id }
        let id = HTTPPoolStateMachine.OriginID(origins.count)
        origins.append(origin)
        originIDs[origin] = id
        return id
    }

    /// Feeds what a step of I/O on `connection` came to. The answer, when there is one, is what the `.succeed`
    /// actions it brings hand out.
    func feed(_ outcome: HTTPConnection.Outcome, on connection: HTTPConnection, now: Int64) -> HTTPReply? {
        assertOnLoop()
        switch outcome {
        case .pending:
            return nil
        case .answered(let reply, let reusable):
            machine.answered(connection.id, reusable: reusable, now: now, into: &actions)
            return reply
        case .failed(let reason, let beforeAnyByte):
            machine.requestFailed(connection.id, reason, beforeAnyByte: beforeAnyByte, into: &actions)
            return nil
        case .idleClosed(let reason):
            machine.idleClosed(connection.id, reason, into: &actions)
            return nil
        }
    }

    // MARK: - Waiting

    /// Sleeps in poll() for at most `timeout` ms (-1: until woken), then feeds what the sockets report.
    private func waitForEvents(timeout: Int64) {
        let polled = connections
        let connects = opening
        var fds = [pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)]
        fds.reserveCapacity(1 + polled.count + connects.count)
        for connection in polled { fds.append(pollfd(fd: connection.stream.fd, events: connection.pollEvents, revents: 0)) }
        for pending in connects { fds.append(pollfd(fd: pending.fd, events: pending.events, revents: 0)) }
        let ready = poll(&fds, nfds_t(fds.count), Int32(clamping: timeout))
        guard ready > 0 else { return }
        if fds[0].revents != 0 { drainWake() }
        let after = monotonicMs()
        for (index, connection) in polled.enumerated() where fds[index + 1].revents != 0 || connection.stream.readWantsWrite {
            // Closed meanwhile by an action for another socket (a repeat's copy given up): nothing to read for.
            guard connections.contains(where: { $0 === connection }) else { continue }
            let answer = feed(connection.service(fds[index + 1].revents), on: connection, now: after)
            perform(answer: answer)
        }
        for (index, pending) in connects.enumerated() where fds[polled.count + index + 1].revents != 0 {
            step(pending, now: after)
            perform()
        }
    }

    private func shutDown() {
        counts.readsInFlight.store(0, ordering: .relaxed)
        machine.shutDown(into: &actions)
        perform()
        connections.removeAll()
        opening.removeAll()  // each closes its socket
        connecting.removeAll()
        let reason = HTTPFailure(.notAccepted, "the relay is shutting down")
        for call in takeInbox().calls { call.finish(.failure(reason)) }
    }
}

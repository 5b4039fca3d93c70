// What the loop reports, one `mutating func` each. Actions are appended to the loop's buffer (`into:`) rather than
// returned in a new array: the loop keeps one buffer and empties it each turn, so a call costs no array of its own.

extension HTTPPoolStateMachine {
    // MARK: - Calls

    /// A caller's call arrives. It is placed at the next turn, with whatever else came in the same look.
    public mutating func callArrived(_ call: Call) {
        waiting.append(call)
        turnDue = true
    }

    // MARK: - Connects

    /// The connection opened: idle from `now`.
    public mutating func connected(_ id: ConnectionID, now: Int64) {
        let index = index(of: id)
        guard case .connecting = connections[index].state else { preconditionFailure("connected: \(id) is not connecting") }
        connections[index].state = .idle(since: now)
        turnDue = true
    }

    /// The connection could not be opened: the oldest call waiting for its origin gets the error. One failed
    /// connect fails one call; the others may get the next connection.
    public mutating func connectFailed(_ id: ConnectionID, _ reason: String, into actions: inout [Action]) {
        let index = index(of: id)
        guard case .connecting = connections[index].state else {
            preconditionFailure("connectFailed: \(id) is not connecting")
        }
        let origin = connections.remove(at: index).origin
        failOldestWaiting(for: origin, .connectFailed(reason), into: &actions)
        turnDue = true
    }

    // MARK: - Requests

    /// The answer to the request on `id` is read (the loop holds it): its caller, unless it gave up, and every
    /// repeat joined to it get it. `reusable`: the connection may carry another request.
    public mutating func answered(_ id: ConnectionID, reusable: Bool, now: Int64, into actions: inout [Action]) {
        let index = index(of: id)
        guard case .leased(let request) = connections[index].state else {
            preconditionFailure("answered: no request open on connection \(id)")
        }
        if !request.abandoned { actions.append(.succeed(request.call.id)) }
        for joined in request.joined { actions.append(.succeed(joined.id)) }
        connections[index].served += 1
        if reusable {
            connections[index].state = .idle(since: now)
        } else {
            connections.remove(at: index)
            actions.append(.close(id, .notKeptAlive))
        }
        turnDue = true
    }

    /// The request on `id` got no usable answer and the connection is done. `beforeAnyByte`: nothing of a response
    /// came, so on a reused connection the server most likely closed it while idle and never saw the request: it is
    /// sent once more, on a fresh connection (every call through the pool is a read). Otherwise its caller fails.
    public mutating func requestFailed(_ id: ConnectionID, _ reason: String, beforeAnyByte: Bool,
                                       into actions: inout [Action]) {
        let index = index(of: id)
        guard case .leased(var request) = connections[index].state else {
            preconditionFailure("requestFailed: no request open on connection \(id)")
        }
        let reused = connections[index].served > 0
        close(at: index, .failed(reason), into: &actions)  // its repeats go back to waiting
        guard !request.abandoned else { return }  // its caller has had its answer
        if beforeAnyByte && reused && !request.call.retried {
            request.call.retried = true
            waiting.insert(request.call, at: 0)
            actions.append(.retry(request.call.id, reason: reason))
        } else {
            actions.append(.fail(request.call.id, .connectionLost(reason)))
        }
    }

    /// An idle connection was closed by the server (or it sent bytes nobody asked for): it can't be reused.
    public mutating func idleClosed(_ id: ConnectionID, _ reason: String, into actions: inout [Action]) {
        let index = index(of: id)
        guard case .idle = connections[index].state else { preconditionFailure("idleClosed: connection \(id) is not idle") }
        close(at: index, .failed(reason), into: &actions)
    }

    // MARK: - Shutdown

    /// The pool stops: every caller still waiting hears so, every connection closes or stops opening.
    public mutating func shutDown(into actions: inout [Action]) {
        for connection in connections {
            switch connection.state {
            case .connecting:
                actions.append(.abortConnect(connection.id))
                continue
            case .leased(let request):
                if !request.abandoned { actions.append(.fail(request.call.id, .shuttingDown)) }
                for joined in request.joined { actions.append(.fail(joined.id, .shuttingDown)) }
            case .idle:
                break
            }
            actions.append(.close(connection.id, .shuttingDown))
        }
        for call in waiting { actions.append(.fail(call.id, .shuttingDown)) }
        connections.removeAll()
        waiting.removeAll()
        inFlight = 0
        turnDue = false
    }

    // MARK: - Shared

    func index(of id: ConnectionID) -> Int {
        // A linear search: an origin has at most its hard cap (12 by default), and the relay talks to one or two.
        guard let index = connections.firstIndex(where: { $0.id == id }) else {
            preconditionFailure("no connection \(id) in the pool")
        }
        return index
    }

    /// Closes the connection at `index`; the repeats waiting on its request go back to the front of the queue, to
    /// be sent themselves: the copy they waited for is no longer open.
    mutating func close(at index: Int, _ reason: CloseReason, into actions: inout [Action]) {
        let connection = connections.remove(at: index)
        if case .leased(let request) = connection.state, !request.joined.isEmpty {
            waiting.insert(contentsOf: request.joined, at: 0)
        }
        actions.append(.close(connection.id, reason))
        turnDue = true
    }

    mutating func failOldestWaiting(for origin: OriginID, _ failure: Failure, into actions: inout [Action]) {
        guard let index = waiting.firstIndex(where: { $0.origin == origin }) else { return }
        actions.append(.fail(waiting.remove(at: index).id, failure))
    }

    /// Changes the request open on the connection at `index` in place: the enum's payload is taken out first, so
    /// its list of repeats has one owner and isn't copied.
    mutating func withRequest<Result>(at index: Int, _ body: (inout OpenRequest) -> Result) -> Result {
        guard case .leased(var request) = connections[index].state else {
            preconditionFailure("no request open on connection \(connections[index].id)")
        }
        connections[index].state = .idle(since: 0)  // a placeholder while `request` is the only copy
        defer { connections[index].state = .leased(request) }
        return body(&request)
    }
}

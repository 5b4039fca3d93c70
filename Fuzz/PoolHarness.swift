// The REST pool's policy (`HTTPPoolPolicy`) driving a simulated origin: each input byte pair is an event (a call
// arrives, time passes, an answer comes, a caller gives up, the loop takes a turn) and the simulation does what the
// policy says, as `HTTPPool`'s loop does with sockets. Whatever the order and timing, the pool never holds more than
// its hard cap, a plan never closes what isn't there, a waiting call is never left with nothing to wake the loop
// for it, and the poll timeout never sleeps past a deadline.

func fuzzPool(_ data: [UInt8]) {
    var options = HTTPPoolPolicy.Options()
    options.maxConnectionsPerHost = 1 + Int(data.first ?? 0) % 6
    options.extraConnectionsPerHost = Int(data.dropFirst().first ?? 0) % 7
    let policy = HTTPPoolPolicy(options: options)
    let cap = options.maxConnectionsPerHost + options.extraConnectionsPerHost
    var now: Int64 = 1_000
    var connections: [HTTPPoolPolicy.Connection] = []
    var waiting: [Int64] = []  // the deadlines of calls with no connection yet
    var lastWarning: Int64?
    /// One loop turn: idle and abandoned connections that are done close, waiting calls get connections as the plan
    /// says, and the timeout it would sleep is checked against what is waiting.
    func turn() {
        let open = connections.count
        connections.removeAll { connection in
            switch connection {
            case .idle(let since): policy.idleClose(since: since, openToOrigin: open, now: now) != nil
            case .busy(let request): policy.holdIsOver(request, now: now)
            }
        }
        let limit = policy.limit(connections, now: now)
        fuzzCheck(limit >= options.maxConnectionsPerHost && limit <= cap, "limit \(limit) outside its bounds")
        // Idle connections take waiting calls first, as the loop does.
        while !waiting.isEmpty, let at = connections.firstIndex(where: { if case .idle = $0 { true } else { false } }) {
            connections[at] = .busy(.init(sentAt: now, deadline: waiting.removeFirst()))
        }
        let idle = connections.count { if case .idle = $0 { true } else { false } }
        let abandoned = connections.count { if case .busy(let request) = $0 { request.abandoned } else { false } }
        let plan = policy.plan(needed: waiting.count, open: connections.count, limit: limit, idle: idle,
                               abandoned: abandoned)
        fuzzCheck(plan.closeIdle <= idle && plan.closeAbandoned <= abandoned && plan.open >= 0, "an impossible plan \(plan)")
        fuzzCheck(plan.open <= waiting.count, "opens more than the calls need")
        for _ in 0..<plan.closeIdle {
            if let at = connections.firstIndex(where: { if case .idle = $0 { true } else { false } }) { connections.remove(at: at) }
        }
        for _ in 0..<plan.closeAbandoned {
            if let at = connections.firstIndex(where: { if case .busy(let request) = $0 { request.abandoned } else { false } }) {
                connections.remove(at: at)
            }
        }
        for _ in 0..<plan.open { connections.append(.busy(.init(sentAt: now, deadline: waiting.removeFirst()))) }
        fuzzCheck(connections.count <= cap, "\(connections.count) connections past the hard cap \(cap)")
        let timeout = policy.pollTimeout(now: now, waitingDeadlines: waiting, connections: connections,
                                         connectDeadlines: [], lastStallWarning: lastWarning)
        if !waiting.isEmpty || !connections.isEmpty {
            fuzzCheck(timeout >= 0, "calls or connections, and the loop would sleep until woken")
        }
        for deadline in waiting { fuzzCheck(timeout <= max(0, deadline - now), "sleeps past a waiting call's deadline") }
    }

    var index = 2
    while index + 1 < data.count {
        let (op, argument) = (data[index] % 6, Int64(data[index + 1]))
        index += 2
        switch op {
        case 0: now += argument * 37  // time passes
        case 1: waiting.append(now + 1 + argument * 100)  // a call arrives
        case 2:  // the oldest busy request is answered
            if let at = connections.firstIndex(where: { if case .busy = $0 { true } else { false } }) {
                connections[at] = .idle(since: now)
            }
        case 3:  // callers past their deadline give up: a waiting one goes, an open request is abandoned
            waiting.removeAll { $0 <= now }
            for at in connections.indices {
                if case .busy(var request) = connections[at], request.deadline <= now {
                    request.abandoned = true
                    connections[at] = .busy(request)
                }
            }
        case 4: turn()
        default:
            if policy.isStalled(sentAt: now - argument * 20, now: now), policy.stallWarningDue(now: now, lastWarning: lastWarning) {
                lastWarning = now
            }
        }
    }
}

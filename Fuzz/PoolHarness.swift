// The REST pool's state machine (`HTTPPoolStateMachine`) fed random sequences of every event it takes: calls
// arriving (two origins, repeated requests, groups), connects that succeed, fail or hang, answers that keep the
// connection or not, failures before and after a byte, idle closes, the loop sleeping, waking late or turning again,
// and shutdown. Beside it, `PoolMirror` applies each action to what the loop would hold and stops the run on any
// action impossible there (AsyncHTTPClient's state fuzz test: the mock is the invariant). Checked:
// - an origin never has more than its hard cap open or opening;
// - nothing is closed, aborted, sent on or answered that isn't there, and every caller is answered exactly once;
// - the loop never sleeps with work due: a turn one ms before the timeout the machine asked for does nothing;
// - after every turn no caller is left unanswered at or past its deadline. The loop sleeps at most the timeout, so
//   in the machine's time each caller hears by its deadline with no slack at all; the slack in wall time is only
//   poll()'s lateness in waking. A late wake (a loaded machine) is modelled too: then a caller hears at that turn.

func fuzzPool(_ data: [UInt8]) {
    guard data.count >= 3 else { return }
    var options = HTTPPoolPolicy.Options()
    options.maxConnectionsPerHost = 1 + Int(data[0]) % 6
    options.extraConnectionsPerHost = Int(data[1]) % 7
    options.maxInFlightPerGroup = 1 + Int(data[2]) % 4
    var run = PoolRun(options: options)
    var index = 3
    while index + 1 < data.count {
        run.step(data[index] % 9, Int(data[index + 1]))
        index += 2
    }
    run.machine.shutDown(into: &run.actions)
    run.mirror.apply(&run.actions)
    fuzzCheck(run.mirror.callers.isEmpty && run.mirror.connections.isEmpty, "shutdown left callers or connections")
}

/// The machine, the mirror beside it, and the loop's clock and action buffer.
struct PoolRun {
    var machine: HTTPPoolStateMachine
    var mirror: PoolMirror
    var actions: [HTTPPoolStateMachine.Action] = []
    var now: Int64 = 1_000
    var lastCall = 0

    init(options: HTTPPoolPolicy.Options) {
        machine = HTTPPoolStateMachine(policy: HTTPPoolPolicy(options: options), connectTimeoutMs: 5_000)
        mirror = PoolMirror(cap: options.maxConnectionsPerHost + options.extraConnectionsPerHost)
    }

    /// One event, chosen by `op`, shaped by `argument`.
    mutating func step(_ op: UInt8, _ argument: Int) {
        switch op {
        case 0:  // a call arrives: two origins, four requests (repeats join abandoned copies), some in groups
            lastCall += 1
            let call = HTTPPoolStateMachine.Call(
                id: .init(lastCall), origin: .init(argument & 1), group: argument % 3 == 0 ? "run\(argument & 1)" : nil,
                request: [UInt8(argument >> 1 & 3)], deadline: now + 1 + Int64(argument >> 4) * 1_000)
            mirror.callers[call.id] = call.deadline
            machine.callArrived(call)
        case 1:  // the loop sleeps: woken by an event before its timeout, or at it
            let timeout = machine.pollTimeout(now: now)
            let slept = Int64(argument) * 250
            now += timeout < 0 ? slept : min(slept, timeout)
            turn()
        case 2:  // the loop wakes late (a loaded machine)
            now += max(0, machine.pollTimeout(now: now)) + Int64(argument) * 40
            turn()
        case 3, 4:  // a connect succeeds or fails
            guard let id = mirror.pick(.connecting, argument) else { return }
            if op == 3 {
                machine.connected(id, now: now)
                mirror.connections[id]!.state = .idle
            } else {
                mirror.connections[id] = nil
                machine.connectFailed(id, "refused", into: &actions)
            }
        case 5, 6:  // an answer (kept alive or not), or a failure (before any byte or after)
            guard let id = mirror.pick(.leased, argument) else { return }
            if op == 5 {
                mirror.connections[id]!.state = .idle
                machine.answered(id, reusable: argument & 1 == 0, now: now, into: &actions)
                mirror.answerRead = true
            } else {
                machine.requestFailed(id, "reset", beforeAnyByte: argument & 1 == 0, into: &actions)
            }
        case 7:
            if let id = mirror.pick(.idle, argument) { machine.idleClosed(id, "peer closed", into: &actions) }
        default:
            turn()
        }
        mirror.apply(&actions)
    }

    /// A turn of the loop, then the deadline and sleep checks.
    mutating func turn() {
        machine.turn(now: now, into: &actions)
        mirror.apply(&actions)
        for (id, deadline) in mirror.callers {
            fuzzCheck(deadline > now, "\(id) unanswered \(now - deadline) ms past its deadline")
        }
        let timeout = machine.pollTimeout(now: now)
        guard timeout > 0 else { return }
        var probe = machine
        probe.turn(now: now + timeout - 1, into: &actions)
        fuzzCheck(actions.isEmpty, "sleeps \(timeout) ms with work due before: \(actions)")
    }
}

/// What the loop would hold, built from the actions alone.
struct PoolMirror {
    enum State { case connecting, idle, leased }

    let cap: Int
    var connections: [HTTPPoolStateMachine.ConnectionID: (origin: HTTPPoolStateMachine.OriginID, state: State)] = [:]
    /// Callers not answered yet, with their deadlines.
    var callers: [HTTPPoolStateMachine.CallID: Int64] = [:]
    /// An answer was just read: `succeed` may follow, once per caller.
    var answerRead = false

    /// The `argument`-th connection in `state`, in id order.
    func pick(_ state: State, _ argument: Int) -> HTTPPoolStateMachine.ConnectionID? {
        let ids = connections.filter { $0.value.state == state }.keys.sorted { $0.value < $1.value }
        return ids.isEmpty ? nil : ids[argument % ids.count]
    }

    mutating func apply(_ actions: inout [HTTPPoolStateMachine.Action]) {
        for action in actions { apply(action) }
        actions.removeAll(keepingCapacity: true)
        answerRead = false
    }

    private mutating func apply(_ action: HTTPPoolStateMachine.Action) {
        switch action {
        case .connect(let id, let origin):
            fuzzCheck(connections[id] == nil, "opens connection \(id) twice")
            connections[id] = (origin, .connecting)
            let open = connections.values.count { $0.origin == origin }
            fuzzCheck(open <= cap, "\(open) connections past the hard cap \(cap)")
        case .abortConnect(let id):
            fuzzCheck(connections[id]?.state == .connecting, "aborts connection \(id), which isn't connecting")
            connections[id] = nil
        case .send(let call, on: let id):
            fuzzCheck(connections[id]?.state == .idle, "sends on connection \(id), which isn't idle")
            fuzzCheck(callers[call] != nil, "sends \(call), whose caller has had its answer")
            connections[id]!.state = .leased
        case .close(let id, _):
            fuzzCheck(connections[id] != nil && connections[id]?.state != .connecting, "closes \(id), which isn't open")
            connections[id] = nil
        case .succeed(let call):
            fuzzCheck(answerRead, "succeeds \(call) with no answer read")
            fuzzCheck(callers.removeValue(forKey: call) != nil, "answers \(call) twice")
        case .fail(let call, _):
            fuzzCheck(callers.removeValue(forKey: call) != nil, "fails \(call), answered already")
        case .abandon(let call, on: let id):
            fuzzCheck(connections[id]?.state == .leased, "abandons \(call) on \(id), which carries nothing")
            fuzzCheck(callers.removeValue(forKey: call) != nil, "abandons \(call), answered already")
        case .join(let call, on: let id):
            fuzzCheck(connections[id]?.state == .leased && callers[call] != nil, "joins \(call) to nothing open")
        case .retry(let call, _):
            fuzzCheck(callers[call] != nil, "retries \(call), answered already")
        case .countStalled(let count):
            fuzzCheck(count > 0, "counts no stall")
        case .warnStalled(let report):
            fuzzCheck(connections[report.oldest]?.state == .leased, "warns of a stall on \(report.oldest), which is idle")
        }
    }
}

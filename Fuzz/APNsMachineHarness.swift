// The APNs connection's machine (`APNsConnectionMachine`) driven through random event sequences, as its loop and
// nghttp2's callbacks would report them: pushes submitted, HEADERS sent or dropped, answers, resets, GOAWAY, PING,
// time, link closes and connect failures. Whatever the order: every submitted push ends exactly once; nothing above
// a GOAWAY's last-stream-id is reported lost; a push that went out is never sent again by the machine (so a Live
// Activity start is never repeated on an unknown fate); the machine never gives more streams than its limit; and
// its poll timeout never sleeps past a stream's deadline.

func fuzzAPNsMachine(_ data: [UInt8]) {
    var options = APNsLinkPolicy.Options()
    options.maxConcurrentStreams = 1 + Int(data.first ?? 0) % 8
    var machine = APNsConnectionMachine(options: options)
    let session = APNsConnectionMachine.Session(peerStreamLimit: 1 + Int(data.dropFirst().first ?? 0) % 8)
    var now: Int64 = 0
    var nextStream: Int32 = 1
    /// What the harness knows of each push: its purpose, and whether it ever went out (HEADERS sent).
    struct Push { var purpose: PushPurpose; var wentOut = false; var ended = false }
    var pushes: [Push] = []
    var onStream: [Int32: Int] = [:]  // stream id -> push
    var queue: [Int] = []  // pushes waiting for a stream (new ones and resends)
    var lastProcessable: Int32 = .max

    func end(_ stream: Int32, _ how: APNsConnectionMachine.StreamEnd, refused: Bool = false) {
        guard let push = onStream.removeValue(forKey: stream) else { fuzzCheck(false, "an end for stream \(stream), not open"); return }
        fuzzCheck(!pushes[push].ended, "push \(push) ended twice")
        switch how {
        case .resend:
            let unseen = refused || !pushes[push].wentOut || stream > lastProcessable
            fuzzCheck(unseen || !(pushes[push].purpose == .start), "a start resent on an unknown fate (stream \(stream))")
            fuzzCheck(unseen, "a push that went out (stream \(stream)) sent again")
            pushes[push].wentOut = false  // a fresh attempt on the next link
            queue.append(push)
        case .lost:
            fuzzCheck(stream <= lastProcessable, "stream \(stream) above GOAWAY's \(lastProcessable) reported lost")
            pushes[push].ended = true
        case .answered, .timedOut, .expiredUnsent:
            pushes[push].ended = true
        }
    }
    func anyStream(_ pick: Int64) -> Int32? {
        guard !onStream.isEmpty else { return nil }
        return onStream.keys.sorted()[Int(pick) % onStream.count]
    }
    func closeLink() {
        for (stream, how) in machine.linkClosed(reason: "closed", now: now) { end(stream, how) }
        fuzzCheck(onStream.isEmpty, "streams left after the link closed: \(onStream.keys.sorted())")
        lastProcessable = .max
        nextStream = 1
    }

    var index = 2
    while index + 1 < data.count {
        let (op, argument) = (data[index] % 11, Int64(data[index + 1]))
        index += 2
        switch op {
        case 0:  // a new push waits
            pushes.append(Push(purpose: PushPurpose.allCases[Int(argument) % PushPurpose.allCases.count]))
            queue.append(pushes.count - 1)
        case 1:  // the loop's turn: connect if told, then submit what the room allows
            if machine.turn(now: now, waiting: !queue.isEmpty).connect {
                if argument % 4 == 0 {
                    // A failed connect fails what waits, as the host loop does: told "not sent"; its caller retries.
                    _ = machine.connectFailed(now: now, random: Double(argument) / 256)
                    for push in queue { pushes[push].ended = true }
                    queue = []
                } else {
                    machine.connected(now: now)
                }
            }
            var room = machine.room(session)
            fuzzCheck(room <= min(options.maxConcurrentStreams, session.peerStreamLimit), "room \(room) past the limit")
            while room > 0, !queue.isEmpty {
                let push = queue.removeFirst()
                machine.submitted(nextStream, deadline: now + 1_000)
                onStream[nextStream] = push
                nextStream += 2
                room -= 1
            }
            fuzzCheck(machine.openStreams == onStream.count, "the machine counts \(machine.openStreams) streams")
        case 2:  // HEADERS out
            if let stream = anyStream(argument) {
                machine.headersSent(stream)
                pushes[onStream[stream]!].wentOut = true
            }
        case 3:  // an answer (APNs answers only what it processed)
            if let stream = anyStream(argument), stream <= lastProcessable, pushes[onStream[stream]!].wentOut,
               let how = machine.streamClosed(stream, status: argument % 2 == 0 ? 200 : 410, refused: false, error: "") {
                fuzzCheck(how == .answered, "an answer ended as \(how)")
                end(stream, how)
            }
        case 4:  // a reset, refused or not
            let refused = argument % 3 == 0
            if let stream = anyStream(argument),
               let how = machine.streamClosed(stream, status: nil, refused: refused, error: "CANCEL") {
                end(stream, how, refused: refused)
            }
        case 5:  // HEADERS dropped unsent
            if let stream = anyStream(argument), !pushes[onStream[stream]!].wentOut, let how = machine.headersNotSent(stream) {
                end(stream, how)
            }
        case 6:  // GOAWAY
            if machine.hasLink {
                let last = Int32(argument % 16) * 2 + 1
                machine.goaway(lastStreamID: last)
                lastProcessable = min(lastProcessable, last)
            }
        case 7:  // time passes; deadlines
            let timeout = machine.pollTimeout(now: now, waiting: !queue.isEmpty, session: session)
            if !onStream.isEmpty { fuzzCheck(timeout >= 0, "streams open and the loop would sleep until woken") }
            now += argument * 16
            for (stream, how) in machine.expire(now: now) {
                fuzzCheck((how == .timedOut) == pushes[onStream[stream]!].wentOut, "stream \(stream) expired as \(how)")
                end(stream, how)
            }
        case 8:  // upkeep: PING, retire
            switch machine.upkeep(now: now, session: session) {
            case .none: break
            case .ping: machine.pingSent(now: now)
            case .retire: closeLink()
            }
        case 9:  // PING ack / a read / a failure
            if argument % 3 == 0 { machine.pingAcknowledged() } else if argument % 3 == 1 { machine.read(now: now) } else {
                machine.failed("broken")
            }
        default:  // the link dies
            if machine.hasLink { closeLink() }
        }
    }
    if machine.hasLink { closeLink() }
    fuzzCheck(onStream.isEmpty, "streams never ended")
}

import Glibc
import RelayCore

// The connection's loop: everything here runs on its own thread and owns the link and the waiting queue.

extension APNsHostLoop {
    func run() {
        turn.lock()
        defer { turn.unlock() }
        while true {
            answers.flush()
            let (incoming, closing, recycle) = takeInbox()
            for push in incoming { waiting.append(push) }
            if recycle { machine.stopNewStreams() }
            if closing {
                shutDown()
                return
            }
            let now = monotonicMs()
            let next = machine.turn(now: now, waiting: !waiting.isEmpty)
            if next.expireDeadlines {
                waiting.expire(now: now)
                link?.expire(machine.expire(now: now))
            }
            if next.connect { openLink() }
            if let link {
                submitWaiting(on: link)
                link.transmit()
                switch machine.upkeep(now: now, session: link.facts()) {
                case .none: break
                case .ping:
                    link.ping(now: now)
                    link.transmit()
                case .retire(let reason):
                    retire(link, reason: reason)
                    continue
                }
            }
            // Answers this turn made itself (a failed connect, a deadline, a retired link) leave before the loop
            // sleeps; those the socket brings in `waitForEvents` leave at the top of the next turn.
            answers.flush()
            waitForEvents(now: now)
        }
    }

    private func openLink() {
        linksOpened += 1
        let started = monotonicMs()
        do {
            let socket = try TLSSocket.connect(host: host, port: port, tls: tls, timeoutMs: options.connectTimeoutMs,
                                               proxy: proxy)
            link = try APNsConnection(socket: socket, id: linksOpened, host: self)
            machine.connected(now: monotonicMs())
            linksOpenedCount.add(1, ordering: .relaxed)
            reachability.withLock { $0 = FailureStreak() }
            Log.info("apns.connected", ["host": authority, "connection": String(linksOpened),
                                        "ms": String(monotonicMs() - started), "via": proxy?.description ?? "direct"])
        } catch {
            // Nothing was sent, so everyone waiting may retry; the client decides with its backoff.
            Log.warn("apns.connect_failed", ["host": authority, "error": "\(error)"])
            let time = SystemClock.monotonic()
            reachability.withLock { streak in
                streak = streak ?? FailureStreak()
                streak?.failed(at: time, error: "\(error)")
            }
            machine.connectFailed(now: monotonicMs(), random: Double.random(in: 0..<1))
            for push in waiting.drain() { push.finish(.notSent(.connectFailed("\(error)"))) }
        }
    }

    private func submitWaiting(on link: APNsConnection) {
        var room = machine.room(link.facts())
        var submitted = 0
        while room > 0, let push = waiting.popFirst() {
            if push.isFinished { continue }
            if !link.submit(push, authority: authority) {
                waiting.prepend([push])
                break
            }
            room -= 1
            submitted += 1
            // A large fan-out goes out as it is encoded: the first requests are on the wire, and APNs at work on
            // them, while the rest are still being submitted (at 1,000 pushes the first used to wait ~10 ms).
            if submitted % 64 == 0 { link.transmit() }
        }
    }

    /// Drops a link: its unanswered-but-unsent pushes go back to the front of the queue for a fresh link.
    private func retire(_ old: APNsConnection, reason: String) {
        old.close(ends: machine.linkClosed(reason: reason, now: monotonicMs()))
        waiting.prepend(old.resend)
        let resent = old.resend.count
        old.resend = []
        link = nil
        Log.info("apns.disconnected", ["host": authority, "connection": String(old.id), "reason": reason,
                                       "resend": String(resent)])
    }

    private func waitForEvents(now: Int64) {
        let timeout = machine.pollTimeout(now: now, waiting: !waiting.isEmpty,
                                          session: link?.facts() ?? APNsConnectionMachine.Session())
        // A direct send onto an idle link wakes the loop (`sendDirectly`), so these timers are all there is.
        var fds = [pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)]
        if let link {
            fds.append(pollfd(fd: link.socket.fd, events: Int16(POLLIN) | (link.wantsWrite ? Int16(POLLOUT) : 0), revents: 0))
        }
        turn.unlock()
        let ready = poll(&fds, nfds_t(fds.count), Int32(clamping: timeout))
        turn.lock()
        guard ready > 0 else { return }
        if fds[0].revents != 0 { drainWake() }
        if let link, fds.count > 1, fds[1].revents != 0 {
            let readable = fds[1].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0
            if readable || link.socket.readWantsWrite { link.receive(now: monotonicMs()) }
            waiting.prepend(link.resend)
            link.resend = []
        }
    }

    private func shutDown() {
        if let link { retire(link, reason: "APNs client closed") }
        for push in waiting.drain() { push.finish(.notSent(.closed)) }
        for push in takeInbox().pushes { push.finish(.notSent(.closed)) }
        answers.flush()
    }
}

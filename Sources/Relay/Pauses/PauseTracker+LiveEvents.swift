import RelayCore

/// What the socket has told about a run's custom events and artifacts, for an announce that wants its context, and
/// the wait for one that comes late: an announce with no context may wait (bounded) for a custom event that the
/// flow sent just before its pause but that reaches the socket just after it (`docs/architecture.md`). The wait
/// ends when such an event arrives (`received` wakes it), not on a poll. One that comes after the announce built its
/// props has them built again (`refreshIfBehind`: a `PauseJob.Kind.refresh`).
extension PauseTracker {
    /// The run's custom events and artifacts seen live on the socket so far.
    struct LiveEvents: Sendable {
        var events: [RunEvent]
        var artifacts: [RunArtifact]
        /// How many have come for the run (`RecentRunEvents.arrivals`): a later look with a larger count has news.
        var arrivals: Int
    }

    /// One announce waiting on a run's next event; `timer` resumes it at its deadline if nothing came.
    struct LiveWaiter {
        let id: Int
        let continuation: CheckedContinuation<Void, Never>
        let timer: Task<Void, Never>
    }

    func liveEvents(runID: String) -> LiveEvents {
        LiveEvents(events: recentEvents.events(for: runID), artifacts: recentEvents.artifacts(for: runID),
                   arrivals: recentEvents.arrivals(for: runID))
    }

    /// The run's live events once something has come for it beyond the `seen` arrivals, or at `deadline`
    /// (monotonic seconds) with what there is.
    func liveEvents(runID: String, after seen: Int, until deadline: Double) async -> LiveEvents {
        let wait = deadline - SystemClock.monotonic()
        if recentEvents.arrivals(for: runID) == seen && wait > 0 {
            lastLiveWaiter += 1
            let id = lastLiveWaiter
            await withCheckedContinuation { continuation in
                let timer = Task {
                    await withTaskExecutorPreference(RelayExecutor.shared) {
                        try? await Task.sleep(for: .seconds(wait))
                        self.wakeLiveWaiter(runID: runID, id: id)
                    }
                }
                liveWaiters[runID, default: []].append(LiveWaiter(id: id, continuation: continuation, timer: timer))
            }
        }
        return liveEvents(runID: runID)
    }

    /// A custom event or artifact for the run was kept: announces waiting for one look again, and an announced
    /// pause of the run whose props were built without it has them built again.
    func cameLate(runID: String) {
        wakeLiveWaiters(runID: runID)
        for pause in watcher.waiting(ofRun: runID) { refreshIfBehind(stateID: pause.stateID) }
    }

    /// Starts a refresh of the pause's props when its run has live events or artifacts they were not built with
    /// (one refresh per pause at a time; `finished` looks again when its announce or refresh is done).
    func refreshIfBehind(stateID: String) {
        guard let used = propsArrivals[stateID] else { return }
        guard let pause = watcher.pauses[stateID], pause.isWaiting else {
            propsArrivals[stateID] = nil
            return
        }
        let job = PauseJob(.refresh, pause)
        guard recentEvents.arrivals(for: pause.runID) > used, !runningJobs.contains(job.key) else { return }
        start(job)
    }

    /// Something came for the run: every announce waiting on it looks again.
    private func wakeLiveWaiters(runID: String) {
        guard let waiters = liveWaiters.removeValue(forKey: runID) else { return }
        for waiter in waiters {
            waiter.timer.cancel()
            waiter.continuation.resume()
        }
    }

    /// A waiter's deadline: it goes on with what there is (unless an event has already woken it).
    private func wakeLiveWaiter(runID: String, id: Int) {
        guard var waiters = liveWaiters[runID], let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        liveWaiters[runID] = waiters.isEmpty ? nil : waiters
        waiter.continuation.resume()
    }
}

import RelayCore

/// A pause's props: its run's context read from Prefect and from what the socket told the tracker, made into the
/// text its pushes carry.
extension PauseJobs {
    /// What a job wants its props built from: the pause, and what its event told (when it has one).
    struct PropsRequest {
        var pause: PauseRecord
        var flowID: String? = nil
        var flowName: String? = nil
        /// The pause's state timestamp (unix seconds, with the fraction when known).
        var pausedAt: Double? = nil
        var followed: Bool
        /// An announce: a run that has already moved past the pause gets nothing (see `buildProps`).
        var announcing = false
        /// When the Paused event arrived (monotonic seconds): an announce waits for a late custom event until
        /// `eventGrace` after it.
        var receivedAt = SystemClock.monotonic()
    }

    /// What reading a pause's context came to.
    enum PropsResult {
        /// `arrivals`: how many of the run's live events and artifacts it was built with (`RecentRunEvents.arrivals`).
        case built(WaitingProps, arrivals: Int)
        /// Announcing history: the run has already moved past the pause.
        case over
        /// Prefect could not be read (or gave nothing usable): try again later.
        case unavailable
    }

    /// Reads the run's context and builds the pause's props (the announce stores them for the reminder and the end).
    /// When `announcing`, a run that has already moved past the pause gets nothing: it is history replayed by a
    /// reconnect, and the run read ends the pause in the watcher instead.
    /// A run the socket has `followed` since before the pause needs no history reads: it told us all of it.
    func buildProps(_ request: PropsRequest, tracker: isolated PauseTracker) async -> PropsResult {
        let pause = request.pause
        // While the input rows are read: the run read for the watcher, the run's live events, and whether its
        // flow's pauses wait for one.
        guard let (gathered, read) = await gatherer.gather(
            runID: pause.runID, stateID: pause.stateID, pausedAt: request.pausedAt ?? Double(pause.pausedAt),
            flowID: request.flowID, flowName: request.flowName, readHistory: !request.followed,
            onRun: { @Sendable run in
                await tracker.contextRead(FlowRun(details: run), runID: pause.runID, flowID: run.flowID ?? request.flowID)
            })
        else {
            Log.warn("pause.context_unavailable", ["run": pause.runID, "state": pause.stateID])
            return .unavailable
        }
        var context = gathered.context
        let flowID = context.run.flowID ?? request.flowID
        if request.announcing && gathered.movedOn {
            Log.info("pause.already_over", ["run": pause.runID, "state": pause.stateID,
                                            "now": context.run.state?.name ?? "?"])
            return .over
        }
        // The input rows can take tens of ms to appear on a real server: a custom event may have come meanwhile.
        var live = SystemClock.monotonic() - read.at < PauseJobs.liveEventsFresh ? read.live
            : tracker.liveEvents(runID: pause.runID)
        var text = PauseJobs.adding(live, to: &context)
        if request.announcing && text.contextSource == .none && read.mayWait {
            // A custom event emitted just before the pause can reach the socket just after it (seen 216 ms
            // late). For a flow known to send one (or never seen), give it until `eventGrace` after the Paused event
            // arrived, looking again each time something comes for the run; a flow known to send none doesn't wait.
            let deadline = request.receivedAt + PauseJobs.eventGrace
            while text.contextSource == .none && SystemClock.monotonic() < deadline {
                live = await tracker.liveEvents(runID: pause.runID, after: live.arrivals, until: deadline)
                text = PauseJobs.adding(live, to: &context)
            }
            if text.contextSource == .none { tracker.foundNoContext(flowID: flowID) }
        }
        var run = context.run
        if run.state?.id != pause.stateID || run.state?.isPaused != true {
            // The run moved on (or lags) before we read it: describe the pause we were told about.
            run.state = RunState(id: pause.stateID, type: "PAUSED", name: pause.stateName,
                                 timestamp: Timestamp.format(Double(pause.pausedAt)),
                                 pauseTimeout: pause.timeoutAt.map { Timestamp.format(Double($0)) })
        }
        guard let props = WaitingProps(run: run, flowName: context.flowName, text: text, serverId: "",
                                       uiRoot: planner.uiRoot) else { return .unavailable }
        Log.info("pause.text", ["run": pause.runID, "title": String(props.title.prefix(60)), "category": props.category,
                                "context": text.contextSource.rawValue])
        return .built(props, arrivals: live.arrivals)
    }

    /// How long after its Paused event an announce with no context may wait for a late custom event. The flow's
    /// client sends its events on a connection of its own, so they can come well after the server's Paused event:
    /// ~90 ms on an idle machine, 216 ms on a loaded one (a test run with Prefect busy with other flows). The wait
    /// ends the moment the event is there, so the bound is paid in full only by a flow's first pause when it sends
    /// none (it is then known not to), and by a flow that sends one on some pauses only.
    static let eventGrace = 0.5

    /// The run's live events read beside its run read are taken as they are if the input rows came within this long
    /// after; otherwise they are looked at again.
    static let liveEventsFresh = 0.005

    /// Adds the run's custom events seen live on the socket (not yet in `/events/filter`) and reads the text.
    private static func adding(_ live: PauseTracker.LiveEvents, to context: inout PauseContext) -> AlertText {
        // Whole events are compared: one without an id must not be added again each time the grace loop looks.
        let stored = Set(context.events.compactMap(\.id))
        for event in live.events where event.id.map({ !stored.contains($0) }) ?? !context.events.contains(event) {
            context.events.append(event)
        }
        // Artifacts seen live, newest first, ahead of what was read (the same artifact twice changes nothing).
        let read = context.artifacts
        context.artifacts = live.artifacts + read.filter { artifact in !live.artifacts.contains(artifact) }
        return AlertText(context: context, readers: .live)
    }

    /// The props the pause was announced with, or (none stored: announced before they were kept, or unreadable)
    /// built again; nil when neither the store nor Prefect could be read.
    func storedProps(_ pause: PauseRecord, tracker: isolated PauseTracker, followed: Bool) async -> WaitingProps? {
        guard let read = await ledger.props(stateID: pause.stateID) else { return nil }
        if let text = read, let json = try? JSONParser.parse(text), let props = WaitingProps(json: json) {
            return props
        }
        if case .built(let props, _) = await buildProps(PropsRequest(pause: pause, followed: followed), tracker: tracker) {
            return props
        }
        return nil
    }
}

/// Which flows send their own context (a `work.waiting` event, an event with a `body`) around their pauses, learned
/// from the events socket and kept across restarts, so an alert waits for a late context event only where one can
/// still come (`docs/architecture.md`).
///
/// A custom event emitted just before a pause can reach the socket just after the Paused event. Waiting for it on
/// every pause costs the flows that never send one (most of them) the whole grace. So:
/// - a flow seen sending a context event for one of its runs `sendsContext`: its pauses wait (bounded) for one;
/// - a flow whose announced pause found no context, not even after the grace, `sendsNone`: no wait next time;
/// - a flow never seen waits, once, and is learned from that pause.
/// A context event that arrives after all (late, or after the flow was marked `sendsNone`) marks it `sendsContext`.
public struct FlowHabits: Sendable {
    public enum Habit: Sendable, Equatable {
        case sendsContext, sendsNone
    }

    /// A change worth storing: the flow and what was learned.
    public typealias Learned = (flowID: String, habit: Habit)

    private var habits: [String: Habit]
    /// Which flow each recent run belongs to (custom events name the run, not always the flow).
    private var runFlows: [String: String] = [:]
    private var runOrder: [String] = []
    public let runCapacity: Int

    public init(known: [String: Habit] = [:], runCapacity: Int = 4096) {
        habits = known
        self.runCapacity = runCapacity
    }

    /// Whether a pause of this flow with no context yet should wait for a late context event.
    public func shouldWait(flowID: String?) -> Bool {
        guard let flowID else { return true }
        return habits[flowID] != .sendsNone
    }

    /// A state event: remembers the run's flow (bounded; the oldest runs are forgotten first).
    public mutating func sawRun(_ runID: String, flowID: String?) {
        guard let flowID, !flowID.isEmpty, runFlows[runID] == nil else { return }
        runFlows[runID] = flowID
        runOrder.append(runID)
        if runOrder.count > runCapacity { runFlows[runOrder.removeFirst()] = nil }
    }

    /// A context event about `runID` (its flow from the event itself, else from the run's state events).
    /// Returns what to store when this is news.
    public mutating func sawContextEvent(runID: String, flowID: String?) -> Learned? {
        guard let flow = flowID ?? runFlows[runID], habits[flow] != .sendsContext else { return nil }
        habits[flow] = .sendsContext
        return (flow, .sendsContext)
    }

    /// An announce of this flow's pause found no context, even after waiting: its flows send none (unless a
    /// context event was already seen from it). Returns what to store when this is news.
    public mutating func announcedWithoutContext(flowID: String?) -> Learned? {
        guard let flowID, habits[flowID] == nil else { return nil }
        habits[flowID] = .sendsNone
        return (flowID, .sendsNone)
    }
}

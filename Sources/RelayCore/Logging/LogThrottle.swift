/// Keeps a warning that repeats from flooding the log: per event name, the first `burst` lines of a `window` are
/// written, the rest only counted; the count is written with the next line let through, or by `due(now:)` once the
/// window has passed. So no outside party (a flood of connections, a storm of failures) can make the relay write
/// more than `burst` lines per event per `window`, and nothing is lost but the repeats themselves.
public struct LogThrottle: Sendable {
    public let burst: Int
    public let window: Double

    private struct Slot {
        var windowStart: Double
        var written: Int
        var suppressed: Int
    }
    private var slots: [String: Slot] = [:]
    /// Event names are literals in the code, so this table stays small; the bound is for names made at run time.
    private static let maxSlots = 512

    public init(burst: Int = 10, window: Double = 10) {
        precondition(burst > 0 && window > 0, "LogThrottle: bad parameters")
        self.burst = burst
        self.window = window
    }

    /// Whether a line for `event` may be written now; when it may, how many lines of it were held back before it.
    public mutating func admit(_ event: String, now: Double) -> (write: Bool, suppressed: Int) {
        var slot = slots[event] ?? Slot(windowStart: now, written: 0, suppressed: 0)
        if now - slot.windowStart >= window {
            slot.windowStart = now
            slot.written = 0
        }
        guard slot.written < burst else {
            slot.suppressed += 1
            slots[event] = slot
            return (false, 0)
        }
        let held = slot.suppressed
        slot.written += 1
        slot.suppressed = 0
        if slots.count >= LogThrottle.maxSlots && slots[event] == nil { slots.removeAll(keepingCapacity: true) }
        slots[event] = slot
        return (true, held)
    }

    /// The events whose held-back lines are due for a summary (their window has passed), with their counts.
    public mutating func due(now: Double) -> [(event: String, suppressed: Int)] {
        var out: [(event: String, suppressed: Int)] = []
        for (event, slot) in slots where slot.suppressed > 0 && now - slot.windowStart >= window {
            out.append((event, slot.suppressed))
            slots[event] = Slot(windowStart: now, written: 1, suppressed: 0)
        }
        return out.sorted { $0.event < $1.event }
    }
}

extension Timestamp {
    /// Unix seconds as ISO-8601 UTC with milliseconds, e.g. `2026-11-29T22:05:57.142Z` (the form Prefect's filters take).
    public static func format(_ unix: Double) -> String {
        let millis = Int64((unix * 1000).rounded(.down))
        var days = millis >= 0 ? millis / 86_400_000 : (millis - 86_399_999) / 86_400_000
        let msOfDay = millis - days * 86_400_000
        // Civil from days (Howard Hinnant's algorithm).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ n: Int64, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        let h = msOfDay / 3_600_000, m = msOfDay / 60_000 % 60, s = msOfDay / 1000 % 60, ms = msOfDay % 1000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(h, 2)):\(pad(m, 2)):\(pad(s, 2)).\(pad(ms, 3))Z"
    }
}

extension Timestamp {
    /// Whole unix seconds (rounded down) for an optional ISO-8601 text; nil when absent or not a timestamp.
    public static func unixSeconds(_ text: String?) -> Int64? {
        guard let text, let seconds = parse(text) else { return nil }
        return Int64(seconds.rounded(.down))
    }
}

/// Prefect's ISO-8601 timestamps as unix seconds and back, parsed and formatted without Foundation.
///
/// Prefect writes event times as `2026-11-29T22:05:57.142583Z` and `prefect.state-timestamp` as
/// `2026-11-29T22:05:57.142583+00:00`; when the microseconds are zero the fraction is left out
/// (`2026-01-01T00:00:00Z`). All of these, any `±hh:mm` / `±hhmm` offset, `t`/space as the date-time
/// separator and a lower-case `z` are accepted. Anything else is `nil`, never a guess.
public enum Timestamp {
    /// Unix seconds (with the fraction) for an ISO-8601 date-time, or `nil` if `text` is not one.
    public static func parse(_ text: String) -> Double? {
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.digits(4), scanner.skip(UInt8(ascii: "-")),
              let month = scanner.digits(2), scanner.skip(UInt8(ascii: "-")),
              let day = scanner.digits(2),
              scanner.skip(UInt8(ascii: "T")) || scanner.skip(UInt8(ascii: "t")) || scanner.skip(UInt8(ascii: " ")),
              let hour = scanner.digits(2), scanner.skip(UInt8(ascii: ":")),
              let minute = scanner.digits(2), scanner.skip(UInt8(ascii: ":")),
              let second = scanner.digits(2)
        else { return nil }
        guard (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second < 61  // 60: a leap second, folded into the next one
        else { return nil }

        var fraction = 0.0
        if scanner.skip(UInt8(ascii: ".")) || scanner.skip(UInt8(ascii: ",")) {
            var scale = 0.1
            var count = 0
            while let digit = scanner.digit() {
                fraction += Double(digit) * scale
                scale /= 10
                count += 1
            }
            guard count > 0 else { return nil }
        }

        var offset = 0
        if scanner.skip(UInt8(ascii: "Z")) || scanner.skip(UInt8(ascii: "z")) {
            offset = 0
        } else if let sign = scanner.sign() {
            guard let hours = scanner.digits(2), hours < 24 else { return nil }
            _ = scanner.skip(UInt8(ascii: ":"))
            guard let minutes = scanner.digits(2), minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil  // a time without a zone is ambiguous; Prefect always sends one
        }
        guard scanner.atEnd else { return nil }

        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Double(seconds) + fraction
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // MARK: - Scanner

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }

        mutating func skip(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func digit() -> Int? {
            guard index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 else { return nil }
            defer { index += 1 }
            return Int(bytes[index] - 0x30)
        }

        mutating func digits(_ count: Int) -> Int? {
            var value = 0
            for _ in 0..<count {
                guard let d = digit() else { return nil }
                value = value * 10 + d
            }
            return value
        }

        mutating func sign() -> Int? {
            if skip(UInt8(ascii: "+")) { return 1 }
            if skip(UInt8(ascii: "-")) { return -1 }
            return nil
        }
    }
}

// MARK: - Formatting

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

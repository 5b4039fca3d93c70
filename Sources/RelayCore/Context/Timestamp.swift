/// Prefect's ISO-8601 timestamps as unix seconds, without Foundation.
///
/// Prefect writes `2026-11-29T22:05:57.142583Z` at the top level and `…+00:00` in event resources, and
/// drops the fraction when it is zero (`2026-01-01T00:00:00Z`); all three forms parse here.
public enum Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z, or nil when `text` is not an ISO-8601 date-time with a zone.
    public static func parse(_ text: String) -> Double? {
        let bytes = Array(text.utf8.prefix(64))
        guard bytes.count >= 20, text.utf8.count <= 64 else { return nil }
        var index = 0

        func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let byte = bytes[index]
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
                index += 1
            }
            return value
        }
        func expect(_ ascii: UInt8...) -> Bool {
            guard index < bytes.count, ascii.contains(bytes[index]) else { return false }
            index += 1
            return true
        }

        guard let year = digits(4), expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2),
              expect(0x54, 0x74, 0x20), let hour = digits(2), expect(0x3A), let minute = digits(2), expect(0x3A),
              let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }

        var fraction = 0.0
        if index < bytes.count, bytes[index] == 0x2E || bytes[index] == 0x2C {
            index += 1
            var scale = 0.1
            var any = false
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
                any = true
            }
            guard any else { return nil }
        }

        var offset = 0
        if expect(0x5A, 0x7A) {
            offset = 0
        } else if index < bytes.count, bytes[index] == 0x2B || bytes[index] == 0x2D {
            let sign = bytes[index] == 0x2D ? -1 : 1
            index += 1
            guard let offsetHours = digits(2) else { return nil }
            _ = expect(0x3A)
            guard let offsetMinutes = digits(2), offsetHours < 24, offsetMinutes < 60 else { return nil }
            offset = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }

        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Double(seconds) + fraction
    }

    /// Whole unix seconds (rounded down), or nil when `text` does not parse.
    public static func unixSeconds(_ text: String?) -> Int64? {
        guard let text, let seconds = parse(text) else { return nil }
        return Int64(seconds.rounded(.down))
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

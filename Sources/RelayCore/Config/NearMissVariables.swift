/// Environment variables one slip away from a setting the relay reads (`APNS_KEYPATH`, `PREFECT_API_ULR`,
/// `log_level`): the relay can't know what was meant, so it runs on, but says which setting each one resembles, once
/// at start-up, so a misspelt variable isn't silently ignored.
public enum NearMissVariables {
    /// A variable the relay doesn't read, and the setting it resembles.
    public struct NearMiss: Equatable, Sendable {
        public let given: String
        public let known: String
    }

    /// Other programs' well-known variables (in upper case; either case matches) that sit a slip away from a
    /// setting, and so would be named in every environment that has them: curl's proxies for other schemes (`FTP_PROXY`
    /// is two edits from `HTTP_PROXY`, `WS_PROXY` from `NO_PROXY`; the relay reads only HTTP(S)_PROXY and NO_PROXY),
    /// Go's `GOPROXY`, and the generic `API_KEY`, `APP_KEY` (two from `APNS_KEY`). `ALL_PROXY` is not near one today;
    /// it is here so a setting added later doesn't make it so.
    static let unrelated: Set<String> = [
        "FTP_PROXY", "ALL_PROXY", "WS_PROXY", "WSS_PROXY", "GOPROXY", "API_KEY", "APP_KEY",
    ]

    /// The near misses among `names` (the environment's variable names), in name order. A name is near a setting's
    /// when it differs only in case, or by one edit (a letter added, dropped, changed, or two swapped) from a setting
    /// of fewer than 8 characters, or by two from a longer one: close enough to be a slip, far enough that other
    /// programs' variables (`PATH`, `HOME`, Prefect's own `PREFECT_*`) aren't taken for one. Those that are, all the
    /// same, are listed in `unrelated`.
    public static func find(in names: some Sequence<String>, known: [String] = Settings.all.map(\.name)) -> [NearMiss] {
        let knownSet = Set(known)
        var misses: [NearMiss] = []
        for name in names.sorted() where !knownSet.contains(name) && !unrelated.contains(name.uppercased()) {
            let given = Array(name.uppercased().utf8)
            var best: (known: String, distance: Int)?
            for candidate in known {
                let target = Array(candidate.uppercased().utf8)
                let allowed = target.count < 8 ? 1 : 2
                guard abs(target.count - given.count) <= allowed else { continue }
                let distance = editDistance(given, target, limit: allowed)
                if distance <= allowed, distance < best?.distance ?? .max { best = (candidate, distance) }
            }
            if let best { misses.append(NearMiss(given: name, known: best.known)) }
        }
        return misses
    }

    /// Optimal string alignment distance (insert, delete, substitute, swap two neighbours), or `limit + 1` once it is
    /// past `limit`.
    static func editDistance(_ a: [UInt8], _ b: [UInt8], limit: Int) -> Int {
        if a == b { return 0 }
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var twoBack = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            var rowBest = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { value = min(value, twoBack[j - 2] + 1) }
                current[j] = value
                rowBest = min(rowBest, value)
            }
            if rowBest > limit { return limit + 1 }
            (twoBack, previous, current) = (previous, current, twoBack)
        }
        return previous[b.count]
    }
}

/// API requests answered, by route and status code, for `prefect_push_http_requests_total`. The labels are bounded:
/// the route is `Route.name` (seven names) or `unrouted` for a request refused before it matched one (malformed,
/// unknown path, wrong method, too large), and the code is one the relay itself answers with.
public struct RequestCounts: Sendable, Equatable {
    public struct Key: Hashable, Sendable, Comparable {
        public let route: String
        public let code: Int

        public static func < (a: Key, b: Key) -> Bool { (a.route, a.code) < (b.route, b.code) }
    }

    public private(set) var counts: [Key: Int] = [:]

    public init() {}

    /// One answer sent: `route` nil when the request never matched one.
    public mutating func record(_ route: Route?, status: Int) {
        counts[Key(route: route?.name ?? "unrouted", code: status), default: 0] += 1
    }

    /// The samples, in label order; a readiness probe's series exists from the start, so a rate over the API's
    /// answers has data at once.
    var samples: [(String, String)] {
        var counts = self.counts
        counts[Key(route: "health", code: 200), default: 0] += 0
        return counts.sorted { $0.key < $1.key }
            .map { ("{route=\"\($0.key.route)\",code=\"\($0.key.code)\"}", String($0.value)) }
    }
}

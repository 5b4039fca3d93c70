/// What `prefect-push status` was asked for: `--json`, and the `--device ID` and `--run ID` filters, in any order,
/// each at most once (`--device=ID` works too). A filtered status shows ended pauses (their answers kept for a day,
/// `AnswerRetention`) as well as waiting ones; an unfiltered one, the waiting pauses only.
public struct StatusQuery: Sendable, Equatable {
    public var json = false
    public var device: String?
    public var run: String?

    public init(json: Bool = false, device: String? = nil, run: String? = nil) {
        self.json = json
        self.device = device
        self.run = run
    }

    public var isFiltered: Bool { device != nil || run != nil }

    /// The command and its arguments, as `--help` and the usage line write them.
    public static let synopsis = "status [--json] [--device ID] [--run ID]"

    public static let usage = "usage: prefect-push \(synopsis) (DB_PATH names the store to read)"

    /// A usage error: what is wrong with the arguments, said in one line.
    public struct UsageError: Error, Equatable, CustomStringConvertible {
        public var problem: String
        public var description: String { "prefect-push status: \(problem)\n\(StatusQuery.usage)" }
    }

    public static func parse(_ arguments: [String]) throws(UsageError) -> StatusQuery {
        var query = StatusQuery()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            let (name, inline) = split(argument)
            switch name {
            case "--json":
                guard inline == nil else { throw UsageError(problem: "--json takes no value") }
                guard !query.json else { throw UsageError(problem: "--json given twice") }
                query.json = true
            case "--device", "--run":
                let value = inline ?? rest.popFirst()
                guard let value, !value.isEmpty, !value.hasPrefix("--") else {
                    throw UsageError(problem: "\(name) needs an id after it, e.g. \(name) \(name == "--run" ? "RUN_ID" : "DEVICE_ID")")
                }
                if name == "--device" {
                    guard query.device == nil else { throw UsageError(problem: "--device given twice; give one id") }
                    query.device = value
                } else {
                    guard query.run == nil else { throw UsageError(problem: "--run given twice; give one id") }
                    query.run = value
                }
            default:
                throw UsageError(problem: "unknown argument \(argument)")
            }
        }
        return query
    }

    /// `--run=ID` is `--run` with `ID`; anything else is itself, with no value.
    private static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<eq]), String(argument[argument.index(after: eq)...]))
    }
}

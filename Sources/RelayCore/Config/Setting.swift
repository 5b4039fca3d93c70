/// One environment variable the relay reads: its name, its `--help` line, its default and how it is parsed, written
/// once. `Config` reads every variable through its descriptor in `Settings`, and `--help` prints `Settings.all`, so
/// adding a setting is one descriptor there (and the `Config` field it fills).
public struct Setting<Value: Sendable>: SettingDescription {
    public let name: String
    public let meaning: String
    /// `--help`'s default column: the value used when unset, or what being unset means.
    public let defaultValue: String
    private let parse: @Sendable (EnvironmentReader, String) throws(ConfigError) -> Value

    init(_ name: String, _ meaning: String, default shown: String,
         parse: @escaping @Sendable (EnvironmentReader, String) throws(ConfigError) -> Value) {
        self.name = name
        self.meaning = meaning
        self.defaultValue = shown
        self.parse = parse
    }

    /// The value from `environment`, or a `ConfigError` naming this variable and the fix.
    func read(_ environment: EnvironmentReader) throws(ConfigError) -> Value { try parse(environment, name) }
}

/// What `--help` prints of a setting, whatever its type.
public protocol SettingDescription: Sendable {
    var name: String { get }
    var meaning: String { get }
    var defaultValue: String { get }
}

extension Setting where Value == Int {
    /// A whole number in `range`; `value` when unset.
    static func number(_ name: String, _ meaning: String, default value: Int, in range: ClosedRange<Int>) -> Setting {
        Setting(name, meaning, default: String(value)) { env, name throws(ConfigError) in
            try env.integer(name, in: range, default: value)
        }
    }
}

extension Setting where Value == Int? {
    /// A whole number in `range`; nil when unset.
    static func optionalNumber(_ name: String, _ meaning: String, unset: String, in range: ClosedRange<Int>) -> Setting {
        Setting(name, meaning, default: unset) { env, name throws(ConfigError) in
            guard env.value(name) != nil else { return nil }
            return try env.integer(name, in: range, default: 0)
        }
    }
}

extension Setting where Value == String {
    /// The trimmed value, or `value` when unset or blank, passed through `check` (which names what is wrong).
    static func text(_ name: String, _ meaning: String, default value: String, shown: String? = nil,
                     check: @escaping @Sendable (_ value: String, _ name: String) throws(ConfigError) -> String
                         = { value, _ in value }) -> Setting {
        Setting(name, meaning, default: shown ?? value) { env, name throws(ConfigError) in
            try check(env.value(name) ?? value, name)
        }
    }
}

extension Setting where Value == String? {
    /// The trimmed value; nil when unset or blank.
    static func optional(_ name: String, _ meaning: String, unset: String) -> Setting {
        Setting(name, meaning, default: unset) { env, name in env.value(name) }
    }

    /// The value as given, whitespace kept (a password, a PEM key); nil when unset.
    static func secret(_ name: String, _ meaning: String, unset: String) -> Setting {
        Setting(name, meaning, default: unset) { env, name in env.raw(name) }
    }
}

extension Setting where Value == HTTPURL {
    /// An https origin; `value` when unset.
    static func httpsOrigin(_ name: String, _ meaning: String, default value: String) -> Setting {
        Setting(name, meaning, default: value) { env, name throws(ConfigError) in
            try HTTPURL.parse(env.value(name) ?? value, variable: name, requireHTTPS: true)
        }
    }
}

extension Setting where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// One of `Value`'s cases, in any letter case; `value` when unset.
    static func choice(_ name: String, _ meaning: String, default value: Value) -> Setting {
        Setting(name, meaning, default: value.rawValue) { env, name throws(ConfigError) in
            guard let given = env.value(name) else { return value }
            guard let parsed = Value(rawValue: given.lowercased()) else {
                let names = Value.allCases.map { $0.rawValue }  // no key path into a generic type: see `Retries.due`
                let list = names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " or " + names.last!
                throw ConfigError(name, "must be \(list), got \"\(given.prefix(20))\"")
            }
            return parsed
        }
    }
}

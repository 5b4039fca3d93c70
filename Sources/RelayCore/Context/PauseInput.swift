/// What a pause asks for, read from its input rows (`POST /flow_runs/{id}/input/filter`).
///
/// The schema row is the JSON schema Pydantic made for the `RunInput`; the description row is a JSON
/// string literal of markdown. Either may be missing (rows land after the Paused event), and either may
/// hold garbage: then the pause still counts as asking for input, with nothing more known.
public struct PauseInput: Sendable, Equatable {
    /// The kind of notification, which decides the actions the app offers (`aps.category`).
    public enum Category: String, Sendable, Equatable, CaseIterable {
        /// One line of text answers it: the app offers Reply.
        case reply = "waiting-reply"
        /// Some other input: the app opens the run.
        case input = "waiting-input"
        /// Nothing to fill in: Resume and Cancel.
        case plain = "waiting"
    }

    public var category: Category
    /// The one question of a single-field input, e.g. "Comment?"; nil for `wait_for_input=str` (its field
    /// is the anonymous `value`) and for inputs with several fields.
    public var question: String?
    /// The markdown stored with the input (`…-description`), decoded from its JSON string literal.
    public var description: String?

    public init(category: Category, question: String? = nil, description: String? = nil) {
        self.category = category
        self.question = question
        self.description = description
    }

    /// Input rows bigger than this (UTF-8 bytes) are not parsed.
    public static let maxRowBytes = 64 * 1024

    /// Reads the rows of `keyset` (or, without one, rows named `…-schema` / `…-description`).
    public init(keyset: InputKeyset?, rows: [InputRow], parseJSON: (String) -> JSONValue?) {
        func row(_ exact: String?, suffix: String) -> InputRow? {
            if let exact { return rows.first { $0.key == exact } }
            return rows.first { $0.key.hasSuffix("-" + suffix) }
        }
        func parsed(_ row: InputRow?) -> JSONValue? {
            guard let row, row.value.utf8.count <= PauseInput.maxRowBytes else { return nil }
            return parseJSON(row.value)
        }

        let schemaRow = row(keyset?.schema, suffix: "schema")
        let descriptionRow = row(keyset?.description, suffix: "description")
        let description = parsed(descriptionRow)?.string.flatMap { $0.hasVisibleText ? $0 : nil }

        guard keyset != nil || schemaRow != nil else {
            self.init(category: .plain, description: description)
            return
        }
        guard let schema = parsed(schemaRow), let properties = schema["properties"]?.object else {
            self.init(category: .input, description: description)
            return
        }
        let category: Category = PauseInput.isOneLineOfText(schema: schema, properties: properties) ? .reply : .input
        self.init(category: category, question: PauseInput.question(schema: schema, properties: properties),
                  description: description)
    }

    // MARK: - Schema reading

    /// Keys a schema may carry and still be "one line of text": anything else (enum, pattern, format,
    /// lengths, `$ref`, `anyOf`, …) is a constraint a free reply could break.
    static let plainSchemaKeys: Set<String> = ["type", "title", "description", "properties", "required",
                                              "additionalProperties"]
    static let plainFieldKeys: Set<String> = ["type", "title", "description", "default"]

    /// A single field of type string, with no other constraint: `wait_for_input=str`
    /// (`strAutomaticRunInput`) and a `RunInput` with one `str` field.
    static func isOneLineOfText(schema: JSONValue, properties: [String: JSONValue]) -> Bool {
        guard properties.count == 1, let (name, field) = properties.first, let members = schema.object,
              let fieldMembers = field.object else { return false }
        guard members.keys.allSatisfy(plainSchemaKeys.contains),
              members["type"].map({ $0 == "object" }) ?? true,
              fieldMembers.keys.allSatisfy(plainFieldKeys.contains),
              fieldMembers["type"] == "string"
        else { return false }
        if let extra = members["additionalProperties"], extra != .bool(false) { return false }
        if let required = members["required"] {
            guard let names = required.array, names.allSatisfy({ $0.string == name }) else { return false }
        }
        return true
    }

    /// The single field's description, else its title as a question ("Comment?"). Prefect's automatic
    /// inputs (`wait_for_input=str`, `int`, …) name their field `value`, which asks nothing.
    static func question(schema: JSONValue, properties: [String: JSONValue]) -> String? {
        guard properties.count == 1, let (name, field) = properties.first else { return nil }
        if let text = field["description"]?.string?.cleanedForDisplay(keepNewlines: false), !text.isEmpty {
            return text
        }
        let automatic = schema["title"]?.string?.hasSuffix("AutomaticRunInput") ?? false
        if automatic && name == "value" { return nil }
        let title = field["title"]?.string?.cleanedForDisplay(keepNewlines: false) ?? ""
        let label = title.isEmpty ? name.cleanedForDisplay(keepNewlines: false) : title
        guard !label.isEmpty else { return nil }
        if let last = label.last, "?.!:…".contains(last) { return label }
        return label + "?"
    }
}

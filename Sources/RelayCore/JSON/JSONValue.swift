/// A JSON document as a plain value. Parsing happens at the edge (jansson, in `Relay`); the core only
/// reads and builds these, and encodes them itself so payload building stays pure.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    // MARK: - Reading

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var bool: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// Integers, and doubles that hold a whole number.
    public var int: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9e15: return Int64(d)
        default: return nil
        }
    }

    public var double: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var array: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var object: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var members: [String: JSONValue] = [:]
        for (key, value) in elements { members[key] = value }
        self = .object(members)
    }
}

// MARK: - Encoding

extension JSONValue {
    /// Compact JSON with object keys sorted, so equal values encode to equal bytes.
    public func encoded() -> String {
        var out = ""
        encode(into: &out)
        return out
    }

    private func encode(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if d.isFinite {
                if d.rounded() == d && abs(d) < 1e15 { out += String(Int64(d)) } else { out += "\(d)" }
            } else {
                out += "null"  // JSON has no NaN or infinity
            }
        case .string(let s): JSONValue.encodeString(s, into: &out)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.encode(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                JSONValue.encodeString(key, into: &out)
                out += ":"
                members[key]!.encode(into: &out)
            }
            out += "}"
        }
    }

    static func encodeString(_ s: String, into out: inout String) {
        // Most strings need no escape: copy them whole (U+2028/2029 start with E2 80 A8/A9; E2 sends the slow way).
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0xE2 }) {
            out += "\""
            out += s
            out += "\""
            return
        }
        // Byte by byte: every byte that needs an escape is ASCII, except U+2028/2029 (E2 80 A8/A9).
        let utf8 = Array(s.utf8)
        var bytes: [UInt8] = [0x22]
        bytes.reserveCapacity(utf8.count + 16)
        let hex = Array("0123456789abcdef".utf8)
        var i = 0
        while i < utf8.count {
            let byte = utf8[i]
            switch byte {
            case 0x22: bytes += [0x5C, 0x22]
            case 0x5C: bytes += [0x5C, 0x5C]
            case 0x0A: bytes += [0x5C, 0x6E]
            case 0x0D: bytes += [0x5C, 0x72]
            case 0x09: bytes += [0x5C, 0x74]
            case 0..<0x20: bytes += [0x5C, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            case 0xE2 where i + 2 < utf8.count && utf8[i + 1] == 0x80 && (utf8[i + 2] == 0xA8 || utf8[i + 2] == 0xA9):
                bytes += [0x5C, 0x75, 0x32, 0x30, 0x32, utf8[i + 2] == 0xA8 ? 0x38 : 0x39]
                i += 2
            default: bytes.append(byte)
            }
            i += 1
        }
        bytes.append(0x22)
        out += String(decoding: bytes, as: UTF8.self)
    }
}

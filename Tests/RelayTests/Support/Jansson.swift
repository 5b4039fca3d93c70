import CJansson
import RelayCore

/// Why jansson refused a JSON text, with its own position and message.
struct JanssonError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// The relay's JSON reading as it was before `JSONParser`: jansson (`json_loadb` with `JSON_DECODE_ANY |
/// JSON_ALLOW_NUL`), its tree converted to a `JSONValue`, nesting cut at `maxDepth`. Kept as the reference the
/// parser is held to, value for value, by the tests and the JSON fuzz harness (differential); never shipped.
enum Jansson {
    static let maxDepth = 64

    static func parse(_ bytes: [UInt8]) throws(JanssonError) -> JSONValue {
        var error = json_error_t()
        let flags = Int(JSON_DECODE_ANY | JSON_ALLOW_NUL)
        let root: UnsafeMutablePointer<json_t>? = bytes.withUnsafeBufferPointer { buffer in
            json_loadb(buffer.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
                       buffer.count, flags, &error)
        }
        guard let root else {
            let text = withUnsafeBytes(of: &error.text) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            throw JanssonError(message: "\(text) at line \(error.line) column \(error.column)")
        }
        defer { json_decref(root) }
        return try convert(root, depth: 0)
    }

    static func parse(_ text: String) throws(JanssonError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    private static func convert(_ node: UnsafeMutablePointer<json_t>, depth: Int) throws(JanssonError) -> JSONValue {
        guard depth < maxDepth else { throw JanssonError(message: "nested deeper than \(maxDepth) levels") }
        switch node.pointee.type {
        case JSON_NULL: return .null
        case JSON_TRUE: return .bool(true)
        case JSON_FALSE: return .bool(false)
        case JSON_INTEGER: return .int(Int64(json_integer_value(node)))
        case JSON_REAL: return .double(json_real_value(node))
        case JSON_STRING:
            let length = json_string_length(node)
            guard let chars = json_string_value(node) else { return .string("") }
            let buffer = UnsafeRawBufferPointer(start: chars, count: length)
            return .string(String(decoding: buffer, as: UTF8.self))
        case JSON_ARRAY:
            let count = json_array_size(node)
            var items: [JSONValue] = []
            items.reserveCapacity(count)
            for index in 0..<count {
                items.append(try convert(json_array_get(node, index), depth: depth + 1))
            }
            return .array(items)
        case JSON_OBJECT:
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(json_object_size(node))
            var iterator = json_object_iter(node)
            while let current = iterator {
                let key = String(cString: json_object_iter_key(current))
                members[key] = try convert(json_object_iter_value(current), depth: depth + 1)
                iterator = json_object_iter_next(node, current)
            }
            return .object(members)
        default:
            return .null
        }
    }
}

import CNGHTTP2

/// An nghttp2 library error code with the call that returned it.
struct H2Error: Error, CustomStringConvertible {
    let code: Int32
    let function: String

    var description: String { "\(function): \(String(cString: nghttp2_strerror(code)))" }

    @discardableResult
    static func check(_ result: Int32, _ function: String) throws(H2Error) -> Int32 {
        guard result >= 0 else { throw H2Error(code: result, function: function) }
        return result
    }
}

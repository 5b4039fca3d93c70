import COpenSSL
import Glibc

/// An OpenSSL failure: the function that failed and the drained error queue, on one line.
package struct TLSError: Error, CustomStringConvertible {
    let function: String
    let detail: String

    package var description: String { detail.isEmpty ? "\(function) failed" : "\(function): \(detail)" }

    /// Builds the error from OpenSSL's thread-local queue, emptying it so the next call starts clean.
    package init(_ function: String, detail: String? = nil) {
        self.function = function
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) },
                                   as: UTF8.self))
        }
        self.detail = detail ?? messages.joined(separator: "; ")
    }

    /// Throws unless OpenSSL's usual `1` (or positive) success value came back.
    @discardableResult
    package static func check(_ result: Int32, _ function: String) throws(TLSError) -> Int32 {
        guard result > 0 else { throw TLSError(function) }
        return result
    }
}

/// A failed system call: errno and the call's name.
package struct IOError: Error, CustomStringConvertible {
    let errnoCode: Int32
    let function: String

    package var description: String { "\(function): \(String(cString: strerror(errnoCode)))" }

    /// Runs a system call, retrying on EINTR, and throws on -1.
    @discardableResult
    package static func check(_ function: String, _ call: () -> Int32) throws(IOError) -> Int32 {
        while true {
            let result = call()
            if result != -1 { return result }
            if errno == EINTR { continue }
            throw IOError(errnoCode: errno, function: function)
        }
    }
}

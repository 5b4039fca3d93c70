import COpenSSL
import Glibc
import RelayCore

/// Decides whether a caller may use the API by asking Prefect (DESIGN.md §3): the caller's Authorization header
/// is forwarded to `POST /flows/count`; 2xx admits, 401/403 refuses, and both answers are cached five minutes
/// under a SHA-256 of the header. Prefect unreachable (or answering oddly) is a 503 and is never cached.
actor Authorizer {
    enum Verdict: Equatable {
        case admitted
        case refused
        case unavailable(String)
    }

    private var cache = AuthCache()
    private let check: @Sendable (String?) async -> Result<Int, HTTPFailure>
    private let now: @Sendable () -> Double

    init(check: @escaping @Sendable (String?) async -> Result<Int, HTTPFailure>,
         now: @escaping @Sendable () -> Double = Clock.unixNow) {
        self.check = check
        self.now = now
    }

    func verdict(for authorization: String?) async -> Verdict {
        let key = Authorizer.hash(authorization ?? "")
        if let admitted = cache.lookup(key, now: now()) { return admitted ? .admitted : .refused }
        switch await check(authorization) {
        case .failure(let failure):
            return .unavailable("the Prefect server could not be reached to check the credential (\(failure.reason))")
        case .success(let status) where (200..<300).contains(status):
            cache.store(key, admitted: true, now: now())
            return .admitted
        case .success(let status) where status == 401 || status == 403:
            cache.store(key, admitted: false, now: now())
            return .refused
        case .success(let status):
            return .unavailable("the Prefect server answered \(status) to the credential check; check PREFECT_API_URL")
        }
    }

    /// Hex SHA-256, so the cache never holds a credential.
    static func hash(_ text: String) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBufferPointer { SHA256($0.baseAddress, $0.count, &digest) }
        return digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

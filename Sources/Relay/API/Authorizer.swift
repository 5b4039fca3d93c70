import COpenSSL
import Glibc
import RelayCore

/// Decides whether a caller may use the API by asking Prefect: the caller's Authorization header
/// is forwarded to `POST /flows/count`, on Prefect connections of the API's own (`RelayMain`: a pool the pause
/// path's reads never wait behind); 2xx admits, 401/403 refuses. Prefect unreachable (or answering oddly) is a
/// 503 and is never cached. Hardened against callers who aren't admitted (issue 11):
///
/// - a malformed header (control or non-ASCII characters, over 4 KiB, no scheme) is a 400 without asking Prefect;
/// - one check per credential at a time: concurrent requests with the same header wait for the same answer;
/// - at most `maxConcurrentChecks` different credentials are checked at once; beyond that, 429;
/// - admissions are cached five minutes; refusals for `refusalLifetime` in a separate cache, so a flood of junk
///   credentials only evicts other junk, never an admitted caller. Both are keyed by a SHA-256 of the header.
actor Authorizer {
    enum Verdict: Equatable {
        case admitted
        case refused
        case unavailable(String)
        /// The header itself is wrong (400): Prefect was not asked.
        case malformed(String)
        /// Too many different credentials are being checked right now (429).
        case busy
    }

    static let maxConcurrentChecks = 16
    static let refusalLifetime: Double = 60

    /// On the API's executor thread (`RelayExecutor.api`), never the pause path's.
    nonisolated var unownedExecutor: UnownedSerialExecutor { RelayExecutor.api.asUnownedSerialExecutor() }

    private var admittedCache = AuthCache(capacity: 1024)
    private var refusedCache = AuthCache(capacity: 4096, lifetime: Authorizer.refusalLifetime)
    private var inFlight: [String: Task<Result<Int, HTTPFailure>, Never>] = [:]
    private let check: @Sendable (String?) async -> Result<Int, HTTPFailure>
    private let now: @Sendable () -> Double

    init(check: @escaping @Sendable (String?) async -> Result<Int, HTTPFailure>,
         now: @escaping @Sendable () -> Double = SystemClock.steadyNow) {
        self.check = check
        self.now = now
    }

    func verdict(for authorization: String?) async -> Verdict {
        if let authorization, let problem = CredentialShape.problem(authorization) { return .malformed(problem) }
        let key = Authorizer.hash(authorization ?? "")
        if admittedCache.lookup(key, now: now()) != nil { return .admitted }
        if refusedCache.lookup(key, now: now()) != nil { return .refused }

        let task: Task<Result<Int, HTTPFailure>, Never>
        if let running = inFlight[key] {
            task = running
        } else {
            guard inFlight.count < Authorizer.maxConcurrentChecks else { return .busy }
            let check = self.check
            task = Task(executorPreference: RelayExecutor.api) { await check(authorization) }
            inFlight[key] = task
        }
        let result = await task.value
        if inFlight[key] == task { inFlight[key] = nil }

        switch result {
        case .failure(let failure):
            return .unavailable("the Prefect server could not be reached to check the credential (\(failure.reason))")
        case .success(let status) where (200..<300).contains(status):
            admittedCache.store(key, admitted: true, now: now())
            return .admitted
        case .success(let status) where status == 401 || status == 403:
            refusedCache.store(key, admitted: false, now: now())
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

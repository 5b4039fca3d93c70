import Glibc
import Testing

/// How an exit test's child must have ended when a precondition stopped it: by the trap (SIGILL from `precondition`
/// on x86-64, SIGTRAP where the trap instruction raises that), not by exiting, and not by another signal.
func expectTrap(_ status: ExitStatus?, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let status else { return }
    switch status {
    case .signal(let signal):
        #expect(signal == SIGILL || signal == SIGTRAP, "died by signal \(signal), not by the trap", sourceLocation: sourceLocation)
    case .exitCode(let code):
        Issue.record("exited with code \(code) instead of trapping", sourceLocation: sourceLocation)
    @unknown default:
        Issue.record("ended as \(status) instead of trapping", sourceLocation: sourceLocation)
    }
}

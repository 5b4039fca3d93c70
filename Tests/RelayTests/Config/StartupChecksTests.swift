import CWebSockets
import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// Start-up checks at the edge: a PREFECT_CA_FILE that can't be used stops start-up naming the variable.
@Suite struct StartupChecksTests {
    @Test func unreadableCAFileIsAStartupError() throws {
        let directory = TestFiles.temporaryDirectory()
        defer { TestFiles.removeTree(directory) }
        let notPEM = directory + "/not.pem"
        try TestFiles.write(notPEM, "hello\n")
        for path in [directory + "/missing.pem", notPEM, directory] {
            #expect(WebSocketsLoop.pemProblem(path) != nil, "\(path)")
            do {
                _ = try WebSocketsLoop(settings: .init(port: -1, clientCAFile: path), handlers: [])
                Issue.record("\(path) was accepted")
            } catch {
                #expect(error.variable == "PREFECT_CA_FILE")
                #expect(error.description.contains(path))
            }
        }
    }

    @Test func readablePEMIsAccepted() throws {
        #expect(WebSocketsLoop.pemProblem(APNsFixtures.path("ca.pem")) == nil)
        let loop = try WebSocketsLoop(settings: .init(port: -1, clientCAFile: APNsFixtures.path("ca.pem")),
                                      handlers: [IdleHandler()])
        _ = loop
    }
}

/// A protocol that does nothing (lws needs at least one).
private final class IdleHandler: LWSHandler {
    let protocolName = "idle"
    func handle(wsi: OpaquePointer?, reason: lws_callback_reasons, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        0
    }
}

import Glibc
import Testing
@testable import Relay
@testable import RelayCore

/// Loads the captured Prefect JSON (`Fixtures/prefect/`) and the goldens (`Fixtures/golden/`) from the
/// source tree, and builds the real scenarios the fixture script produced.
enum ContextFixtures {
    static let fixturesRoot: String = {
        let file = #filePath  // …/Tests/RelayTests/Context/ContextFixtures.swift
        var parts = file.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(2)
        return parts.joined(separator: "/") + "/Fixtures/"
    }()

    static func text(_ relative: String) -> String {
        String(decoding: bytes(relative), as: UTF8.self)
    }

    /// A fixture's bytes as stored (empty, with an issue recorded, when it is missing).
    static func bytes(_ relative: String) -> [UInt8] {
        guard let file = fopen(fixturesRoot + relative, "rb") else {
            Issue.record("missing fixture \(relative)")
            return []
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    static func json(_ relative: String) -> JSONValue {
        do {
            return try JSONParser.parse(text(relative))
        } catch {
            Issue.record("fixture \(relative) is not JSON: \(error)")
            return .null
        }
    }

    /// The `response` of a captured `prefect/<name>.json` REST exchange.
    static func response(_ name: String) -> JSONValue {
        json("prefect/\(name).json")["response"] ?? .null
    }

    static var readers: TextReaders { .live }

    // MARK: - Scenarios (flow names as the fixture script's)

    /// `fixture-one-field`: `Approval(comment: str)` with a markdown description.
    static func oneField() -> PauseContext {
        PauseContext(run: RunDetails(prefect: response("rest-flow-run-paused-with-input"))!,
                     flowName: "fixture-one-field",
                     inputRows: InputRow.list(prefect: response("rest-input-filter-one-field")))
    }

    /// `fixture-str`: `wait_for_input=str`, no description row.
    static func str() -> PauseContext {
        PauseContext(run: RunDetails(prefect: response("rest-flow-run-paused-with-input"))!, flowName: "fixture-str",
                     inputRows: InputRow.list(prefect: response("rest-input-filter-str")))
    }

    /// `fixture-multi-field`: `Review(approved, reason, priority, environment)` with a bold-led description.
    static func multiField() -> PauseContext {
        PauseContext(run: RunDetails(prefect: response("rest-flow-run-paused-with-input"))!,
                     flowName: "fixture-multi-field",
                     inputRows: InputRow.list(prefect: response("rest-input-filter-multi-field")))
    }

    /// `fixture-plain`: no input, nothing else.
    static func plain() -> PauseContext {
        PauseContext(run: RunDetails(prefect: response("rest-flow-run-paused-no-input"))!,
                     flowName: response("rest-flow")["name"]?.string)
    }

    /// `fixture-artifact`: an `approval-request` markdown artifact, then a plain pause.
    static func artifact() -> PauseContext {
        var run = RunDetails(prefect: response("rest-flow-run-paused-no-input"))!
        run.id = "f2409808-7a67-4100-8a2e-80c49e0e6815"
        return PauseContext(run: run, flowName: "fixture-artifact",
                            artifacts: RunArtifact.list(prefect: response("rest-artifacts-filter")))
    }

    /// `fixture-custom-event`: `relay.approval.requested` with `payload.body`, then a plain pause. The run is
    /// rebuilt from its captured Paused event (id = state id, occurred = state timestamp).
    static func customEvent() -> PauseContext {
        let events = RunEvent.list(prefect: response("rest-events-filter-page1"))
            + RunEvent.list(prefect: response("rest-events-filter-page2"))
        let paused = events.first { $0.name == "prefect.flow-run.Paused" }!
        let run = RunDetails(id: "8c848c8b-7db3-4f2d-b242-c89c17d44b0f", name: "adorable-jerboa",
                          state: RunState(id: paused.id!, type: "PAUSED", name: "Paused",
                                          timestamp: paused.occurred, pauseTimeout: "2026-11-29T22:15:56.516000Z"))
        return PauseContext(run: run, flowName: "fixture-custom-event", events: events)
    }

    /// `fixture-suspend` run from a deployment: Suspended, `wait_for_input=str`, no timeout.
    static func suspended() -> PauseContext {
        PauseContext(run: RunDetails(prefect: response("rest-flow-run-suspended"))!, flowName: "fixture-suspend",
                     inputRows: InputRow.list(prefect: response("rest-input-filter-suspended")))
    }

    static func alert(_ context: PauseContext) -> AlertText {
        AlertText(context: context, readers: readers)
    }

    static func props(_ context: PauseContext, serverId: String = "server-1",
                      uiRoot: String = "https://prefect.example.com") -> WaitingProps {
        WaitingProps(run: context.run, flowName: context.flowName, text: alert(context), serverId: serverId,
                     uiRoot: uiRoot)!
    }
}

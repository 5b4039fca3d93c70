import Testing
@testable import RelayCore

/// `prefect-push status`'s arguments: `--json`, `--device ID`, `--run ID` in any order; anything else is a usage
/// error that says what is wrong.
@Suite struct StatusQueryTests {
    @Test func filtersAndJSONInAnyOrder() throws {
        #expect(try StatusQuery.parse([]) == StatusQuery())
        #expect(try StatusQuery.parse(["--json"]) == StatusQuery(json: true))
        #expect(try StatusQuery.parse(["--device", "phone-1", "--json", "--run", "r-9"])
                == StatusQuery(json: true, device: "phone-1", run: "r-9"))
        #expect(try StatusQuery.parse(["--run=r-9", "--device=phone-1"]) == StatusQuery(device: "phone-1", run: "r-9"))
        #expect(try StatusQuery.parse(["--run", "r-9"]).isFiltered)
        #expect(try !StatusQuery.parse(["--json"]).isFiltered)
    }

    @Test func usageErrorsNameTheProblem() {
        func problem(_ arguments: [String]) -> String? {
            do { _ = try StatusQuery.parse(arguments); return nil } catch { return error.problem }
        }
        #expect(problem(["--device"]) == "--device needs an id after it, e.g. --device DEVICE_ID")
        #expect(problem(["--run", "--json"]) == "--run needs an id after it, e.g. --run RUN_ID")
        #expect(problem(["--run="]) == "--run needs an id after it, e.g. --run RUN_ID")
        #expect(problem(["--device", "a", "--device", "b"]) == "--device given twice; give one id")
        #expect(problem(["--json", "--json"]) == "--json given twice")
        #expect(problem(["--yaml"]) == "unknown argument --yaml")
        #expect(problem(["phone-1"]) == "unknown argument phone-1")
    }
}

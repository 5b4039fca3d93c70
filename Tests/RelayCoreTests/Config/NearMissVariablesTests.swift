import Testing
@testable import RelayCore

/// A variable one slip from a setting is named, with the setting; other programs' variables are left alone.
@Suite struct NearMissVariablesTests {
    @Test(arguments: [
        ("APNS_KEYPATH", "APNS_KEY_PATH"),        // a dropped underscore
        ("PREFECT_API_ULR", "PREFECT_API_URL"),   // two letters swapped
        ("PREFECT_APIURL", "PREFECT_API_URL"),
        ("apns_key_id", "APNS_KEY_ID"),           // the case alone
        ("LOGLEVEL", "LOG_LEVEL"),
        ("APNS_TEAMID", "APNS_TEAM_ID"),
        ("METRIC_PORT", "METRICS_PORT"),
        ("PORTS", "PORT"),                        // a short name: one edit
    ])
    func aSlipNamesTheSetting(_ given: String, _ known: String) {
        #expect(NearMissVariables.find(in: [given]) == [.init(given: given, known: known)])
    }

    @Test func settingsAndOtherProgramsVariablesAreNotNamed() {
        let environment = ["PATH", "HOME", "HOSTNAME", "PWD", "TERM", "LANG", "SHLVL", "PREFECT_HOME",
                           "PREFECT_LOGGING_LEVEL", "PREFECT_SERVER_API_HOST", "KUBERNETES_SERVICE_PORT",
                           "PREFECT_PUSH_SERVICE_PORT", "SSL_CERT_FILE", "TZ"]
            + Settings.all.map(\.name)
        #expect(NearMissVariables.find(in: environment) == [])
    }

    /// Two edits away from a short name is another word, not a slip (`PORT` and `POST`, `HOST`...).
    @Test func shortNamesAllowOneEditOnly() {
        #expect(NearMissVariables.find(in: ["PO"]) == [])
        #expect(NearMissVariables.find(in: ["SORTS"]) == [])
    }

    @Test func editDistanceCountsASwapAsOne() {
        func distance(_ a: String, _ b: String) -> Int {
            NearMissVariables.editDistance(Array(a.utf8), Array(b.utf8), limit: 5)
        }
        #expect(distance("ULR", "URL") == 1)
        #expect(distance("abc", "abc") == 0)
        #expect(distance("", "abc") == 3)
        #expect(distance("kitten", "sitting") == 3)
        #expect(NearMissVariables.editDistance(Array("aaaaaaa".utf8), Array("bbbbbbb".utf8), limit: 2) == 3)
    }
}

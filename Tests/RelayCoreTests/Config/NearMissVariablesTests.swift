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

    /// Other programs' well-known variables that happen to be a slip away from a setting (`FTP_PROXY` from
    /// `HTTP_PROXY`, `API_KEY` from `APNS_KEY`, `GOPROXY` from `NO_PROXY`) are not named; a slip beside them still is.
    @Test func wellKnownVariablesOfOtherProgramsAreNotNamed() {
        let others = ["ftp_proxy", "FTP_PROXY", "all_proxy", "ALL_PROXY", "ws_proxy", "WS_PROXY", "wss_proxy",
                      "WSS_PROXY", "GOPROXY", "API_KEY", "APP_KEY"]
        #expect(NearMissVariables.find(in: others) == [])
        #expect(NearMissVariables.find(in: others + ["HTTP_PROXI"]) == [.init(given: "HTTP_PROXI", known: "HTTP_PROXY")])
        #expect(NearMissVariables.find(in: others + ["APNS_KY"]) == [.init(given: "APNS_KY", known: "APNS_KEY")])
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

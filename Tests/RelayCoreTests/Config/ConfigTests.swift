import Testing
@testable import RelayCore

@Suite struct ConfigTests {
    let minimal = ["PREFECT_API_URL": "http://127.0.0.1:4200/api"]

    func config(_ extra: [String: String]) throws -> Config {
        try Config(environment: minimal.merging(extra) { $1 })
    }

    func error(_ env: [String: String]) -> ConfigError? {
        do { _ = try Config(environment: env); return nil } catch { return error }
    }

    @Test func defaults() throws {
        let c = try config([:])
        #expect(c.prefectAPI == HTTPURL(tls: false, host: "127.0.0.1", port: 4200, path: "/api"))
        #expect(c.prefectAuth == nil)
        #expect(c.prefectUI == "http://127.0.0.1:4200")
        #expect(c.apns == nil)
        #expect(c.apnsTopic == "io.zzstoatzz.prefect")
        #expect(c.dbPath == "prefect-push.db")
        #expect(c.port == 8080)
        #expect(c.basePath == "")
        #expect(c.apnsProduction.host == "api.push.apple.com" && c.apnsProduction.port == 443)
        #expect(c.apnsDevelopment.host == "api.sandbox.push.apple.com")
        #expect(c.apnsCAFile == nil && c.prefectCAFile == nil)
        #expect(c.logLevel == .info)
        #expect(c.logFormat == .logfmt)
    }

    @Test func everyVariableIsRead() throws {
        let c = try config([
            "PREFECT_API_URL": "https://prefect.example.com/api/", "PREFECT_API_AUTH_STRING": "user:pa:ss",
            "PREFECT_UI_URL": "https://ui.example.com/", "APNS_KEY_PATH": "/keys/AuthKey.p8", "APNS_KEY_ID": "ABC123DEFG",
            "APNS_TEAM_ID": "TEAM123456", "APNS_TOPIC": "com.example.app", "DB_PATH": "/data/push.db", "PORT": "9000",
            "BASE_PATH": "/push/", "APNS_PRODUCTION_URL": "https://127.0.0.1:8443",
            "APNS_DEVELOPMENT_URL": "https://localhost:9443", "APNS_CA_FILE": "/ca.pem", "PREFECT_CA_FILE": "/pca.pem",
            "LOG_LEVEL": "DEBUG",
        ])
        #expect(c.prefectAPI == HTTPURL(tls: true, host: "prefect.example.com", port: 443, path: "/api"))
        #expect(c.prefectAuth == "user:pa:ss")
        #expect(c.prefectUI == "https://ui.example.com")
        #expect(c.apns == Config.APNsCredentials(key: .file("/keys/AuthKey.p8"), keyID: "ABC123DEFG", teamID: "TEAM123456"))
        #expect(c.apnsTopic == "com.example.app")
        #expect(c.dbPath == "/data/push.db")
        #expect(c.port == 9000)
        #expect(c.basePath == "/push")
        #expect(c.apnsProduction == HTTPURL(tls: true, host: "127.0.0.1", port: 8443, path: ""))
        #expect(c.apnsDevelopment.port == 9443)
        #expect(c.apnsCAFile == "/ca.pem" && c.prefectCAFile == "/pca.pem")
        #expect(c.logLevel == .debug)
    }

    @Test func inlineKey() throws {
        let c = try config(["APNS_KEY": "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n",
                            "APNS_KEY_ID": "K", "APNS_TEAM_ID": "T"])
        guard case .inline(let pem)? = c.apns?.key else { Issue.record("expected an inline key"); return }
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
    }

    @Test(arguments: [
        ([:], "PREFECT_API_URL"),
        (["PREFECT_API_URL": "ftp://x/api"], "PREFECT_API_URL"),
        (["PREFECT_API_URL": "127.0.0.1:4200/api"], "PREFECT_API_URL"),
        (["PREFECT_API_URL": "http://:4200/api"], "PREFECT_API_URL"),
        (["PREFECT_API_URL": "http://h:99999/api"], "PREFECT_API_URL"),
        (["PREFECT_API_URL": "http://user:pw@h/api"], "PREFECT_API_URL"),
        (["PREFECT_API_AUTH_STRING": "nocolon"], "PREFECT_API_AUTH_STRING"),
        (["PREFECT_UI_URL": "not a url"], "PREFECT_UI_URL"),
        (["APNS_KEY": "k", "APNS_KEY_PATH": "/p", "APNS_KEY_ID": "K", "APNS_TEAM_ID": "T"], "APNS_KEY"),
        (["APNS_KEY_PATH": "/p", "APNS_TEAM_ID": "T"], "APNS_KEY_ID"),
        (["APNS_KEY_PATH": "/p", "APNS_KEY_ID": "K"], "APNS_TEAM_ID"),
        (["APNS_KEY_PATH": "/p", "APNS_KEY_ID": "K-1", "APNS_TEAM_ID": "T"], "APNS_KEY_ID"),
        // The key's ids without the key (a misspelt key variable): half-configured, refused.
        (["APNS_KEY_ID": "K", "APNS_TEAM_ID": "T"], "APNS_KEY_PATH"),
        (["APNS_KEYPATH": "/p", "APNS_KEY_ID": "K", "APNS_TEAM_ID": "T"], "APNS_KEY_PATH"),
        (["APNS_TEAM_ID": "T"], "APNS_KEY_PATH"),
        (["APNS_TOPIC": "bad topic!"], "APNS_TOPIC"),
        (["PORT": "http"], "PORT"),
        (["PORT": "70000"], "PORT"),
        (["PORT": "-1"], "PORT"),
        (["BASE_PATH": "push"], "BASE_PATH"),
        (["APNS_PRODUCTION_URL": "http://api.push.apple.com"], "APNS_PRODUCTION_URL"),
        (["APNS_DEVELOPMENT_URL": "nope"], "APNS_DEVELOPMENT_URL"),
        (["LOG_LEVEL": "loud"], "LOG_LEVEL"),
        (["LOG_FORMAT": "xml"], "LOG_FORMAT"),
        (["PREFECT_CA_FILE": "/a.pem", "PREFECT_API_SSL_CERT_FILE": "/b.pem"], "PREFECT_CA_FILE"),
    ] as [([String: String], String)])
    func badValuesNameTheVariable(_ overrides: [String: String], _ variable: String) {
        var env = overrides.isEmpty ? [:] : minimal
        env.merge(overrides) { $1 }
        let failure = error(env)
        #expect(failure?.variable == variable)
        #expect((failure?.problem.count ?? 0) > 5)
    }

    @Test func helpListsEveryVariable() {
        let names = Set(Settings.all.map(\.name))
        for name in ["PREFECT_API_URL", "PREFECT_API_AUTH_STRING", "PREFECT_UI_URL", "APNS_KEY", "APNS_KEY_PATH",
                     "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC", "DB_PATH", "PORT", "BASE_PATH", "APNS_PRODUCTION_URL",
                     "APNS_DEVELOPMENT_URL", "APNS_CA_FILE", "PREFECT_CA_FILE", "PREFECT_API_SSL_CERT_FILE", "LOG_LEVEL",
                     "LOG_FORMAT", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"] {
            #expect(names.contains(name))
        }
    }

    /// Each default is written once, in its `Setting`: what `--help` shows is what an unset variable gives.
    @Test func helpShowsTheDefaultsConfigUses() throws {
        let unset = try config([:])
        let shown = Dictionary(uniqueKeysWithValues: Settings.all.map { ($0.name, $0.defaultValue) })
        #expect(Settings.all.count == shown.count)  // no name twice
        #expect(shown["PORT"] == String(unset.port))
        #expect(shown["MAX_DEVICES"] == String(unset.maxDevices))
        #expect(shown["HEALTH_GRACE_SECONDS"] == String(unset.healthGrace))
        #expect(shown["HEALTH_STARTUP_SECONDS"] == String(unset.healthStartup))
        #expect(shown["APNS_TOPIC"] == unset.apnsTopic)
        #expect(shown["DB_PATH"] == unset.dbPath)
        #expect(shown["API_BIND"] == unset.apiBind)
        #expect(shown["METRICS_BIND"] == unset.metricsBind)
        #expect(shown["LOG_LEVEL"] == unset.logLevel.rawValue)
        #expect(shown["LOG_FORMAT"] == unset.logFormat.rawValue)
        #expect(shown["APNS_PRODUCTION_URL"] == unset.apnsProduction.string)
        #expect(shown["APNS_DEVELOPMENT_URL"] == unset.apnsDevelopment.string)
        #expect(error(minimal.merging(["LOG_LEVEL": "loud"]) { $1 })?.problem
            == "must be debug, info, warn or error, got \"loud\"")
        #expect(error(minimal.merging(["LOG_FORMAT": "xml"]) { $1 })?.problem == "must be logfmt or json, got \"xml\"")
    }

    /// Prefect's own name for the CA bundle is accepted too; both at once only when they agree.
    @Test func prefectSSLCertFileIsAnAliasOfPrefectCAFile() throws {
        #expect(try config(["PREFECT_API_SSL_CERT_FILE": "/etc/ca.pem"]).prefectCAFile == "/etc/ca.pem")
        #expect(try config(["PREFECT_CA_FILE": "/etc/ca.pem"]).prefectCAFile == "/etc/ca.pem")
        #expect(try config(["PREFECT_CA_FILE": "/etc/ca.pem", "PREFECT_API_SSL_CERT_FILE": " /etc/ca.pem "]).prefectCAFile
            == "/etc/ca.pem")
        let both = error(minimal.merging(["PREFECT_CA_FILE": "/a.pem", "PREFECT_API_SSL_CERT_FILE": "/b.pem"]) { $1 })
        #expect(both?.description.contains("PREFECT_CA_FILE") == true)
        #expect(both?.description.contains("PREFECT_API_SSL_CERT_FILE") == true)
        #expect(both?.description.contains("/a.pem") == true && both?.description.contains("/b.pem") == true)
    }

    @Test func logFormat() throws {
        #expect(try config(["LOG_FORMAT": "JSON"]).logFormat == .json)
        #expect(try config(["LOG_FORMAT": "logfmt"]).logFormat == .logfmt)
        #expect(try Config.logFormat(environment: ["LOG_FORMAT": "json"]) == .json)  // read alone, before the rest
        #expect(try Config.logFormat(environment: [:]) == .logfmt)
    }

    @Test func maxDevices() throws {
        #expect(try config([:]).maxDevices == 10_000)
        #expect(try config(["MAX_DEVICES": "25"]).maxDevices == 25)
        for bad in ["0", "-1", "many", "20000000"] {
            #expect(error(minimal.merging(["MAX_DEVICES": bad]) { $1 })?.variable == "MAX_DEVICES")
        }
        #expect(Settings.all.contains { $0.name == "MAX_DEVICES" })
    }
}


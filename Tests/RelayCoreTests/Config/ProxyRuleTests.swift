import Testing
@testable import RelayCore

@Suite struct ProxyRuleTests {
    func rule(_ env: [String: String]) throws -> ProxyRule { try ProxyRule(environment: env) }

    func error(_ env: [String: String]) -> ConfigError? {
        do { _ = try ProxyRule(environment: env); return nil } catch { return error }
    }

    func route(_ rule: ProxyRule, _ url: String) throws -> ProxyRule.Route {
        try rule.route(for: HTTPURL.parse(url, variable: "test"))
    }

    let proxy = ProxyEndpoint(host: "proxy", port: 3128)
    let other = ProxyEndpoint(host: "other", port: 8080)

    @Test func nothingSetIsDirect() throws {
        let r = try rule([:])
        #expect(r == .none && r.isEmpty)
        #expect(try route(r, "https://api.push.apple.com") == .direct)
        #expect(try route(r, "http://prefect:4200/api") == .direct)
    }

    @Test func schemePicksTheVariable() throws {
        let r = try rule(["HTTPS_PROXY": "http://proxy:3128", "HTTP_PROXY": "http://other:8080"])
        #expect(try route(r, "https://api.push.apple.com") == .proxy(proxy))
        #expect(try route(r, "http://prefect:4200/api") == .proxy(other))
        let httpsOnly = try rule(["HTTPS_PROXY": "http://proxy:3128"])
        #expect(try route(httpsOnly, "http://prefect:4200/api") == .direct)
        let httpOnly = try rule(["http_proxy": "http://other:8080"])
        #expect(try route(httpOnly, "https://prefect/api") == .direct)
    }

    @Test func lowerCaseWinsAndEmptyIsUnset() throws {
        let both = try rule(["https_proxy": "http://proxy:3128", "HTTPS_PROXY": "http://other:8080",
                             "http_proxy": "", "HTTP_PROXY": "http://other:8080"])
        #expect(both.https == proxy)
        #expect(both.http == other)  // an empty lower-case value counts as unset
        let noProxy = try rule(["HTTPS_PROXY": "http://proxy:3128", "no_proxy": "a.example", "NO_PROXY": "*"])
        #expect(try route(noProxy, "https://a.example") == .direct)
        #expect(try route(noProxy, "https://b.example") == .proxy(proxy))
    }

    /// Every proxy variable is a descriptor in `Settings` (so `--help` and the README list it) and `ProxyRule` reads
    /// each through it: the lower-case ones too, each ahead of its upper-case twin unless blank.
    @Test func lowerCaseVariablesAreReadThroughTheirDescriptors() throws {
        let listed = Set(Settings.all.map(\.name))
        let pairs = [(Settings.httpsProxyLower, Settings.httpsProxy), (Settings.httpProxyLower, Settings.httpProxy),
                     (Settings.noProxyLower, Settings.noProxy)]
        for (lower, upper) in pairs {
            #expect(lower.name == upper.name.lowercased())
            #expect(listed.contains(lower.name) && listed.contains(upper.name), "--help lacks \(lower.name)")
        }
        let lower = try rule([Settings.httpsProxyLower.name: " http://proxy:3128 ", Settings.httpProxyLower.name: "other:8080",
                              Settings.noProxyLower.name: "a.example:443"])
        #expect(lower.https == proxy && lower.http == other)
        #expect(lower.noProxy == [.domain("a.example", port: 443)])
        let both = try rule(["https_proxy": "http://proxy:3128", "HTTPS_PROXY": "http://other:8080",
                             "http_proxy": " ", "HTTP_PROXY": "http://proxy:3128", "no_proxy": "", "NO_PROXY": "*"])
        #expect(both.https == proxy && both.http == proxy && both.noProxy == [.everything])
        // A bad value is blamed on the spelling that was read, and the twin it shadows is never parsed.
        #expect(error(["https_proxy": "socks5://proxy:1080", "HTTPS_PROXY": "http://proxy:3128"])?.variable == "https_proxy")
        #expect(error(["no_proxy": "a.example", "NO_PROXY": "host:notaport"]) == nil)
    }

    @Test func proxyURLs() throws {
        #expect(try ProxyEndpoint.parse("proxy:3128", variable: "V") == proxy)
        #expect(try ProxyEndpoint.parse("http://proxy:3128/", variable: "V") == proxy)
        #expect(try ProxyEndpoint.parse("HTTP://proxy", variable: "V") == ProxyEndpoint(host: "proxy", port: 80))
        #expect(try ProxyEndpoint.parse("http://[::1]:3128", variable: "V") == ProxyEndpoint(host: "::1", port: 3128))
        let withAuth = try ProxyEndpoint.parse("http://us%40er:p%3Ass@w@proxy:3128", variable: "V")
        #expect(withAuth.username == "us@er" && withAuth.password == "p:ss@w" && withAuth.host == "proxy")
        #expect(withAuth.authorization == "Basic " + Base64.encode("us@er:p:ss@w"))
        #expect(withAuth.description == "http://proxy:3128")
        #expect(!"\(withAuth)".contains("p:ss") && !"\(ProxyRule.Route.proxy(withAuth).description)".contains("ss@w"))
        #expect(try ProxyEndpoint.parse("http://user@proxy:1", variable: "V").authorization == "Basic " + Base64.encode("user:"))
        #expect(proxy.authorization == nil)
    }

    @Test func badProxyURLsNameTheVariableNotThePassword() {
        for bad in ["https://proxy:3128", "socks5://proxy:1080", "http://proxy:0", "http://proxy:99999",
                    "http://proxy:x", "http://proxy:3128/path", "http://:3128", "http://[::1", "http://u:s3cret%zz@proxy:1"] {
            let e = error(["HTTPS_PROXY": bad])
            #expect(e?.variable == "HTTPS_PROXY", "\(bad)")
            #expect(e.map { !$0.description.contains("s3cret") } ?? false)
        }
        #expect(error(["http_proxy": "ftp://x:1"])?.variable == "http_proxy")
        let long = String(repeating: "s3cret", count: 16)
        #expect(error(["HTTPS_PROXY": "http://user:\(long)@proxy:1"]).map { !$0.description.contains("s3cret") } == true)
        #expect(error(["HTTPS_PROXY": "http://\(String(repeating: "h", count: 121)):1"])?.variable == "HTTPS_PROXY")
    }

    @Test func noProxyHostSuffixes() throws {
        let r = try rule(["HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": " example.com , .corp.internal,*.lan, Mixed.Case "])
        for direct in ["https://example.com", "https://api.example.com", "https://a.b.example.com:8443",
                       "https://corp.internal", "https://x.corp.internal", "https://lan", "https://nas.lan",
                       "https://mixed.case", "https://API.EXAMPLE.COM"] {
            #expect(try route(r, direct) == .direct, "\(direct)")
        }
        for proxied in ["https://notexample.com", "https://example.com.evil", "https://api.push.apple.com",
                        "https://internal", "https://xlan"] {
            #expect(try route(r, proxied) == .proxy(proxy), "\(proxied)")
        }
    }

    @Test func noProxyStar() throws {
        let r = try rule(["HTTPS_PROXY": "http://proxy:3128", "HTTP_PROXY": "http://proxy:3128", "no_proxy": "*"])
        #expect(try route(r, "https://api.push.apple.com") == .direct)
        #expect(try route(r, "http://10.0.0.1:4200/api") == .direct)
    }

    @Test func noProxyPorts() throws {
        let r = try rule(["HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "prefect.lan:4200,10.1.2.3:443,[::1]:8443"])
        #expect(try route(r, "https://prefect.lan:4200/api") == .direct)
        #expect(try route(r, "https://prefect.lan/api") == .proxy(proxy))
        #expect(try route(r, "https://10.1.2.3") == .direct)
        #expect(try route(r, "https://10.1.2.3:444") == .proxy(proxy))
        #expect(try route(r, "https://[::1]:8443") == .direct)
        #expect(try route(r, "https://[::1]:443") == .proxy(proxy))
    }

    @Test func noProxyIPLiteralsMatchExactly() throws {
        let r = try rule(["HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "127.0.0.1,::1,[fd00::5],2.3.4"])
        #expect(try route(r, "https://127.0.0.1:9999") == .direct)
        #expect(try route(r, "https://[::1]:443") == .direct)
        #expect(try route(r, "https://[FD00::5]") == .direct)
        #expect(try route(r, "https://127.0.0.2") == .proxy(proxy))
        #expect(try route(r, "https://localhost") == .proxy(proxy))
        // An address entry is no suffix: 0.0.1 must not match 127.0.0.1, and a name entry never matches an address.
        let suffix = try rule(["HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "0.0.1,1"])
        #expect(try route(suffix, "https://127.0.0.1") == .proxy(proxy))
        #expect(ProxyRule.isIPLiteral("10.0.0.255") && !ProxyRule.isIPLiteral("10.0.0.256") && !ProxyRule.isIPLiteral("2.3.4"))
    }

    @Test func noProxyParsing() throws {
        #expect(try ProxyRule.parseNoProxy("a.com,,b.com:80, *", variable: "NO_PROXY")
                == [.domain("a.com", port: nil), .domain("b.com", port: 80), .everything])
        #expect(try ProxyRule.parseNoProxy("https://c.com.", variable: "NO_PROXY") == [.domain("c.com", port: nil)])
        #expect(error(["NO_PROXY": "host:notaport"])?.variable == "NO_PROXY")
        #expect(error(["no_proxy": "[::1"])?.variable == "no_proxy")
        #expect(error(["NO_PROXY": "."])?.variable == "NO_PROXY")
    }

    @Test func configCarriesTheRule() throws {
        let c = try Config(environment: ["PREFECT_API_URL": "http://127.0.0.1:4200/api",
                                         "HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "127.0.0.1"])
        #expect(c.proxy.route(for: c.apnsProduction) == .proxy(proxy))
        #expect(c.proxy.route(for: c.prefectAPI) == .direct)
    }
}

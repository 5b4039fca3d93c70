/// Prefect Cloud (README "Prefect Cloud"): a workspace's API root, `PREFECT_API_KEY`, and the credential each
/// Prefect call carries. Pure, like the rest of `Config`.

/// A Prefect API key (`PREFECT_API_KEY`). It prints as a placeholder, so interpolating a `Config` or the key itself
/// into a log line or an error never shows it; only `value` does, and only the edges that send it read that.
public struct APIKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<PREFECT_API_KEY>" }
    public var debugDescription: String { description }
}

/// A Prefect Cloud workspace, recognised from the shape of its API root,
/// `<origin>/api/accounts/<account id>/workspaces/<workspace id>` (both ids UUIDs). The rule keys on the path, not
/// the host, so anything serving that shape (a proxy, a test stand-in) is treated as Cloud; only the default UI
/// address depends on the host (`api.prefect.cloud` → `app.prefect.cloud`).
public struct CloudWorkspace: Sendable, Equatable {
    public var accountID: String
    public var workspaceID: String

    public init(accountID: String, workspaceID: String) {
        self.accountID = accountID
        self.workspaceID = workspaceID
    }

    /// The shape of a workspace root, for messages.
    public static let shape = "https://api.prefect.cloud/api/accounts/<account id>/workspaces/<workspace id>"

    /// The workspace `api` names, nil for a self-hosted root. Throws for a root that is plainly meant for Cloud but
    /// isn't a workspace root (the bare Cloud API, a UI address, an id that isn't a UUID).
    public static func recognise(_ api: HTTPURL) throws(ConfigError) -> CloudWorkspace? {
        let segments = api.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let fix = "must be a workspace's API root, \(shape) (copy the ids from the workspace's address in the Cloud UI)"
        if isCloudUIHost(api.host) || (segments.count >= 4 && segments[0] == "account" && segments[2] == "workspace") {
            throw ConfigError("PREFECT_API_URL", "is a Prefect Cloud UI address; it \(fix)")
        }
        guard segments.count >= 2, segments[0] == "api", segments[1] == "accounts" else {
            if isCloudAPIHost(api.host) { throw ConfigError("PREFECT_API_URL", fix) }
            return nil
        }
        guard segments.count == 5, segments[3] == "workspaces" else { throw ConfigError("PREFECT_API_URL", fix) }
        guard isUUID(segments[2]), isUUID(segments[4]) else {
            throw ConfigError("PREFECT_API_URL", "has an account or workspace id that is not a UUID; it \(fix)")
        }
        return CloudWorkspace(accountID: segments[2].lowercased(), workspaceID: segments[4].lowercased())
    }

    /// The workspace in the UI, the way Prefect's own settings derive `PREFECT_UI_URL` from a Cloud API URL
    /// (`prefect/settings/models/_defaults.py`, `cloud.py`): an `https://api…prefect.…` host becomes `app…`, then
    /// `/api/accounts/<a>/workspaces/<w>` becomes `/account/<a>/workspace/<w>`. Another host is kept as it is.
    public func uiRoot(api: HTTPURL) -> String {
        var ui = api
        if ui.tls, CloudWorkspace.isCloudAPIHost(ui.host) { ui.host = "app" + ui.host.dropFirst(3) }
        ui.path = "/account/\(accountID)/workspace/\(workspaceID)"
        return ui.string
    }

    // MARK: - Shapes

    /// `api.prefect.cloud` and the like (`api[.\w]*.prefect.<tld>`, as Prefect's settings match it).
    static func isCloudAPIHost(_ host: String) -> Bool {
        let parts = host.lowercased().split(separator: ".")
        return parts.count >= 3 && parts[0] == "api" && parts.dropFirst().dropLast().contains("prefect")
    }

    static func isCloudUIHost(_ host: String) -> Bool {
        let parts = host.lowercased().split(separator: ".")
        return parts.count >= 3 && parts[0] == "app" && parts.dropFirst().dropLast().contains("prefect")
    }

    /// 8-4-4-4-12 hex digits.
    static func isUUID(_ text: String) -> Bool {
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        return groups.map(\.count) == [8, 4, 4, 4, 12] && groups.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }
}

// MARK: - The credential on each call

extension Config {
    /// The `Authorization` header on the relay's own REST calls: `Bearer <PREFECT_API_KEY>` (Cloud), or
    /// `Basic base64(PREFECT_API_AUTH_STRING)` (self-hosted behind basic auth), or none (an open server).
    public var prefectAuthorization: String? {
        if let prefectAPIKey { return "Bearer " + prefectAPIKey.value }
        return prefectAuth.map { "Basic " + Base64.encode(Array($0.utf8)) }
    }

    /// The events socket's `{"type":"auth","token":…}`: the API key, else the raw auth string, else null; the
    /// order Prefect's own `PrefectEventSubscriber` uses.
    public var prefectSocketToken: String? { prefectAPIKey?.value ?? prefectAuth }

    /// The variable that holds the credential, for messages (`none` when there is none).
    public var prefectCredentialName: String {
        prefectAPIKey != nil ? "PREFECT_API_KEY" : prefectAuth != nil ? "PREFECT_API_AUTH_STRING" : "none"
    }

    /// What to do when Prefect refuses the relay's credential (REST 401/403, socket close 1008).
    public var prefectCredentialFix: String {
        if prefectAPIKey != nil {
            return "PREFECT_API_KEY was refused: use a current API key of a service account (or user) with at least "
                + "read access to this workspace, and check PREFECT_API_URL names that workspace"
        }
        if cloudWorkspace != nil { return "Prefect Cloud needs a credential: set PREFECT_API_KEY" }
        return prefectAuth == nil
            ? "the server wants a credential: set PREFECT_API_AUTH_STRING to its user:pass "
                + "(PREFECT_API_KEY for Prefect Cloud)"
            : "PREFECT_API_AUTH_STRING must equal the server's PREFECT_SERVER_API_AUTH_STRING (user:pass)"
    }

    /// Said at start-up (`prefect.open_server`) and by `check` when no credential is configured and the watched
    /// server answers without one: the relay admits whoever Prefect admits, so on an open server that is anyone.
    public static let openServerWarning = "the Prefect server answers without a credential, so the relay's API admits "
        + "anyone who can reach it: they can register devices, send test alerts and delete devices"
    public static let openServerFix = "run Prefect with PREFECT_SERVER_API_AUTH_STRING and set PREFECT_API_AUTH_STRING "
        + "here to the same user:pass, or keep the relay's API on a private network"

    /// `PREFECT_API_KEY`: one line of printable ASCII (it goes into a header). Never quoted back in the error.
    static func apiKey(_ raw: String?) throws(ConfigError) -> APIKey? {
        guard let raw else { return nil }
        let key = raw.trimmingWhitespace()
        guard !key.isEmpty else { return nil }
        guard key.count <= 4096, key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigError("PREFECT_API_KEY", "must be one API key: printable characters, no spaces or line breaks")
        }
        return APIKey(key)
    }
}

import HealthgateCore
import Posix
import YAMLConfig

/// What a receiver builder gets besides its config.
public struct ReceiverBuildContext: Sendable {
    public var parsers: ParserPool
    public var logger: Logger
    public var dataDir: String
    /// `fleet.state`: the PostgreSQL a fleet's machines share (nil: one machine).
    public var fleetState: String?
}

/// Every receiver kind, by its `kind:` in the config. A new receiver is one folder and one line here.
public enum ReceiverRegistry {
    public typealias Builder =
        @Sendable (
            _ name: String, _ config: ReceiverConfig, _ node: YAMLNode, _ path: String,
            _ context: ReceiverBuildContext
        ) throws(ConfigProblems) -> any Receiver

    public typealias Entry = (kind: String, defaultPath: String, keys: [String], build: Builder)

    /// Each kind names the config keys it takes; any other key is a config error, so a setting
    /// (`hmac` on a kind that cannot check signatures) is never accepted and then ignored.
    public static let builders: [Entry] = [
        ("syncky", "/syncky", common + ["device", "hmac", "write_back", "name", "public_url", "types"], SynckyReceiver.build),
        ("hae", "/api/data", common + ["device"], HAEReceiver.build),
        ("influx", "/api/v2/write", common + ["device"], InfluxReceiver.build),
        ("ingest", "/v1/ingest", common + ["max_items"], IngestReceiver.build),
        ("healthsync", "/api/apple-health/sync", common + ["device"], HealthSyncReceiver.build)
    ]

    /// The keys every receiver kind takes.
    static let common = ["kind", "path", "auth", "max_body", "devices"]

    public static var kinds: [String] { builders.map(\.kind) }

    public static func entry(kind: String) -> Entry? {
        builders.first { $0.kind == kind }
    }

    /// A problem for each key of `node` that receivers of `kind` do not take.
    static func unsupportedKeys(_ node: YAMLNode, entry: Entry, path: String) -> [ConfigProblem] {
        guard case .mapping(let entries, _) = node else { return [] }
        return entries.filter { !entry.keys.contains($0.key) }.map { e in
            ConfigProblem(
                location: e.keyLocation, path: path + "." + e.key,
                message: "a \(entry.kind) receiver does not take \"\(e.key)\"\(hint(e.key, kind: entry.kind)); "
                    + "it takes: \(entry.keys.joined(separator: ", "))")
        }
    }

    static func hint(_ key: String, kind: String) -> String {
        switch key {
        case "hmac": " (only syncky receivers check signatures: the other senders cannot sign)"
        case "write_back": " (write-back is a Syncky feature)"
        case "name", "public_url", "types": " (setup links are made for syncky receivers only)"
        case "max_items": " (only ingest chunks have an item limit)"
        case "device" where kind == "ingest": " (an ingest chunk names its device in device_id)"
        default: ""
        }
    }
}

extension SynckyReceiver {
    static let build: ReceiverRegistry.Builder = { name, c, node, path, context throws(ConfigProblems) in
        let auth =
            try c.auth.map { a throws(ConfigProblems) in try Authenticator(config: a, node: node, path: path + ".auth") }
            ?? Authenticator(kind: .none)
        return SynckyReceiver(
            name: name, path: c.path ?? "/syncky",
            maxBodyBytes: Int(c.max_body?.bytes ?? Int64(ReceiverConfig.defaultMaxBody)),
            auth: auth, hmacSecret: c.hmac?.secret, device: c.device,
            parsers: context.parsers, logger: context.logger.child("receiver \(name)"),
            replays: ReplayCache(
                path: FileIO.join(context.dataDir, "replay/\(name)"),
                shared: context.fleetState.map { SharedSignatures(url: $0, receiver: name) }),
            writeBack: c.write_back == true
                ? WriteBack(
                    receiver: name, dataDir: context.dataDir, fleetState: context.fleetState,
                    logger: context.logger.child("receiver \(name)"))
                : nil)
    }
}

extension Authenticator {
    /// Checks that the auth block has exactly what its type needs.
    init(config a: AuthConfig, node: YAMLNode, path: String) throws(ConfigProblems) {
        var problems: [ConfigProblem] = []
        let loc = node["auth"]?.location ?? node.location
        func need(_ key: String, _ value: String?) {
            if value == nil || value!.isEmpty {
                problems.append(
                    ConfigProblem(
                        location: loc, path: path,
                        message: "auth type \(a.type.rawValue) needs \"\(key)\""))
            }
        }
        func refuse(_ key: String, _ value: String?) {
            if value != nil {
                problems.append(
                    ConfigProblem(
                        location: loc, path: path,
                        message: "\"\(key)\" has no meaning for auth type \(a.type.rawValue)"))
            }
        }
        switch a.type {
        case .none: refuse("token", a.token); refuse("user", a.user); refuse("header", a.header)
        case .client_cert:
            refuse("token", a.token); refuse("user", a.user); refuse("header", a.header)
            if (a.subjects ?? []).isEmpty && (a.sha256 ?? []).isEmpty {
                problems.append(
                    ConfigProblem(
                        location: loc, path: path,
                        message: "auth type client_cert needs \"subjects\" or \"sha256\": the certificates it takes"))
            }
        case .bearer: need("token", a.token); refuse("user", a.user); refuse("header", a.header)
        case .basic:
            need("user", a.user); need("token", a.token); refuse("header", a.header)
            if let u = a.user, u.contains(":") {
                problems.append(ConfigProblem(location: loc, path: path, message: "a Basic user must not contain \":\""))
            }
        case .header:
            need("header", a.header); need("token", a.token); refuse("user", a.user)
            if let h = a.header,
                ["authorization", "host", "content-type", "content-length"].contains(h.lowercased())
                    || h.lowercased().hasPrefix("x-syncky-")
            {
                problems.append(
                    ConfigProblem(
                        location: loc, path: path,
                        message: "\"\(h)\" cannot be a custom auth header"))
            }
        }
        for f in a.sha256 ?? []
        where Authenticator.fingerprint(f).count != 64
            || !Authenticator.fingerprint(f).allSatisfy({ $0.isHexDigit })
        {
            problems.append(
                ConfigProblem(
                    location: loc, path: path + ".sha256",
                    message: "\"\(f)\" is not a SHA-256 fingerprint (64 hex digits, e.g. from "
                        + "`openssl x509 -noout -fingerprint -sha256 -in client.pem`)"))
        }
        if !problems.isEmpty { throw ConfigProblems(problems: problems) }
        self.init(
            kind: a.type, token: a.token ?? "", user: a.user ?? "", header: a.header ?? "",
            subjects: a.subjects ?? [], sha256: a.sha256 ?? [])
    }
}

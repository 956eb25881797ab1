import CMicroHTTPD
import Fleet
import Glibc
import HealthgateCore
import HealthgateCrypto
import Pipeline
import Posix
import SinkKit
import Sinks
import Transforms
import YAMLConfig

/// A checked config, built into components: what `serve` runs and `check` prints.
public struct Topology: Sendable {
    public var file: String
    public var listenHost: String
    public var listenPort: UInt16
    public var dataDir: String
    public var tls: TLSConfig?
    public var http: HTTPTuning
    public var receivers: [(name: String, config: ReceiverConfig, receiver: any Receiver)]
    public var routes: [Route]
    public var sinks: [(name: String, built: BuiltSink)]
    /// Things that work but are probably not what was meant (a sink nothing feeds).
    public var warnings: [String]
    public var journal: JournalConfig = JournalConfig()
    public var quarantine: QuarantineConfig = QuarantineConfig()
    public var deadLetters: DeadLettersConfig = DeadLettersConfig()
    /// `read_api:`, checked: what is served under its prefix (nil: nothing).
    public var readAPI: ReadAPISettings?
    /// `admin:`: the token that opens the status page from elsewhere than loopback.
    public var admin: AdminSettings?
    /// `log:`: the level and format of `serve`'s log.
    public var log: LogConfig = LogConfig()
    /// `fleet:`, checked (nil: one machine).
    public var fleet: FleetSettings?
    /// `shutdown_timeout:` (default 20 s): how long SIGTERM waits for requests in flight and
    /// sinks' writes before `serve` exits.
    public var shutdownTimeout: Double = 20
    /// Per sink, its config and the routes that lead to it, as text without locations: what a
    /// reload compares to know which sinks to rebuild.
    public var sinkFingerprints: [String: String] = [:]
}

/// A YAML subtree as text, without where it stood in the file (moving a block is no change).
func fingerprint(_ node: YAMLNode) -> String {
    switch node {
    case .scalar(let s): return (s.isNull ? "~" : "") + "\"" + s.value.replacing("\"", with: "\\\"") + "\""
    case .sequence(let items, _): return "[" + items.map(fingerprint).joined(separator: ",") + "]"
    case .mapping(let entries, _): return "{" + entries.map { "\"\($0.key)\":" + fingerprint($0.value) }.joined(separator: ",") + "}"
    }
}

/// `log: {level: info, format: logfmt}` — `format: json` for one JSON object a line.
public struct LogConfig: Decodable, Sendable {
    public enum Level: String, Decodable, Sendable {
        case debug, info, warning, error
        public var level: LogLevel {
            switch self {
            case .debug: .debug
            case .info: .info
            case .warning: .warning
            case .error: .error
            }
        }
    }

    public enum Format: String, Decodable, Sendable {
        case logfmt, json
    }

    public var level: Level?
    public var format: Format?

    public init() {}
}

struct TopLevelConfig: Decodable {
    var listen: String?
    var data_dir: String?
    var tls: TLSConfig?
    var http: HTTPTuning?
    var journal: JournalConfig?
    var quarantine: QuarantineConfig?
    var dead_letters: DeadLettersConfig?
    var receivers: YAMLNode?
    var routes: YAMLNode?
    var sinks: YAMLNode?
    var read_api: YAMLNode?
    var admin: AdminConfig?
    var log: LogConfig?
    var shutdown_timeout: ConfigDuration?
    var fleet: YAMLNode?
}

struct RouteConfig: Decodable {
    var name: String?
    var from: [String]
    var transforms: [YAMLNode]?
    var to: [String]
}

public enum ConfigLoader {
    public static let defaultListen = "0.0.0.0:8080"
    public static let defaultDataDir = "./healthgate-data"

    /// Parses, checks and builds a config, reporting every problem found at once.
    /// `transforms`: the transform kinds a route may name (the registry's; tests add their own).
    public static func load(
        text: String, file: String, environment: [String: String], logger: Logger,
        transforms registry: [(name: String, build: TransformRegistry.Builder)] = TransformRegistry.builders
    )
        throws(ConfigProblems) -> Topology
    {
        let transformNames = registry.map(\.name)
        let root = try parseYAML(text, file: file, environment: environment)
        if root.isNull || root.entries?.isEmpty == true {
            throw ConfigProblems(problems: [
                ConfigProblem(
                    location: SourceLocation(file: file, line: 1, column: 1), path: "",
                    message: "the config is empty: it needs at least a receiver, a route and a sink (config.example.yaml has "
                        + "them all), or run serve without --config for the embedded default")
            ])
        }
        let top = try YAMLDecoder().decode(TopLevelConfig.self, from: root)
        var problems: [ConfigProblem] = []
        func add(_ e: ConfigProblems) { problems += e.problems }

        let listen = top.listen ?? defaultListen
        var host = "0.0.0.0"
        var port: UInt16 = 8080
        if let (h, p) = parseListen(listen) {
            host = h
            port = p
        } else {
            problems.append(
                ConfigProblem(
                    location: root["listen"]?.location, path: "listen",
                    message: "\"\(listen)\" is not IP:PORT (e.g. 0.0.0.0:8080, 127.0.0.1:8080 or [::]:8080)"))
        }
        if let tls = top.tls, let why = ConfigLoader.tlsProblem(tls) {
            problems.append(ConfigProblem(location: root["tls"]?.location, path: "tls", message: why))
        }
        let dataDir = top.data_dir ?? defaultDataDir
        if let why = ConfigLoader.unsafeDataDir(dataDir) {
            problems.append(ConfigProblem(location: root["data_dir"]?.location, path: "data_dir", message: why))
        }

        // Sinks first: routes name them.
        var sinks: [(name: String, built: BuiltSink)] = []
        let sinkContext = SinkBuildContext(dataDir: dataDir)
        for entry in mappingEntries(top.sinks, path: "sinks", problems: &problems) {
            let path = "sinks.\(entry.key)"
            if let why = ConfigLoader.unsafeName(entry.key) {
                problems.append(ConfigProblem(location: entry.keyLocation, path: path, message: why))
                continue
            }
            guard let kind = kindOf(entry.value, path: path, known: SinkRegistry.kinds, what: "sink", problems: &problems),
                let build = SinkRegistry.builder(kind: kind)
            else { continue }
            do {
                sinks.append((entry.key, try build(entry.key, entry.value, path, sinkContext)))
            } catch {
                add(error)
            }
        }

        var receivers: [(name: String, config: ReceiverConfig, receiver: any Receiver)] = []
        let fleet = top.fleet.flatMap { FleetSettings.check($0, problems: &problems) }
        let receiverContext = ReceiverBuildContext(parsers: ParserPool(), logger: logger, dataDir: dataDir, fleetState: fleet?.state)
        var paths: [String: String] = [:]
        for entry in mappingEntries(top.receivers, path: "receivers", problems: &problems) {
            let path = "receivers.\(entry.key)"
            if let why = ConfigLoader.unsafeName(entry.key) {
                problems.append(ConfigProblem(location: entry.keyLocation, path: path, message: why))
                continue
            }
            guard
                let kind = kindOf(
                    entry.value, path: path, known: ReceiverRegistry.kinds, what: "receiver",
                    problems: &problems),
                let registered = ReceiverRegistry.entry(kind: kind)
            else { continue }
            let unsupported = ReceiverRegistry.unsupportedKeys(entry.value, entry: registered, path: path)
            guard unsupported.isEmpty else { problems += unsupported; continue }
            do {
                var c = try YAMLDecoder().decode(ReceiverConfig.self, from: entry.value, path: path)
                if c.path == nil { c.path = registered.defaultPath }
                // Requests match with or without a trailing slash; so does the config.
                while c.path!.count > 1 && c.path!.hasSuffix("/") { c.path!.removeLast() }
                if !(c.path!.hasPrefix("/")) {
                    problems.append(
                        ConfigProblem(
                            location: entry.value["path"]?.location, path: path + ".path",
                            message: "a path starts with /, e.g. /syncky"))
                }
                if let other = paths[c.path!] {
                    problems.append(
                        ConfigProblem(
                            location: entry.value["path"]?.location ?? entry.value.location,
                            path: path + ".path",
                            message: "\(c.path!) is already the path of receiver \"\(other)\"; give each its own"))
                }
                paths[c.path!] = entry.key
                receivers.append((entry.key, c, try registered.build(entry.key, c, entry.value, path, receiverContext)))
            } catch {
                add(error)
            }
        }

        // A receiver that names client certificates needs the listener to ask for them.
        if top.tls?.client_ca == nil {
            for r in receivers
            where r.config.auth?.type == .client_cert || !(r.config.auth?.subjects ?? []).isEmpty
                || !(r.config.auth?.sha256 ?? []).isEmpty
            {
                problems.append(
                    ConfigProblem(
                        location: top.receivers?[r.name]?["auth"]?.location, path: "receivers.\(r.name).auth",
                        message: "client certificates are asked for only with tls: {client_ca: FILE}; "
                            + "set it, or take out subjects/sha256"))
            }
        }

        var routes: [Route] = []
        if let node = top.routes {
            guard case .sequence(let items, _) = node else {
                problems.append(ConfigProblem(location: node.location, path: "routes", message: "routes is a list"))
                throw ConfigProblems(problems: problems)
            }
            let declaredSinks = top.sinks.map { mappingKeys($0) } ?? []
            let declaredReceivers = top.receivers.map { mappingKeys($0) } ?? []
            for (i, item) in items.enumerated() {
                let path = "routes[\(i)]"
                do {
                    let rc = try YAMLDecoder().decode(RouteConfig.self, from: item, path: path)
                    var transforms: [any TransformSpec] = []
                    for (j, t) in (rc.transforms ?? []).enumerated() {
                        let tpath = "\(path).transforms[\(j)]"
                        guard case .mapping(let entries, let loc) = t, entries.count == 1 else {
                            problems.append(
                                ConfigProblem(
                                    location: t.location, path: tpath,
                                    message:
                                        "a transform is one key naming it, e.g. `- filter: {types: [steps]}`; known: \(transformNames.joined(separator: ", "))"
                                ))
                            continue
                        }
                        let tname = entries[0].key
                        guard let build = registry.first(where: { $0.name == tname })?.build else {
                            problems.append(
                                ConfigProblem(
                                    location: loc, path: tpath,
                                    message:
                                        "unknown transform \"\(tname)\"\(suggestion(tname, transformNames)); known: \(transformNames.joined(separator: ", "))"
                                ))
                            continue
                        }
                        do {
                            transforms.append(try build(entries[0].value, "\(tpath).\(tname)"))
                        } catch {
                            add(error)
                        }
                    }
                    for (k, f) in rc.from.enumerated() {
                        let g = Glob(f)
                        if !declaredReceivers.contains(where: { g.matches($0) }) {
                            problems.append(
                                ConfigProblem(
                                    location: item["from"]?.location ?? item.location,
                                    path: "\(path).from[\(k)]",
                                    message: "no receiver is named \"\(f)\"\(suggestion(f, declaredReceivers))"))
                        }
                    }
                    for (k, s) in rc.to.enumerated() where !declaredSinks.contains(s) {
                        problems.append(
                            ConfigProblem(
                                location: item["to"]?.location ?? item.location,
                                path: "\(path).to[\(k)]",
                                message: "no sink is named \"\(s)\"\(suggestion(s, declaredSinks))"))
                    }
                    if rc.to.isEmpty {
                        problems.append(
                            ConfigProblem(
                                location: item.location, path: "\(path).to",
                                message: "a route needs at least one sink in `to`"))
                    }
                    routes.append(
                        Route(
                            name: rc.name ?? "route \(i + 1)", from: rc.from.map(Glob.init),
                            transforms: transforms, to: rc.to))
                } catch {
                    add(error)
                }
            }
        }
        var readAPI: ReadAPISettings?
        if let node = top.read_api {
            readAPI = ReadAPISettings.check(
                node, sinks: sinks, receivers: receivers, httpThreads: top.http?.threads ?? 8,
                problems: &problems)
        }
        let shutdownTimeout = top.shutdown_timeout?.seconds ?? 20
        if shutdownTimeout < 1 || shutdownTimeout > 600 {
            problems.append(
                ConfigProblem(
                    location: root["shutdown_timeout"]?.location, path: "shutdown_timeout",
                    message: "shutdown_timeout is 1s to 10m (keep it below systemd's TimeoutStopSec, 30 s in contrib's unit)"))
        }
        var admin: AdminSettings?
        if let a = top.admin {
            var list = ConfigProblemList(root["admin"] ?? root, path: "admin")
            if let token = a.token {
                if token.utf8.count < 16 {
                    list.add("token", "the admin token is shorter than 16 characters: use a long random one (`openssl rand -hex 24`)")
                }
                if receivers.contains(where: { $0.config.auth?.token == token })
                    || readAPI?.tokens.contains(where: { $0.secret == Array(token.utf8) }) == true
                {
                    list.add(
                        "token",
                        "the admin token is also a receiver's or a read token: give it its own (a phone's token never opens the status page)"
                    )
                }
            } else if a.local_links == nil {
                list.add("token", "admin takes a token (it opens the status page, links included, to whoever has it) or local_links: true")
            }
            problems += list.problems
            admin = AdminSettings(token: a.token.map { Array($0.utf8) }, localLinks: a.local_links ?? false)
        }
        if !problems.isEmpty { throw ConfigProblems(problems: problems) }

        var fingerprints: [String: String] = [:]
        let routeItems: [YAMLNode] = {
            if case .sequence(let items, _)? = top.routes { return items }; return []
        }()
        for entry in mappingEntries(top.sinks, path: "sinks", problems: &problems) {
            let feeding = routeItems.filter { item in
                guard case .sequence(let to, _)? = item["to"] else { return false }
                return to.contains { $0.scalar?.value == entry.key }
            }
            fingerprints[entry.key] = fingerprint(entry.value) + "|" + feeding.map(fingerprint).joined(separator: ",")
        }

        var warnings: [String] = []
        for s in sinks where !routes.contains(where: { $0.to.contains(s.name) }) {
            warnings.append("sink \"\(s.name)\" is in no route's `to`: it will receive nothing")
        }
        for r in receivers where !routes.contains(where: { $0.takes(receiver: r.name) }) {
            warnings.append("receiver \"\(r.name)\" is in no route's `from`: its data is journaled but delivered nowhere")
        }
        return Topology(
            file: file, listenHost: host, listenPort: port, dataDir: dataDir, tls: top.tls,
            http: top.http ?? HTTPTuning(), receivers: receivers, routes: routes, sinks: sinks,
            warnings: warnings, journal: top.journal ?? JournalConfig(),
            quarantine: top.quarantine ?? QuarantineConfig(), deadLetters: top.dead_letters ?? DeadLettersConfig(),
            readAPI: readAPI, admin: admin,
            log: top.log ?? LogConfig(), fleet: fleet, shutdownTimeout: shutdownTimeout, sinkFingerprints: fingerprints)
    }

    /// Why the key and certificate files cannot serve HTTPS (unreadable, not PEM, not a pair);
    /// nil when they can. Said by `check`, and by a reload before the listener is touched.
    static func tlsProblem(_ tls: TLSConfig) -> String? {
        guard let key = try? FileIO.readAll(tls.key) else { return "tls.key \(tls.key) cannot be read" }
        guard let cert = try? FileIO.readAll(tls.cert) else { return "tls.cert \(tls.cert) cannot be read" }
        if let ca = tls.client_ca {
            guard let pem = try? FileIO.readAll(ca) else { return "tls.client_ca \(ca) cannot be read" }
            if pem.withUnsafeBufferPointer({ b in
                b.withMemoryRebound(to: CChar.self) { hg_tls_count_certificates($0.baseAddress, $0.count) }
            }) < 1 {
                return "tls.client_ca \(ca) holds no PEM certificate: every client would be refused"
            }
        }
        if let v = tls.min_version, v != "1.2" && v != "1.3" {
            return "tls.min_version is \"1.2\" or \"1.3\" (older versions are broken, RFC 8996)"
        }
        if tls.priorities != nil && tls.min_version != nil {
            return "tls.priorities and tls.min_version both say which versions are taken: give one"
        }
        if let p = tls.priorities {
            let at = hg_tls_priorities_error(p)
            if at >= 0 {
                return "tls.priorities is not a GnuTLS priority string: it goes wrong at \"\(String(p.utf8.dropFirst(Int(at))) ?? p)\""
            }
        }
        return Crypto.keyPairProblem(keyPEM: String(decoding: key, as: UTF8.self), certPEM: String(decoding: cert, as: UTF8.self))
            .map { "tls: \($0) (key \(tls.key), certificate \(tls.cert))" }
    }

    /// `host:port`, `[v6]:port` or `:port`; the host is an IP address (or `localhost`).
    static func parseListen(_ s: String) -> (String, UInt16)? {
        var host: String
        let port: UInt16
        if s.hasPrefix("["), let close = s.firstIndex(of: "]") {
            host = String(s[s.index(after: s.startIndex)..<close])
            let rest = s[s.index(after: close)...]
            guard rest.hasPrefix(":"), let p = UInt16(rest.dropFirst()) else { return nil }
            port = p
        } else {
            guard let colon = s.lastIndex(of: ":"), let p = UInt16(s[s.index(after: colon)...]) else { return nil }
            host = String(s[..<colon])
            port = p
        }
        if host.isEmpty { host = "0.0.0.0" }
        if host == "localhost" { host = "127.0.0.1" }
        var v4 = in_addr()
        var v6 = in6_addr()
        guard inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 else { return nil }
        return (host, port)
    }

    static func mappingEntries(_ node: YAMLNode?, path: String, problems: inout [ConfigProblem]) -> [YAMLMappingEntry] {
        guard let node else { return [] }
        if case .mapping(let entries, _) = node { return entries }
        if case .scalar(let s) = node, s.isNull { return [] }
        problems.append(ConfigProblem(location: node.location, path: path, message: "\(path) is a mapping of names to settings"))
        return []
    }

    /// Receiver and sink names become file names under data_dir (cursors, replay caches,
    /// export logs): only names that cannot leave it, or hide, are taken.
    static func unsafeName(_ name: String) -> String? {
        let ok =
            name.utf8.count <= 64 && name.utf8.first.map { Self.isAlnum($0) } == true
            && name.utf8.allSatisfy { Self.isAlnum($0) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E }
        return ok
            ? nil
            : "a name is 1 to 64 letters, digits, \"-\", \"_\" or \".\", starting with a letter or digit "
                + "(it names files under data_dir)"
    }

    static func isAlnum(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) }

    /// Directories that are never a data dir: the root, the system's own, and their parents.
    static let systemDirectories: Set<String> = [
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt", "/opt",
        "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/local",
        "/usr/sbin", "/usr/share", "/var", "/var/lib", "/var/log", "/var/tmp"
    ]

    static func unsafeDataDir(_ dir: String) -> String? {
        guard !dir.isEmpty else { return "data_dir is empty; give a directory of its own, e.g. ./healthgate-data" }
        var normal = ConfigLoader.normalizedAbsolute(dir)
        // An existing one is judged by where it leads: a link to /etc is /etc.
        if let real = realpath(dir, nil) {
            normal = String(cString: real)
            free(real)
        }
        guard !systemDirectories.contains(normal) else {
            return "data_dir \(normal) is a system directory; healthgate keeps health data, cursors and secrets there "
                + "with mode 0700 — give a directory of its own, e.g. /var/lib/healthgate"
        }
        return nil
    }

    /// `dir` as an absolute path with `.`, `..` and repeated slashes resolved (no symlinks).
    static func normalizedAbsolute(_ dir: String) -> String {
        var base: [Substring] = []
        if !dir.hasPrefix("/") {
            var buf = [CChar](repeating: 0, count: 4096)
            if getcwd(&buf, buf.count) != nil {
                base = buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }.split(separator: "/").map { Substring($0) }
            }
        }
        for part in dir.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": _ = base.popLast()
            default: base.append(part)
            }
        }
        return "/" + base.joined(separator: "/")
    }

    static func mappingKeys(_ node: YAMLNode) -> [String] {
        if case .mapping(let entries, _) = node { return entries.map(\.key) }
        return []
    }

    static func kindOf(
        _ node: YAMLNode, path: String, known: [String], what: String,
        problems: inout [ConfigProblem]
    ) -> String? {
        guard case .mapping = node else {
            problems.append(ConfigProblem(location: node.location, path: path, message: "a \(what) is a mapping with a `kind`"))
            return nil
        }
        guard let k = node["kind"], case .scalar(let s) = k, !s.isNull else {
            problems.append(
                ConfigProblem(
                    location: node.location, path: path,
                    message: "missing required key \"kind\" (one of: \(known.joined(separator: ", ")))"))
            return nil
        }
        guard known.contains(s.value) else {
            problems.append(
                ConfigProblem(
                    location: s.location, path: path + ".kind",
                    message: "unknown \(what) kind \"\(s.value)\"\(suggestion(s.value, known)); known: \(known.joined(separator: ", "))"))
            return nil
        }
        return s.value
    }
}

/// ` — did you mean "x"?` when a known name is close, else empty.
func suggestion(_ given: String, _ known: [String]) -> String {
    closestMatch(to: given, in: known).map { " — did you mean \"\($0)\"?" } ?? ""
}

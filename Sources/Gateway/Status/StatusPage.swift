import FastJSON
import Fleet
import Glibc
import HealthgateCore
import HealthgateCrypto
import Pipeline
import Posix
import Synchronization

/// `GET /` (HTML) and `GET /status` (JSON): each receiver with its last request, counts and
/// refusals; each sink with its queue, lag, oldest waiting record, last error and next try; the
/// journal against its budget; and each Syncky receiver's setup link as a QR code to scan from
/// the phone. With `admin: {token}` the page answers that token alone (Bearer, or Basic with it
/// as the password, so a browser asks for it), links included. Without it, only this machine's
/// own requests: from loopback, for one of its own names (`Host`: localhost, a loopback
/// address, its host name — a DNS-rebinding page's request names another), with no proxy's
/// header; and no secret is on that page (the links only with `admin.local_links: true`, which
/// the user turns on knowingly): a proxy on this machine that adds no header looks local.
public final class StatusEndpoint: Sendable {
    let topology: Topology
    let journal: Journal
    /// The sinks' drainers as they are now (a reload may replace some).
    let currentDrainers: @Sendable () -> [SinkDrainer]
    /// The sinks out of the config whose records still wait.
    let currentRemoved: @Sendable () -> [RemovedSink]
    let clock: any Clock
    /// The port `serve` listens on, once it does (for the setup links).
    let port = Atomic<UInt16>(0)
    /// The request log, for the phones seen (nil: the page lists none).
    let requestLog: RequestLog?
    let summaries = NDJSONSummaries()
    /// The fleet as last gathered, and when (monotonic seconds): asked of the brokers and the
    /// fleet's database at most every 5 s, however often the page is read.
    private let fleetCache = Locked<(at: Double, report: FleetReport)?>(nil)

    init(
        topology: Topology, journal: Journal, drainers: @escaping @Sendable () -> [SinkDrainer],
        removed: @escaping @Sendable () -> [RemovedSink] = { [] }, clock: any Clock, port: UInt16 = 0, requestLog: RequestLog? = nil
    ) {
        self.requestLog = requestLog
        self.topology = topology
        self.journal = journal
        self.currentDrainers = drainers
        self.currentRemoved = removed
        self.clock = clock
        self.port.store(port, ordering: .relaxed)
    }

    func handle(_ request: HTTPRequest, path: String, receivers: [ReceiverMetrics]) -> HTTPResponse? {
        guard path == "/" || path == "/status" else { return nil }
        guard request.method == "GET" || request.method == "HEAD" else {
            return problem(405, "Method not allowed", "\(path) takes GET requests.", headers: [HTTPHeader("Allow", "GET")])
        }
        if let refusal = refusal(request) { return refusal }
        let now = clock.now()
        let drainers = currentDrainers()
        let withLinks = topology.admin?.token != nil || topology.admin?.localLinks == true
        let body =
            path == "/status"
            ? StatusReport.json(
                journal: journal, journalMaxBytes: topology.journal.max_bytes.map { Int($0.bytes) },
                receivers: receivers, drainers: drainers, removed: currentRemoved(), fleet: fleetReport(), now: now)
            : StatusPageHTML.render(
                topology: topology, journal: journal, receivers: receivers, drainers: drainers,
                removed: currentRemoved(), links: withLinks ? links() : [], linksHidden: !withLinks,
                setup: withLinks ? topology.receivers.compactMap { SetupHelp.of($0, topology: listening) } : [],
                extras: extras(drainers), now: now)
        return HTTPResponse(
            status: 200,
            headers: [
                HTTPHeader("Content-Type", path == "/status" ? "application/json" : "text/html; charset=utf-8"),
                HTTPHeader("Cache-Control", "no-store"),
                HTTPHeader("X-Content-Type-Options", "nosniff"),
                HTTPHeader(
                    "Content-Security-Policy",
                    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                        + "script-src \(StatusPageHTML.refreshScriptSource); connect-src 'self'; frame-ancestors 'none'"),
                HTTPHeader("X-Frame-Options", "DENY"),
                HTTPHeader("Referrer-Policy", "no-referrer")
            ],
            body: request.method == "HEAD" ? [] : body)
    }

    /// Why this request may not see the page; nil when it may.
    func refusal(_ request: HTTPRequest) -> HTTPResponse? {
        if let token = topology.admin?.token {
            if StatusEndpoint.carries(token, request) { return nil }
            return problem(
                401, "Unauthorized",
                "The status page takes the admin token (admin.token): as a Bearer token, "
                    + "or as the password of Basic auth.",
                headers: [HTTPHeader("WWW-Authenticate", "Basic realm=\"healthgate\", charset=\"UTF-8\"")])
        }
        let forwarded = StatusEndpoint.proxyHeaders.contains { request.header($0) != nil }
        guard StatusEndpoint.isLoopback(request.remoteAddress) && !forwarded else {
            return problem(
                403, "Forbidden",
                "Without an admin token the status page answers this machine only (loopback, not "
                    + "through a proxy). Set admin: {token: …} to open it elsewhere behind that token.")
        }
        guard let host = request.header("host"), StatusEndpoint.isOwnName(host, listenHost: topology.listenHost) else {
            return problem(
                403, "Forbidden",
                "Without an admin token the status page answers requests for this machine's own "
                    + "names only (localhost, a loopback address, its host name), not for another name that points here.")
        }
        return nil
    }

    /// Headers a proxy adds: a request carrying one came through one.
    static let proxyHeaders = [
        "forwarded", "x-forwarded-for", "x-real-ip", "x-client-ip", "true-client-ip", "cf-connecting-ip",
        "fastly-client-ip", "x-cluster-client-ip", "via", "x-forwarded-host", "x-forwarded-proto",
        "x-forwarded-server", "x-original-forwarded-for"
    ]

    /// Whether a `Host` names this machine: `localhost` (or a name under it), a loopback
    /// address, this machine's host name, or the address `listen` names (port left aside).
    static func isOwnName(_ hostHeader: String, listenHost: String) -> Bool {
        var host = hostHeader.lowercased()
        if host.hasPrefix("[") {
            guard let end = host.firstIndex(of: "]") else { return false }
            host = String(host[host.index(after: host.startIndex)..<end])
        } else if let colon = host.lastIndex(of: ":"), host.filter({ $0 == ":" }).count == 1 {
            host = String(host[..<colon])
        }
        if host.hasSuffix(".") { host.removeLast() }
        guard !host.isEmpty else { return false }
        if host == "localhost" || host.hasSuffix(".localhost") || Loopback.isLoopback(host: host) { return true }
        let listen = listenHost.lowercased()
        if !listen.isEmpty && listen != "0.0.0.0" && listen != "::" && host == listen { return true }
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, 255) == 0 else { return false }
        let own = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
        return !own.isEmpty && (host == own || host == own + ".local")
    }

    static func isLoopback(_ address: String) -> Bool { Loopback.isLoopback(host: address) }

    /// The token as `Bearer <token>`, or as the password of `Basic` (any user), compared in
    /// constant time.
    static func carries(_ token: [UInt8], _ request: HTTPRequest) -> Bool {
        guard let given = Authenticator.bearer(request) ?? Authenticator.basic(request)?.password else { return false }
        return Crypto.constantTimeEqual(given, token)
    }

    /// A fleet machine's view of the fleet; nil without `fleet:`.
    func fleetReport() -> FleetReport? {
        guard let fleet = topology.fleet else { return nil }
        return fleetCache.withLock { cache in
            if let c = cache, monotonicSeconds() - c.at < 5 { return c.report }
            let r = FleetReport.gather(fleet, sinks: topology.sinks.map(\.name))
            cache = (monotonicSeconds(), r)
            return r
        }
    }

    /// The phones the request log saw, and the quarantines and dead letters that hold something.
    func extras(_ drainers: [SinkDrainer]) -> StatusPageHTML.Extras {
        var e = StatusPageHTML.Extras()
        if let fleet = topology.fleet, let r = fleetReport() { e.fleet = r.lines(fleet) }
        e.devices = (try? requestLog?.devices(limit: 50)) ?? []
        for r in topology.receivers {
            let file = FileIO.join(topology.dataDir, "quarantine/\(r.name).ndjson")
            if let s = summaries.of(file) { e.setAside.append(("quarantine of \(r.name)", file, s)) }
        }
        for d in drainers {
            let file = DeadLetters.path(sink: d.name, dataDir: topology.dataDir)
            if let s = summaries.of(file) { e.setAside.append(("dead letters of \(d.name)", file, s)) }
        }
        return e
    }

    /// The topology with the port `serve` really listens on.
    var listening: Topology {
        var t = topology
        let p = port.load(ordering: .relaxed)
        if p != 0 { t.listenPort = p }
        return t
    }

    /// Each Syncky receiver's setup link, as `healthgate link` prints it.
    func links() -> [(receiver: String, link: String)] {
        let t = listening
        return topology.receivers.filter { $0.config.kind == "syncky" }.compactMap { r in
            (try? SetupLink.build(
                receiver: r.name, config: r.config, topology: t, host: nil, format: "native",
                scheme: "syncky")).map { (r.name, $0) }
        }
    }
}

/// `admin:` — who may see the status page from elsewhere than this machine, and whether this
/// machine's own page may show the setup links without it.
public struct AdminSettings: Sendable {
    public var token: [UInt8]?
    public var localLinks: Bool
}

struct AdminConfig: Decodable {
    var token: String?
    var local_links: Bool?
}

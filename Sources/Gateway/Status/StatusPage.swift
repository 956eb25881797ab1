import FastJSON
import HealthgateCore
import HealthgateCrypto
import Pipeline
import Posix
import Synchronization

/// `GET /` (HTML) and `GET /status` (JSON): each receiver with its last request, counts and
/// refusals; each sink with its queue, lag, oldest waiting record, last error and next try; the
/// journal against its budget; and each Syncky receiver's setup link as a QR code to scan from
/// the phone. The link holds the receiver's token and secret, so the page is answered on
/// loopback only — and not to a request a proxy forwarded — unless `admin: {token}` is set, and
/// then to that token alone (Bearer, or Basic with it as the password, so a browser asks for it).
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

    init(topology: Topology, journal: Journal, drainers: @escaping @Sendable () -> [SinkDrainer],
         removed: @escaping @Sendable () -> [RemovedSink] = { [] }, clock: any Clock, port: UInt16 = 0) {
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
        let body = path == "/status"
            ? StatusReport.json(journal: journal, journalMaxBytes: topology.journal.max_bytes.map { Int($0.bytes) },
                                receivers: receivers, drainers: drainers, removed: currentRemoved(), now: now)
            : StatusPageHTML.render(topology: topology, journal: journal, receivers: receivers, drainers: drainers,
                                    removed: currentRemoved(), links: links(), now: now)
        return HTTPResponse(status: 200, headers: [HTTPHeader("Content-Type", path == "/status" ? "application/json" : "text/html; charset=utf-8"),
                                                   HTTPHeader("Cache-Control", "no-store"),
                                                   HTTPHeader("X-Content-Type-Options", "nosniff"),
                                                   HTTPHeader("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:"),
                                                   HTTPHeader("Referrer-Policy", "no-referrer")],
                            body: request.method == "HEAD" ? [] : body)
    }

    /// Why this request may not see the page; nil when it may.
    func refusal(_ request: HTTPRequest) -> HTTPResponse? {
        if let admin = topology.admin {
            if StatusEndpoint.carries(admin.token, request) { return nil }
            return problem(401, "Unauthorized", "The status page takes the admin token (admin.token): as a Bearer token, "
                           + "or as the password of Basic auth.",
                           headers: [HTTPHeader("WWW-Authenticate", "Basic realm=\"healthgate\", charset=\"UTF-8\"")])
        }
        let forwarded = request.header("forwarded") != nil || request.header("x-forwarded-for") != nil
            || request.header("x-real-ip") != nil
        if StatusEndpoint.isLoopback(request.remoteAddress) && !forwarded { return nil }
        return problem(403, "Forbidden", "The status page shows the phones' setup links, so it is answered on this machine "
                       + "only (loopback, not through a proxy). Set admin: {token: …} to open it elsewhere behind that token.")
    }

    static func isLoopback(_ address: String) -> Bool { Loopback.isLoopback(host: address) }

    /// The token as `Bearer <token>`, or as the password of `Basic` (any user), compared in
    /// constant time.
    static func carries(_ token: [UInt8], _ request: HTTPRequest) -> Bool {
        guard let given = Authenticator.bearer(request) ?? Authenticator.basic(request)?.password else { return false }
        return Crypto.constantTimeEqual(given, token)
    }

    /// Each Syncky receiver's setup link, as `healthgate link` prints it.
    func links() -> [(receiver: String, link: String)] {
        var t = topology
        let p = port.load(ordering: .relaxed)
        if p != 0 { t.listenPort = p }
        return topology.receivers.filter { $0.config.kind == "syncky" }.compactMap { r in
            (try? SetupLink.build(receiver: r.name, config: r.config, topology: t, host: nil, format: "native",
                                  scheme: "syncky")).map { (r.name, $0) }
        }
    }
}

/// `admin:` — who may see the status page from elsewhere than this machine.
public struct AdminSettings: Sendable {
    public var token: [UInt8]
}

struct AdminConfig: Decodable {
    var token: String
}

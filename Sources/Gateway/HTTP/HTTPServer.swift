import CLinux
import CMicroHTTPD
import Glibc
import HealthgateCrypto
import Posix
import HealthgateCore
import Synchronization

/// What the HTTP server needs from the gateway: a plain function of the request, and the
/// body limit of a path (so a body over it is refused with 413 before it is read).
public protocol HTTPHandler: Sendable {
    func handle(_ request: HTTPRequest) -> HTTPResponse
    func maxBodyBytes(forPath path: String) -> Int
    /// The 413 for a body over the path's limit (counted: no refusal is silent).
    func bodyTooLarge(path: String, limit: Int) -> HTTPResponse
    /// The 503 for a body that would pass the bytes buffered across all connections.
    func tooMuchInFlight(path: String, limit: Int) -> HTTPResponse
    /// An answer decided from the request line and headers alone (wrong path or method, no
    /// token), sent before the body is read; nil to read the body and call `handle`.
    func preflight(_ headersOnly: HTTPRequest) -> HTTPResponse?
}

/// A handler that can be replaced while the server runs (`serve` on SIGHUP): each call goes to
/// the one in place when it is made.
public final class SwitchableHandler: HTTPHandler {
    private let current: Locked<any HTTPHandler>

    public init(_ handler: any HTTPHandler) { current = Locked(handler) }

    public var handler: any HTTPHandler { current.withLock { $0 } }
    public func replace(with handler: any HTTPHandler) { current.withLock { $0 = handler } }

    public func handle(_ request: HTTPRequest) -> HTTPResponse { handler.handle(request) }
    public func maxBodyBytes(forPath path: String) -> Int { handler.maxBodyBytes(forPath: path) }
    public func bodyTooLarge(path: String, limit: Int) -> HTTPResponse { handler.bodyTooLarge(path: path, limit: limit) }
    public func tooMuchInFlight(path: String, limit: Int) -> HTTPResponse { handler.tooMuchInFlight(path: path, limit: limit) }
    public func preflight(_ headersOnly: HTTPRequest) -> HTTPResponse? { handler.preflight(headersOnly) }
}

public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// HTTP/1.1 (and HTTPS) on libmicrohttpd: an internal thread pool on epoll, keep-alive,
/// 100-continue, chunked uploads, header and idle-connection limits. Its threads read the
/// requests and write the answers; a whole request is handed to `RequestWorkers` (as many
/// threads, first come first served across connections), where handlers may block (the
/// journal's fsync does).
public final class HTTPServer: @unchecked Sendable {
    public struct Options: Sendable {
        public var host: String
        public var port: UInt16
        public var threads: Int
        /// Idle or slow connections are closed after this many seconds.
        public var connectionTimeoutSeconds: Int
        public var connectionLimit: Int
        public var tlsKeyPEM: String?
        public var tlsCertPEM: String?
        /// With TLS: the CAs a client certificate must chain to; the handshake fails without one.
        public var tlsClientCAPEM: String?
        /// With TLS: GnuTLS's priority string (versions and suites taken).
        public var tlsPriorities: String?
        /// Where libmicrohttpd's own messages go (rate-limited); nil leaves them out.
        public var logger: Logger?
        /// Request bodies held at once across all connections; past it new bodies get 503.
        public var maxBufferedBytes: Int = HTTPServer.defaultMaxBuffered
        /// Header deadline, body rate and making room at the connection limit.
        public var connectionGuard: ConnectionGuard?

        public init(
            host: String, port: UInt16, threads: Int = 8, connectionTimeoutSeconds: Int = 30,
            connectionLimit: Int = 1024, tlsKeyPEM: String? = nil, tlsCertPEM: String? = nil,
            logger: Logger? = nil, maxBufferedBytes: Int = HTTPServer.defaultMaxBuffered,
            connectionGuard: ConnectionGuard? = nil, tlsClientCAPEM: String? = nil, tlsPriorities: String? = nil
        ) {
            self.connectionGuard = connectionGuard
            self.tlsClientCAPEM = tlsClientCAPEM
            self.tlsPriorities = tlsPriorities
            self.logger = logger
            self.maxBufferedBytes = maxBufferedBytes
            self.host = host
            self.port = port
            self.threads = threads
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.connectionLimit = connectionLimit
            self.tlsKeyPEM = tlsKeyPEM
            self.tlsCertPEM = tlsCertPEM
        }
    }

    let handler: any HTTPHandler
    let options: Options
    /// Slow and idle clients; nil leaves it all to libmicrohttpd.
    public let connections: ConnectionGuard?
    public static let defaultMaxBuffered = 256 << 20
    /// Bytes of request bodies held right now, across all connections.
    let buffered = Atomic<Int>(0)
    /// Requests begun (their headers in) and not yet completed.
    let inFlight = Atomic<Int>(0)

    /// Takes `n` bytes of the buffer budget for `state`; false (and nothing taken) when they
    /// would pass it.
    func reserve(_ n: Int, for state: RequestState) -> Bool {
        let after = buffered.add(n, ordering: .relaxed).newValue
        if after > options.maxBufferedBytes && n > 0 {
            buffered.subtract(n, ordering: .relaxed)
            return false
        }
        state.reserved += n
        return true
    }

    func release(_ state: RequestState) {
        if state.reserved > 0 { buffered.subtract(state.reserved, ordering: .relaxed) }
        state.reserved = 0
    }
    /// How far past its limit a chunked body is read (and discarded) to answer 413 at its end.
    static let discardAllowance = 1 << 20
    let isTLS: Bool
    private var daemon: OpaquePointer?
    /// Where whole requests are answered (nil before `start`).
    private(set) var workers: RequestWorkers?
    private var keyCopy: UnsafeMutablePointer<CChar>?
    private var certCopy: UnsafeMutablePointer<CChar>?
    private var trustCopy: UnsafeMutablePointer<CChar>?
    private var prioritiesCopy: UnsafeMutablePointer<CChar>?
    /// Every connection must show a client certificate (`tlsClientCAPEM`).
    let requiresClientCert: Bool

    public init(options: Options, handler: any HTTPHandler) {
        self.options = options
        self.handler = handler
        self.isTLS = options.tlsKeyPEM != nil && options.tlsCertPEM != nil
        self.requiresClientCert = isTLS && options.tlsClientCAPEM != nil
        self.connections = options.connectionGuard
    }

    deinit {
        stop()
    }

    /// Starts listening; returns the bound port (useful with port 0). With `listenFD`, on the
    /// socket another server handed over (`handOver`), instead of binding one.
    @discardableResult
    public func start(listenFD: Int32 = -1) throws(HTTPServerError) -> UInt16 {
        // MHD keeps pointers to the key and certificate for the daemon's lifetime.
        if let k = options.tlsKeyPEM, let c = options.tlsCertPEM {
            keyCopy = strdup(k)
            certCopy = strdup(c)
            trustCopy = options.tlsClientCAPEM.map { strdup($0) }
            prioritiesCopy = options.tlsPriorities.map { strdup($0) }
        }
        let cls = Unmanaged.passUnretained(self).toOpaque()
        if let l = options.logger { MHDLog.shared.use(l) }
        errno = 0
        // With the guard, libmicrohttpd's own limit is set well above it (it splits its limit
        // over the pool's threads, and refuses once a thread's share is full): the guard makes
        // room at `maxConnections` by closing the idle ones first.
        let limit = connections.map { max($0.limits.maxConnections * 2, $0.limits.maxConnections + 256) } ?? options.connectionLimit
        Self.raiseOpenFileLimit(to: limit + 256)
        workers = RequestWorkers(count: options.threads)
        let d = hg_mhd_start(
            options.host, options.port, MHDCallbacks.access, cls, MHDCallbacks.completed, cls,
            UInt32(max(1, options.threads)), UInt32(limit),
            UInt32(options.connectionTimeoutSeconds), 128 * 1024,
            keyCopy.map { UnsafePointer($0) }, certCopy.map { UnsafePointer($0) },
            trustCopy.map { UnsafePointer($0) }, prioritiesCopy.map { UnsafePointer($0) },
            options.logger == nil ? nil : MHDLog.sink,
            MHDCallbacks.notify, cls, listenFD)
        guard let d else {
            let why = errno != 0 ? String(cString: strerror(errno)) : "invalid address or TLS key/certificate"
            stopWorkers()
            throw HTTPServerError(description: "cannot listen on \(options.host):\(options.port): \(why)")
        }
        daemon = d
        connections?.start()
        return hg_mhd_port(d)
    }

    /// Each connection is a file descriptor: the soft limit (often 1024) is raised toward the
    /// hard one, so the connection limit, not the descriptor limit, is what clients meet.
    static func raiseOpenFileLimit(to wanted: Int) { hg_raise_open_files(UInt(wanted)) }

    /// Stops accepting and closes every connection (in-flight handlers finish first).
    public func stop() {
        stop(finishingWithin: 0)
    }

    /// Stops accepting and gives the listening socket away (to a server that starts on it);
    /// the connections open go on until `finish`. -1 when there is none to give.
    public func handOver() -> Int32 {
        guard let d = daemon else { return -1 }
        return MHD_quiesce_daemon(d)
    }

    /// After `handOver`: lets the requests in flight finish (up to `seconds`), then closes this
    /// server's connections; the socket it gave away stays open.
    /// The requests still in flight then (cut off).
    @discardableResult
    public func finish(within seconds: Double) -> Int {
        guard let d = daemon else { return 0 }
        let until = monotonicSeconds() + seconds
        while inFlight.load(ordering: .acquiring) > 0 && monotonicSeconds() < until { usleep(10_000) }
        let left = inFlight.load(ordering: .acquiring)
        connections?.stop()
        stopWorkers()
        MHD_stop_daemon(d)
        daemon = nil
        return left
    }

    /// Answers the requests handed to the workers (each resumes its connection) and ends them:
    /// libmicrohttpd must have no connection suspended when it stops.
    private func stopWorkers() {
        workers?.stop()
        workers = nil
    }

    /// Stops accepting connections at once, gives the requests in flight up to `seconds` to be
    /// read and answered, then closes every connection. The requests still in flight then.
    @discardableResult
    public func stop(finishingWithin seconds: Double) -> Int {
        var left = 0
        if daemon != nil, seconds > 0 {
            let listening = handOver()
            // The socket stays open for libmicrohttpd's threads until it stops, but listens no
            // more: a new connection is refused at once instead of waiting in the backlog.
            if listening >= 0 { Glibc.shutdown(listening, Int32(SHUT_RDWR)) }
            left = finish(within: seconds)
            if listening >= 0 { Glibc.close(listening) }
        }
        connections?.stop()
        if let d = daemon {
            stopWorkers()
            MHD_stop_daemon(d)
            daemon = nil
        }
        free(keyCopy)
        free(certCopy)
        free(trustCopy)
        free(prioritiesCopy)
        keyCopy = nil
        certCopy = nil
        trustCopy = nil
        prioritiesCopy = nil
        return left
    }
}

/// Per-request state between MHD's calls for one request.
final class RequestState {
    let method: String
    let path: String
    let limit: Int
    var body: [UInt8] = []
    /// The client certificate the handshake verified (with `tls.client_ca`).
    var clientCertificate: ClientCertificate?
    /// The answer's hold, let go with this state once the answer is sent (`completed`).
    var hold: ResponseHold?
    var tooLarge = false
    var discarded = 0
    var answered = false
    /// Bytes of the server's buffer budget this request holds.
    var reserved = 0
    /// The body would have passed the budget: it is read and thrown away, then answered 503.
    var overBudget = false
    /// The answer a worker made while the connection was suspended, queued when it resumes.
    var response: HTTPResponse?

    init(method: String, path: String, limit: Int) {
        self.method = method
        self.path = path
        self.limit = limit
    }
}

/// Collects header or query values through MHD's iterator callback.
final class ValueCollector {
    var values: [(name: String, value: String)] = []
    /// Where each header's name starts and its value ends, in libmicrohttpd's read buffer.
    var spans: [(key: UnsafeRawPointer, valueEnd: UnsafeRawPointer?)] = []
}

extension HTTPServer {
    /// Headers that say one thing once: two of them (which one wins?) are refused, as is a
    /// request that frames its body twice.
    static let singleHeaders: Set<String> = [
        "authorization", "x-syncky-signature", "x-syncky-timestamp", "x-syncky-format", "x-syncky-delivery",
        "x-syncky-kind", "x-device-id", "content-type", "content-encoding", "transfer-encoding", "host"
    ]

    static func refusal(headers: [(name: String, value: String)], hasNUL: Bool, version: String = "HTTP/1.1") -> HTTPResponse? {
        if hasNUL {
            return problem(400, "Malformed header", "A header holds a NUL byte, or is folded over several lines; no client sends either.")
        }
        // A CR is a line's end only before LF (RFC 9112 §2.2): one alone in a value is refused.
        if headers.contains(where: { $0.value.utf8.contains(0x0D) || $0.name.utf8.contains(0x0D) }) {
            return problem(400, "Malformed header", "A header holds a carriage return that ends no line; no client sends one.")
        }
        // HTTP/1.1 requests name their host (RFC 9112 §3.2).
        if version == "HTTP/1.1" && !headers.contains(where: { $0.name == "host" }) {
            return problem(400, "Missing Host header", "An HTTP/1.1 request must carry a Host header.")
        }
        // Only chunked is a transfer coding this server decodes (RFC 9112 §6.1: 501 for others).
        if let te = headers.first(where: { $0.name == "transfer-encoding" })?.value,
            te.lowercased().split(separator: ",").map({ String($0).trimmingSpaces }) != ["chunked"]
        {
            return problem(
                501, "Transfer coding not implemented",
                "Transfer-Encoding \"\(te.prefix(40))\" is not one this server decodes: send the body with Content-Length, "
                    + "or chunked.")
        }
        // `Transfer-Encoding : chunked` is stored under "transfer-encoding " and framed by
        // nobody here, while a proxy in front may honour it: a name with white space is refused.
        if headers.contains(where: { $0.name.utf8.contains { $0 == 0x20 || $0 == 0x09 } }) {
            return problem(400, "Malformed header", "A header name holds white space (before the colon, say); send `Name: value`.")
        }
        var seen: Set<String> = []
        var lengths: Set<String> = []
        var chunked = false
        for h in headers {
            if h.name == "content-length" { lengths.insert(h.value.trimmingSpaces); continue }
            if h.name == "transfer-encoding" { chunked = true }
            if singleHeaders.contains(h.name) && !seen.insert(h.name).inserted {
                return problem(400, "Repeated header", "The request has more than one \(h.name) header; send it once.")
            }
        }
        if lengths.count > 1 {
            return problem(400, "Conflicting Content-Length headers", "The request has several different Content-Length headers.")
        }
        if chunked && !lengths.isEmpty {
            return problem(
                400, "Conflicting body framing",
                "The request has both Transfer-Encoding and Content-Length; send one of them.")
        }
        return nil
    }
}

/// The C callbacks live here, outside main.swift, so they are not main-actor isolated.
enum MHDCallbacks {
    static let access: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadSize, conCls in
        guard let cls, let connection, let conCls, let uploadSize else { return .NO }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()

        guard let stateRaw = conCls.pointee else {
            // Intake runs a little below the sink drainers, so delivery keeps pace with it
            // when the CPU is short instead of falling ever further behind.
            hg_nice_this_thread_once(2)
            // First call: the headers are in, the body is not.
            let path = url.map { String(cString: $0) } ?? "/"
            let m = method.map { String(cString: $0) } ?? "GET"
            let state = RequestState(method: m, path: path, limit: server.handler.maxBodyBytes(forPath: path))
            conCls.pointee = Unmanaged.passRetained(state).toOpaque()
            server.inFlight.add(1, ordering: .relaxed)
            if let g = server.connections, let t = tracked(connection) { g.headComplete(t) }
            // The request line starts where `method` points; the header block ends `header_size` later.
            let blockSize = hg_mhd_header_size(connection)
            let blockEnd = method.flatMap { blockSize > 0 ? UnsafeRawPointer($0) + blockSize : nil }
            let (headers, hasNUL) = headerValues(connection, blockEnd: blockEnd)
            let lengths = headers.filter { $0.name == "content-length" }
            if let refusal = HTTPServer.refusal(
                headers: headers, hasNUL: hasNUL, version: version.map { String(cString: $0) } ?? "HTTP/1.1")
            {
                state.answered = true
                return queue(connection, refusal)
            }
            if server.requiresClientCert { state.clientCertificate = clientCertificate(connection) }
            var headersOnly = HTTPRequest(method: m, path: path, query: queryString(connection), headers: headers, isTLS: server.isTLS)
            headersOnly.clientCertificate = state.clientCertificate
            if let early = server.handler.preflight(headersOnly) {
                state.answered = true
                return queue(connection, early)
            }
            if let cl = lengths.first.flatMap({ Int($0.value.trimmingSpaces) }) {
                if cl > state.limit {
                    state.answered = true
                    return queue(connection, server.handler.bodyTooLarge(path: path, limit: state.limit))
                }
                // The body's exact size is known: one allocation, no regrowth (its pages count
                // against http.max_buffered, and the memory, only as the bytes arrive), with the
                // room a JSON body is parsed in place with (`HTTPRequest.bodySlack`).
                state.body.reserveCapacity(cl + HTTPRequest.bodySlack)
            }
            return .YES
        }
        let state = Unmanaged<RequestState>.fromOpaque(stateRaw).takeUnretainedValue()
        if let response = state.response {
            // Resumed: the worker answered.
            state.response = nil
            state.hold = response.hold
            if let g = server.connections, let t = tracked(connection) { g.sending(t) }
            return queue(connection, response)
        }
        if state.answered {
            uploadSize.pointee = 0
            return .YES
        }
        if uploadSize.pointee > 0 {
            let n = uploadSize.pointee
            if let g = server.connections, let t = tracked(connection) { g.bodyBytes(t, n) }
            if state.tooLarge {
                // libmicrohttpd 0.9.75 sends no response before the body ends, so the rest is
                // read and thrown away for the 413; a client that keeps sending far past the
                // limit gets the 413 written straight to its socket (plain HTTP) and is cut off.
                state.discarded += n
                if state.discarded > state.limit + HTTPServer.discardAllowance {
                    let answer = server.handler.bodyTooLarge(path: state.path, limit: state.limit)
                    if !server.isTLS { writeAndClose(connection, answer) }
                    return .NO
                }
            } else if state.overBudget {
                state.discarded += n
                if state.discarded > state.limit + HTTPServer.discardAllowance { return .NO }
            } else if state.body.count + n > state.limit {
                state.tooLarge = true
                state.discarded = state.body.count + n
                state.body = []
                server.release(state)
            } else {
                // The budget is taken as the bytes arrive: a slow sender holds only what it sent.
                if state.body.count + n > state.reserved, !server.reserve(state.body.count + n - state.reserved, for: state) {
                    state.overBudget = true
                    state.discarded = state.body.count + n
                    state.body = []
                    server.release(state)
                    uploadSize.pointee = 0
                    return .YES
                }
                if let uploadData {
                    if state.body.capacity == 0 { state.body.reserveCapacity(min(state.limit, max(n, 65_536))) }
                    // (Chunked bodies of unknown size grow by doubling, up to the limit.)
                    state.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: n))
                }
            }
            uploadSize.pointee = 0
            return .YES
        }
        // The whole body is in.
        state.answered = true
        if let g = server.connections, let t = tracked(connection) { g.handling(t) }
        if state.tooLarge { return queue(connection, server.handler.bodyTooLarge(path: state.path, limit: state.limit)) }
        if state.overBudget {
            return queue(connection, server.handler.tooMuchInFlight(path: state.path, limit: server.options.maxBufferedBytes))
        }
        let query = queryString(connection)
        var remote = [CChar](repeating: 0, count: 64)
        let remoteAddress =
            hg_mhd_client_address(connection, &remote, remote.count) != 0
            ? remote.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : ""
        var request = HTTPRequest(
            method: state.method, path: state.path, query: query,
            headers: values(connection, .HEADER_KIND), body: state.body,
            isTLS: server.isTLS, remoteAddress: remoteAddress)
        request.clientCertificate = state.clientCertificate
        let job = Answer(server: server, state: state, connection: connection, request: request)
        state.body = []
        guard let workers = server.workers, workers.isRunning, hg_thread_connections(0) > 1 else {
            // Answered here when this thread has no other connection to hold up (a phone alone:
            // the hop to a worker and back would only slow it), or when no worker could be started.
            let response = job.answer()
            state.hold = response.hold
            if let g = server.connections, let t = tracked(connection) { g.sending(t) }
            return queue(connection, response)
        }
        // Suspended before it is queued: the worker may resume it at once.
        MHD_suspend_connection(connection)
        if !workers.submit({ job.run() }) { job.run() }
        return .YES
    }

    /// A whole request, answered on a worker while its connection is suspended.
    final class Answer: @unchecked Sendable {
        let server: HTTPServer
        let state: RequestState
        let connection: OpaquePointer
        var request: HTTPRequest?

        init(server: HTTPServer, state: RequestState, connection: OpaquePointer, request: HTTPRequest) {
            self.server = server
            self.state = state
            self.connection = connection
            self.request = request
        }

        /// The handler's answer. The body and what was made of it are freed by its end: its
        /// share of the budget too (before the answer goes out, so a client that sends again at
        /// once finds it free), and an outsized request's memory goes back to the system.
        func answer() -> HTTPResponse {
            let request = self.request!
            self.request = nil
            let bodyBytes = request.body.count
            let response = server.handler.handle(consume request)
            server.release(state)
            if bodyBytes > 2 << 20 { MemoryRelief.giveBack() }
            return response
        }

        /// Answers, and resumes the connection for libmicrohttpd to send it.
        func run() {
            state.response = answer()
            MHD_resume_connection(connection)
        }
    }

    static let completed: MHD_RequestCompletedCallback = { cls, connection, conCls, _ in
        if let cls, let connection, let g = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().connections,
            let t = tracked(connection)
        {
            g.responded(t)
        }
        guard let conCls, let raw = conCls.pointee else { return }
        if let cls {
            let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
            let state = Unmanaged<RequestState>.fromOpaque(raw).takeUnretainedValue()
            server.release(state)
            state.hold = nil // the answer is out (or its connection gone): its budget share is free
            server.inFlight.subtract(1, ordering: .releasing)
        }
        Unmanaged<RequestState>.fromOpaque(raw).release()
        conCls.pointee = nil
    }

    /// Connections opening and closing: how many each thread holds, and the guard's.
    static let notify: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
        _ = hg_thread_connections(code == .CONNECTION_NOTIFY_STARTED ? 1 : -1)
        guard let cls, let connection, let socketContext else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        // Before the handshake: it fails unless the client shows a certificate the CAs vouch for.
        // A connection without a TLS session to ask on cannot be let through either.
        if code == .CONNECTION_NOTIFY_STARTED && server.requiresClientCert && hg_tls_require_client_cert(connection) != 0 {
            shutdown(hg_mhd_connection_fd(connection), Int32(SHUT_RDWR))
        }
        guard let g = server.connections else { return }
        if code == .CONNECTION_NOTIFY_STARTED {
            let t = g.started(fd: hg_mhd_connection_fd(connection))
            socketContext.pointee = Unmanaged.passRetained(t).toOpaque()
        } else if let raw = socketContext.pointee {
            let t = Unmanaged<ConnectionGuard.Tracked>.fromOpaque(raw)
            g.ended(t.takeUnretainedValue())
            t.release()
            socketContext.pointee = nil
        }
    }

    /// The client certificate the handshake verified (checked again), on the connection's thread.
    static func clientCertificate(_ connection: OpaquePointer) -> ClientCertificate? {
        var dn = [CChar](repeating: 0, count: 1024)
        var sha = [UInt8](repeating: 0, count: 32)
        guard hg_tls_peer(connection, &dn, dn.count, &sha) == 0 else { return nil }
        let subject = dn.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return ClientCertificate(subject: subject, sha256: Crypto.lowercaseHex(sha))
    }

    static func tracked(_ connection: OpaquePointer) -> ConnectionGuard.Tracked? {
        hg_mhd_socket_context(connection).map { Unmanaged<ConnectionGuard.Tracked>.fromOpaque($0).takeUnretainedValue() }
    }

    static let collect: MHD_KeyValueIterator = { cls, _, key, value in
        guard let cls, let key else { return .YES }
        let box = Unmanaged<ValueCollector>.fromOpaque(cls).takeUnretainedValue()
        box.values.append((String(cString: key).lowercased(), value.map { String(cString: $0) } ?? ""))
        return .YES
    }

    static let collectN: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
        guard let cls, let key else { return .YES }
        let box = Unmanaged<ValueCollector>.fromOpaque(cls).takeUnretainedValue()
        box.values.append((String(cString: key).lowercased(), value.map { String(cString: $0) } ?? ""))
        box.spans.append((UnsafeRawPointer(key), value.map { UnsafeRawPointer($0) + valueSize }))
        return .YES
    }

    /// The request's headers, and whether any value hid bytes behind a NUL.
    ///
    /// libmicrohttpd 0.9.75 keeps header values as C strings in its read buffer, with every CR
    /// and LF overwritten by NUL, so `Bearer <token>\0junk` reads as `Bearer <token>`. What
    /// lies between a value's end and the next header's name must be those NULs and nothing
    /// else; after the last value, the NULs of its line end and of the blank line.
    static func headerValues(_ connection: OpaquePointer, blockEnd: UnsafeRawPointer? = nil) -> ([(name: String, value: String)], Bool) {
        let box = ValueCollector()
        withExtendedLifetime(box) {
            _ = MHD_get_connection_values_n(connection, .HEADER_KIND, collectN, Unmanaged.passUnretained(box).toOpaque())
        }
        var hidden = false
        var lineEnd = 1
        for (i, span) in box.spans.enumerated() {
            guard let end = span.valueEnd else { continue }
            if i + 1 < box.spans.count {
                let next = box.spans[i + 1].key
                guard next > end, next - end <= 4096 else { continue } // not laid out in order: nothing to tell
                let gap = next - end
                if (0..<gap).contains(where: { end.load(fromByteOffset: $0, as: UInt8.self) != 0 }) { hidden = true }
                lineEnd = max(lineEnd, min(gap, 2))
            } else if let blockEnd, blockEnd > end, blockEnd - end <= 1 << 20 {
                // Up to the end of the header block: the last line's terminator and the blank line.
                if (0..<(blockEnd - end)).contains(where: { end.load(fromByteOffset: $0, as: UInt8.self) != 0 }) { hidden = true }
            } else {
                // Without the block's end: at least the 2 NULs (LF) or 4 (CRLF) that must follow.
                if (0..<(2 * lineEnd)).contains(where: { end.load(fromByteOffset: $0, as: UInt8.self) != 0 }) { hidden = true }
            }
        }
        return (box.values, hidden)
    }

    /// Writes a whole response to a plain-HTTP connection's socket, for the moment libmicrohttpd
    /// cannot answer (mid-body) before the connection is closed.
    static func writeAndClose(_ connection: OpaquePointer, _ response: HTTPResponse) {
        let fd = hg_mhd_connection_fd(connection)
        guard fd >= 0 else { return }
        var head = "HTTP/1.1 \(response.status) \(response.status == 413 ? "Content Too Large" : "Error")\r\n"
        for h in response.headers { head += "\(h.name): \(h.value)\r\n" }
        head += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + response.body
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        // FIN after the answer, and what already arrived read away, so that closing does not
        // reset the connection before the client has read its 413.
        _ = shutdown(fd, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 65_536)
        for _ in 0..<64 where sink.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }

    static func values(_ connection: OpaquePointer, _ kind: MHD_ValueKind) -> [(name: String, value: String)] {
        let box = ValueCollector()
        withExtendedLifetime(box) {
            _ = MHD_get_connection_values(connection, kind, collect, Unmanaged.passUnretained(box).toOpaque())
        }
        return box.values
    }

    static let collectArgument: MHD_KeyValueIteratorN = { cls, _, key, keySize, value, valueSize in
        guard let cls, let key else { return .YES }
        let box = Unmanaged<ValueCollector>.fromOpaque(cls).takeUnretainedValue()
        // By their sizes, not as C strings: a %00 in a value must not cut what follows it off.
        let name = String(decoding: UnsafeRawBufferPointer(start: key, count: keySize), as: UTF8.self).lowercased()
        let v = value.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: valueSize), as: UTF8.self) } ?? ""
        box.values.append((name, v))
        return .YES
    }

    /// The query string, rebuilt from the arguments libmicrohttpd parsed (every byte of them).
    static func queryString(_ connection: OpaquePointer) -> String {
        let box = ValueCollector()
        withExtendedLifetime(box) {
            _ = MHD_get_connection_values_n(connection, .GET_ARGUMENT_KIND, collectArgument, Unmanaged.passUnretained(box).toOpaque())
        }
        return box.values
            .map { PercentEncoding.encode($0.name) + "=" + PercentEncoding.encode($0.value) }
            .joined(separator: "&")
    }

    static func queue(_ connection: OpaquePointer, _ response: HTTPResponse) -> MHD_Result {
        var body = response.body
        let r = body.withUnsafeMutableBytes { p in
            MHD_create_response_from_buffer(p.count, p.baseAddress, .RESPMEM_MUST_COPY)
        }
        guard let r else { return .NO }
        for h in response.headers {
            _ = MHD_add_response_header(r, h.name, h.value)
        }
        let result = MHD_queue_response(connection, UInt32(response.status), r)
        MHD_destroy_response(r)
        return result
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}

/// libmicrohttpd's own messages (a TLS handshake gone wrong, a connection limit reached), in
/// our log and our format. A client can cause many, so at most 20 lines a minute are said and
/// the rest counted in one line.
final class MHDLog: @unchecked Sendable {
    static let shared = MHDLog()
    static let sink: hg_mhd_log_sink = { message in
        guard let message else { return }
        MHDLog.shared.say(String(cString: message))
    }

    private let monitor = Monitor()
    private var logger: Logger?
    private var windowStart: Int64 = 0
    private var said = 0
    private var suppressed = 0
    static let perMinute = 20

    func use(_ l: Logger) { monitor.withLock { logger = l } }

    func say(_ text: String) {
        var message = Substring(text)
        while message.last == "\n" || message.last == " " { message.removeLast() }
        let now = SystemClock().now().seconds
        let (logger, line): (Logger?, String?) = monitor.withLock {
            var prefix = ""
            if now - windowStart >= 60 {
                if suppressed > 0 { prefix = "(\(suppressed) more libmicrohttpd message(s) in the last minute were not logged) " }
                windowStart = now
                said = 0
                suppressed = 0
            }
            guard said < MHDLog.perMinute else { suppressed += 1; return (nil, nil) }
            said += 1
            return (self.logger, prefix + message)
        }
        if let logger, let line { logger.warning(line) }
    }
}

import Glibc
import HealthgateCore
import Pipeline
import Posix
import SinkKit
import Sinks

/// The running gateway: journal, sink drainers and HTTP listener, started in that order and
/// stopped in reverse (stop accepting, finish what is in flight, let each sink finish its
/// write, close the journal).
public final class GatewayService: @unchecked Sendable {
    public let topology: Topology
    public let journal: Journal
    public let drainers: [SinkDrainer]
    public let handler: IngestHandler
    let statusEndpoint: StatusEndpoint
    var journalMaxBytes: Int? { topology.journal.max_bytes.map { Int($0.bytes) } }
    var shutdownTimeout: Double { topology.shutdownTimeout }
    let server: HTTPServer
    /// `replay` beside this serve (nil when the socket could not be made; said in the log).
    let control: ControlServer?
    let logger: Logger
    let clock: any WaitClock
    /// Held for the service's life: one `serve` per data dir.
    private let lockFD: Int32
    private let statusMonitor = Monitor()
    private var statusThread: pthread_t?
    private var stopping = false

    public init(topology: Topology, logger: Logger, clock: any WaitClock = SystemClock(),
                signatureClock: any Clock = SystemClock()) throws {
        self.topology = topology
        self.logger = logger
        self.clock = clock
        try FileIO.makeDirectories(topology.dataDir, mode: 0o700)
        try GatewayService.keepPrivate(topology.dataDir, logger: logger)
        lockFD = try GatewayService.lock(dataDir: topology.dataDir)
        journal = try Journal(directory: FileIO.join(topology.dataDir, "journal"),
                              segmentBytes: Int(topology.journal.segment_bytes?.bytes ?? 64 << 20),
                              logger: logger.child("journal"))
        if journal.truncatedBytes > 0 || journal.recoveredEntries > 0 {
            logger.info("journal: \(journal.recoveredEntries) entries in the newest segment, up to #\(journal.lastDurableSeq)")
        }
        // Every sink's metrics first: each drainer's commit looks at all cursors to let the
        // journal drop the segments every sink has passed.
        let metrics = topology.sinks.map { SinkMetrics(name: $0.name) }
        let journal = self.journal
        let retention = topology.journal.retention?.seconds ?? 0
        let onCommit: @Sendable () -> Void = { [clock] in
            let lowest = metrics.map { $0.cursorSeq.load(ordering: .relaxed) }.min() ?? 0
            let keepAfter = clock.now().seconds - Int64(retention)
            if lowest > 1 { journal.deleteSegments(below: lowest, lastEntryBefore: retention > 0 ? keepAfter : nil) }
        }
        var drainers: [SinkDrainer] = []
        for (s, m) in zip(topology.sinks, metrics) {
            let routes = topology.routes.filter { $0.to.contains(s.name) }
            let inbox = try Journal(directory: FileIO.join(SinkDrainer.stateDirectory(sink: s.name, dataDir: topology.dataDir), "inbox"),
                                    segmentBytes: 16 << 20, logger: logger.child("inbox \(s.name)"))
            drainers.append(SinkDrainer(name: s.name, built: s.built, routes: routes, journal: journal, inbox: inbox,
                                        dataDir: topology.dataDir, logger: logger.child("queue"), clock: clock, metrics: m,
                                        onCommit: onCommit))
        }
        self.drainers = drainers
        do {
            control = try ControlServer(dataDir: topology.dataDir, journal: journal, drainers: drainers, clock: clock,
                                        logger: logger.child("control"))
        } catch {
            control = nil
            logger.warning("no control socket (\(error)): `healthgate replay` cannot run beside this serve")
        }
        let quarantine = Quarantine(directory: FileIO.join(topology.dataDir, "quarantine"),
                                    maxBytes: topology.quarantine.max_bytes.map { Int($0.bytes) } ?? Quarantine.defaultMaxBytes,
                                    clock: clock)
        // Intake stops (503) for a receiver whose data would go to a blocking sink that is over
        // its queue limit, and for everyone once the journal's budget is spent.
        var limits: [String: [IngestHandler.QueueLimit]] = [:]
        for (d, s) in zip(drainers, topology.sinks) {
            guard let max = s.built.common.queue.max_bytes?.bytes,
                  (s.built.common.queue.when_full ?? .block) == .block else { continue }
            for r in topology.receivers where topology.routes.contains(where: { $0.to.contains(s.name) && $0.takes(receiver: r.name) }) {
                limits[r.name, default: []].append(IngestHandler.QueueLimit(sink: d.metrics, maxBytes: Int(max)))
            }
        }
        var guardLimits = ConnectionGuard.Limits()
        if let n = topology.http.max_connections { guardLimits.maxConnections = n }
        if let t = topology.http.header_timeout { guardLimits.headerTimeout = t.seconds }
        if let r = topology.http.min_body_rate { guardLimits.minBodyRate = Int(r.bytes) }
        let connectionGuard = ConnectionGuard(limits: guardLimits, logger: logger.child("http"))
        statusEndpoint = StatusEndpoint(topology: topology, journal: journal, drainers: drainers, clock: clock)
        var requestLog: RequestLog?
        do {
            requestLog = try RequestLog(path: FileIO.join(topology.dataDir, "requests.db"), logger: logger.child("requests"))
        } catch {
            logger.error("the request log cannot be opened (\(error)); requests are not noted (the read API's batches stay empty)")
        }
        handler = IngestHandler(receivers: topology.receivers.map(\.receiver), journal: journal, quarantine: quarantine,
                                clock: clock, signatureClock: signatureClock, logger: logger.child("ingest"),
                                sinkMetrics: { metrics }, journalMaxBytes: topology.journal.max_bytes.map { Int($0.bytes) },
                                queueLimits: limits, connections: connectionGuard,
                                readAPI: topology.readAPI.map { ReadAPI(settings: $0, requests: requestLog, logger: logger.child("read_api")) },
                                requestLog: requestLog, status: statusEndpoint)
        var keyPEM: String?
        var certPEM: String?
        if let tls = topology.tls {
            keyPEM = String(decoding: try FileIO.readAll(tls.key), as: UTF8.self)
            certPEM = String(decoding: try FileIO.readAll(tls.cert), as: UTF8.self)
        }
        server = HTTPServer(options: .init(host: topology.listenHost, port: topology.listenPort,
                                           threads: topology.http.threads ?? 8,
                                           connectionTimeoutSeconds: Int(topology.http.connection_timeout?.seconds ?? 30),
                                           connectionLimit: topology.http.max_connections ?? 1024,
                                           tlsKeyPEM: keyPEM, tlsCertPEM: certPEM, logger: logger.child("http"),
                                           maxBufferedBytes: topology.http.max_buffered.map { Int($0.bytes) }
                                               ?? HTTPServer.defaultMaxBuffered,
                                           connectionGuard: connectionGuard),
                            handler: handler)
    }

    deinit {
        close(lockFD)
    }

    /// The data dir holds health records and secrets: an existing one that others may read or
    /// enter is set to 0700 (said in the log), and one that cannot be is refused.
    static func keepPrivate(_ dir: String, logger: Logger) throws {
        var st = stat()
        guard stat(dir, &st) == 0 else { throw IOError("stat", dir) }
        let mode = st.st_mode & 0o777
        guard mode & 0o077 != 0 else { return }
        guard chmod(dir, 0o700) == 0 else {
            throw ServiceError("data_dir \(dir) has mode \(String(mode, radix: 8)) (others may read it) and cannot be made "
                               + "0700 by this user; run `chmod 700 \(dir)` as its owner")
        }
        logger.warning("data_dir \(dir) had mode \(String(mode, radix: 8)); set to 700 so that only this user reads health data")
    }

    static func lockPath(dataDir: String) -> String { FileIO.join(dataDir, "lock") }

    /// Takes the data dir's lock, or says which process holds it.
    static func lock(dataDir: String) throws -> Int32 {
        let path = lockPath(dataDir: dataDir)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 { throw IOError("open", path) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = (try? FileIO.readAll(path)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            close(fd)
            throw ServiceError("another healthgate process (a serve, or a replay with no serve running) is using the data dir \(dataDir)"
                             + (holder.isEmpty ? "" : " (pid \(holder.split(separator: "\n").first ?? ""))")
                             + "; stop it first, or give this one its own data_dir")
        }
        _ = ftruncate(fd, 0)
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
    }

    /// True when a `serve` holds the data dir's lock.
    public static func isServing(dataDir: String) -> Bool {
        let fd = open(lockPath(dataDir: dataDir), O_RDWR | O_CLOEXEC)
        if fd < 0 { return false }
        defer { close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 { return true }
        flock(fd, LOCK_UN)
        return false
    }

    var statusPath: String { FileIO.join(topology.dataDir, "status.json") }

    /// Starts everything; returns the HTTP port.
    public func start() throws -> UInt16 {
        for d in drainers { try d.start() }
        control?.start()
        let port = try server.start()
        statusEndpoint.port.store(port, ordering: .relaxed)
        writeStatus()
        if case .success(let t) = startThread({ [self] in statusLoop() }) { statusThread = t }
        return port
    }

    /// Writes `status.json` once a second until stopped.
    private func statusLoop() {
        while true {
            let stop: Bool = statusMonitor.withLock {
                if !stopping { statusMonitor.wait(seconds: 1) }
                return stopping
            }
            if stop { return }
            writeStatus()
            handler.refusals.flush(now: clock.now())
        }
    }

    /// Informational, so not fsynced: a crash leaves the previous or the new file.
    private func writeStatus() {
        let tmp = statusPath + ".tmp"
        let bytes = StatusReport.json(service: self, now: clock.now())
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let ok = (try? FileIO.writeAll(fd, bytes, path: tmp)) != nil
        close(fd)
        if ok { rename(tmp, statusPath) }
    }

    /// SIGTERM: stops accepting, lets the requests in flight finish, lets each sink finish its
    /// current write, all within `shutdown_timeout` (default 20 s, below systemd's 30 s). What a
    /// sink has not delivered stays in its queue for the next start.
    public func stop() {
        let deadline = monotonicSeconds() + shutdownTimeout
        // Requests first (they are what phones wait on), with at most three quarters of the time.
        let unanswered = server.stop(finishingWithin: max(0.1, shutdownTimeout * 0.75))
        if unanswered > 0 {
            logger.warning("\(unanswered) request(s) still in flight at the shutdown deadline were cut off (unanswered, so the "
                           + "phones send them again)")
        }
        control?.stop()
        for d in drainers { d.requestStop() }
        for d in drainers { d.stop(within: max(0.1, deadline - monotonicSeconds())) }
        for d in drainers { d.inbox?.close() }
        journal.close()
        statusMonitor.withLock {
            stopping = true
            statusMonitor.broadcast()
        }
        if let t = statusThread {
            pthread_join(t, nil)
            statusThread = nil
        }
        writeStatus()
    }
}

/// A runtime failure of the service (exit code 1), said in words.
public struct ServiceError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

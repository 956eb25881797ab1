import Fleet
import Glibc
import HealthgateCore
import HealthgateCrypto
import Pipeline
import Posix
import SinkKit
import Sinks
import Synchronization

/// The running gateway: journal, sink drainers and HTTP listener, started in that order and
/// stopped in reverse (stop accepting, finish what is in flight, let each sink finish its
/// write, close the journal).
/// The sinks' drainers in place now: a reload replaces the ones whose config changed.
final class DrainerSet: Sendable {
    private let list = Locked<[SinkDrainer]>([])
    /// Sinks out of the config whose records still wait in the journal (`RemovedSinks`).
    private let waiting = Locked<[RemovedSink]>([])
    var all: [SinkDrainer] { list.withLock { $0 } }
    func set(_ drainers: [SinkDrainer]) { list.withLock { $0 = drainers } }
    var removed: [RemovedSink] { waiting.withLock { $0 } }
    func setRemoved(_ r: [RemovedSink]) { waiting.withLock { $0 = r } }

    /// The lowest journal entry a sink in the config still needs (nil: none runs).
    var configuredLowest: UInt64? { all.map { $0.metrics.cursorSeq.load(ordering: .relaxed) }.min() }

    /// The lowest journal entry any sink, in the config or taken out of it, still needs.
    var lowest: UInt64 {
        let all = [configuredLowest].compactMap { $0 } + removed.map(\.cursor.seq)
        return all.min() ?? 0
    }
}

public final class GatewayService: @unchecked Sendable {
    /// The config in force (a reload replaces it; listen, data_dir, tls, http, journal and
    /// quarantine only change with a restart).
    public var topology: Topology { live.withLock { $0 } }
    public let journal: Journal
    public var drainers: [SinkDrainer] { drainerSet.all }
    public var handler: IngestHandler { switchable.handler as! IngestHandler }
    let drainerSet = DrainerSet()
    /// One maker of room at a time (`makeRoomForRemovedSinks`).
    private let roomMaker = Locked(())
    private let live: Locked<Topology>
    var journalMaxBytes: Int? { topology.journal.max_bytes.map { Int($0.bytes) } }
    var shutdownTimeout: Double { topology.shutdownTimeout }
    /// The listener (a TLS reload replaces it, on the same socket). Touched by the thread that
    /// starts, reloads and stops the service only.
    private(set) var server: HTTPServer
    /// The key and certificate it serves (nil: plain HTTP).
    private var tlsPEM: TLSMaterial?
    let switchable: SwitchableHandler
    /// `replay` beside this serve (nil when the socket could not be made; said in the log).
    let control: ControlServer?
    let logger: Logger
    let clock: any WaitClock
    let signatureClock: any Clock
    let quarantine: Quarantine
    let requestLog: RequestLog?
    private(set) var connectionGuard: ConnectionGuard
    private let onCommit: @Sendable () -> Void
    private let port = Atomic<UInt16>(0)
    /// Held for the service's life: one `serve` per data dir.
    private let lockFD: Int32
    private let statusMonitor = Monitor()
    /// What this process runs of a fleet (`all`: everything, as one machine).
    let role: FleetRole
    /// This machine's part of a fleet: its publisher (roles ingest and all) and its sinks'
    /// workers (deliver and all); nil without `fleet:`.
    let fleetPart: FleetPart?
    private var statusThread: pthread_t?
    private var stopping = false

    public init(
        topology: Topology, logger: Logger, clock: any WaitClock = SystemClock(),
        signatureClock: any Clock = SystemClock(), role: FleetRole = .all
    ) throws {
        live = Locked(topology)
        self.role = role
        if let f = topology.fleet {
            // Ingest publishes to the brokers; deliver runs a worker per sink on their queues.
            let publisher =
                role == .deliver
                ? nil
                : try FleetPublisher(
                    brokers: f.brokers, queues: FleetQueues(sinks: topology.sinks.map(\.name), partitions: f.partitions),
                    logger: logger.child("fleet"))
            let workers =
                role == .ingest
                ? []
                : topology.sinks.map { s in
                    FleetWorker(
                        name: s.name, built: s.built, routes: topology.routes.filter { $0.to.contains(s.name) }, fleet: f,
                        dataDir: topology.dataDir, logger: logger.child("fleet"), clock: clock)
                }
            fleetPart = FleetPart(role: role, publisher: publisher, workers: workers, partitions: f.partitions)
        } else {
            fleetPart = nil
        }
        self.logger = logger
        self.clock = clock
        self.signatureClock = signatureClock
        try FileIO.makeDirectories(topology.dataDir, mode: 0o700)
        try GatewayService.keepPrivate(topology.dataDir, logger: logger)
        lockFD = try GatewayService.lock(dataDir: topology.dataDir)
        journal = try Journal(
            directory: FileIO.join(topology.dataDir, "journal"),
            segmentBytes: Int(topology.journal.segment_bytes?.bytes ?? 64 << 20),
            logger: logger.child("journal"))
        if journal.truncatedBytes > 0 || journal.recoveredEntries > 0 {
            logger.info("journal: \(journal.recoveredEntries) entries in the newest segment, up to #\(journal.lastDurableSeq)")
        }
        // Each drainer's commit looks at every sink's cursor to let the journal drop the
        // segments every sink has passed.
        let journal = self.journal
        let set = drainerSet
        let retention = topology.journal.retention?.seconds ?? 0
        // A sink taken out of the config holds what waits for it (until `healthgate forget`).
        let removed = RemovedSinks.scan(dataDir: topology.dataDir, configured: Set(topology.sinks.map(\.name)))
        set.setRemoved(removed)
        for r in removed {
            let waiting = journal.backlog(fromSeq: r.cursor.seq, skip: r.cursor.skip).records
            if waiting > 0 {
                logger.warning(
                    "sink \(r.name) is not in the config, and \(waiting) record(s) wait for it in the journal, which "
                        + "keeps them: put it back to deliver them, or `healthgate forget \(r.name)` to let them go")
            }
        }
        onCommit = { [clock] in
            let lowest = set.lowest
            let keepAfter = clock.now().seconds - Int64(retention)
            if lowest > 1 { journal.deleteSegments(below: lowest, lastEntryBefore: retention > 0 ? keepAfter : nil) }
        }
        quarantine = Quarantine(
            directory: FileIO.join(topology.dataDir, "quarantine"),
            maxBytes: topology.quarantine.max_bytes.map { Int($0.bytes) } ?? Quarantine.defaultMaxBytes,
            clock: clock)
        connectionGuard = GatewayService.makeGuard(topology, logger: logger)
        do {
            requestLog =
                try topology.fleet.map { RequestLog(fleetState: $0.state, logger: logger.child("requests")) }
                ?? RequestLog(path: FileIO.join(topology.dataDir, "requests.db"), logger: logger.child("requests"))
        } catch {
            requestLog = nil
            logger.error("the request log cannot be opened (\(error)); requests are not noted (the read API's batches stay empty)")
        }
        switchable = SwitchableHandler(NotReady())
        do {
            control = try ControlServer(
                dataDir: topology.dataDir, journal: journal, drainers: { set.all }, clock: clock,
                logger: logger.child("control"))
        } catch {
            control = nil
            logger.warning("no control socket (\(error)): `healthgate replay` cannot run beside this serve")
        }
        tlsPEM = try GatewayService.readTLS(topology)
        server = GatewayService.makeServer(topology, tls: tlsPEM, guard: connectionGuard, handler: switchable, logger: logger)
        var drainers: [SinkDrainer] = []
        for s in topology.sinks where topology.fleet == nil {
            drainers.append(try makeDrainer(s, topology: topology, metrics: SinkMetrics(name: s.name), inbox: nil))
        }
        drainerSet.set(drainers)
        switchable.replace(with: makeHandler(topology, reusing: nil))
    }

    static func makeGuard(_ topology: Topology, logger: Logger) -> ConnectionGuard {
        var limits = ConnectionGuard.Limits()
        if let n = topology.http.max_connections { limits.maxConnections = n }
        if let t = topology.http.header_timeout { limits.headerTimeout = t.seconds }
        if let r = topology.http.min_body_rate { limits.minBodyRate = Int(r.bytes) }
        return ConnectionGuard(limits: limits, logger: logger.child("http"))
    }

    /// What the listener's TLS is made of: the files' contents and the priority string.
    struct TLSMaterial: Equatable {
        var key: String
        var cert: String
        var clientCA: String?
        var priorities: String
    }

    static func readTLS(_ topology: Topology) throws -> TLSMaterial? {
        guard let tls = topology.tls else { return nil }
        func read(_ path: String) throws -> String { String(decoding: try FileIO.readAll(path), as: UTF8.self) }
        return TLSMaterial(
            key: try read(tls.key), cert: try read(tls.cert), clientCA: try tls.client_ca.map(read),
            priorities: tls.effectivePriorities)
    }

    static func makeServer(
        _ topology: Topology, tls: TLSMaterial?, guard connectionGuard: ConnectionGuard,
        handler: any HTTPHandler, logger: Logger
    ) -> HTTPServer {
        HTTPServer(
            options: .init(
                host: topology.listenHost, port: topology.listenPort,
                threads: topology.http.threads ?? 8,
                connectionTimeoutSeconds: Int(topology.http.connection_timeout?.seconds ?? 30),
                connectionLimit: topology.http.max_connections ?? 1024,
                tlsKeyPEM: tls?.key, tlsCertPEM: tls?.cert, logger: logger.child("http"),
                maxBufferedBytes: topology.http.max_buffered.map { Int($0.bytes) } ?? HTTPServer.defaultMaxBuffered,
                connectionGuard: connectionGuard, tlsClientCAPEM: tls?.clientCA,
                tlsPriorities: tls?.priorities),
            handler: handler)
    }

    /// A new key and certificate (files changed, or tls set or unset) for the same socket: a new
    /// listener starts on it, the old one answers the requests it has, then stops. Nothing is
    /// refused meanwhile: connections wait in the socket's backlog for the moment of the swap.
    private func reloadTLS(_ new: Topology, said: inout [String]) {
        let pem: TLSMaterial?
        do {
            pem = try GatewayService.readTLS(new)
        } catch {
            said.append("tls: the key or certificate cannot be read (\(error)); the ones in use stay")
            return
        }
        guard pem != tlsPEM else { return }
        // Checked before the listener is touched: libmicrohttpd closes a socket it fails to start on.
        if let pem, let why = Crypto.keyPairProblem(keyPEM: pem.key, certPEM: pem.cert) {
            said.append("tls: the new key and certificate are refused (\(why)); the ones in use stay")
            return
        }
        let fd = server.handOver()
        guard fd >= 0 else { said.append("tls: the listener cannot hand its socket over; restart to use the new certificate"); return }
        let old = server
        let guardNew = GatewayService.makeGuard(new, logger: logger)
        let next = GatewayService.makeServer(new, tls: pem, guard: guardNew, handler: switchable, logger: logger)
        do {
            try next.start(listenFD: fd)
            tlsPEM = pem
            connectionGuard = guardNew
            said.append(pem == nil ? "tls turned off: plain HTTP from now on" : "tls: the new key and certificate are served from now on")
        } catch {
            // Checked above, so rare (libmicrohttpd refusing what libcrypto took): the socket is
            // gone with it, so serve cannot go on listening.
            said.append("tls: the new listener did not start (\(error)); stopping, restart serve")
            logger.error("tls: the new listener did not start (\(error)); serve exits so that its supervisor restarts it")
            kill(getpid(), SIGTERM)
            return
        }
        server = next
        old.finish(within: 10)
    }

    /// A sink's drainer, with the routes that lead to it in `topology`.
    private func makeDrainer(
        _ s: (name: String, built: BuiltSink), topology: Topology, metrics: SinkMetrics,
        inbox: Journal?
    ) throws -> SinkDrainer {
        let routes = topology.routes.filter { $0.to.contains(s.name) }
        let box =
            try inbox
            ?? Journal(
                directory: FileIO.join(SinkDrainer.stateDirectory(sink: s.name, dataDir: topology.dataDir), "inbox"),
                segmentBytes: 16 << 20, logger: logger.child("inbox \(s.name)"))
        return SinkDrainer(
            name: s.name, built: s.built, routes: routes, journal: journal, inbox: box,
            dataDir: topology.dataDir, logger: logger.child("queue"), clock: clock, metrics: metrics,
            deadLetterBytes: topology.deadLetters.maxBytes, onCommit: onCommit)
    }

    /// What answers the HTTP requests for `topology`: its receivers, the read API, the status page.
    private func makeHandler(_ topology: Topology, reusing earlier: IngestHandler?) -> IngestHandler {
        let drainers = self.drainers
        // A receiver's `devices:` binding, kept across a reload while it stays the same.
        var gates: [String: DeviceGate] = [:]
        for r in topology.receivers {
            let binding = r.config.devices ?? .any
            guard binding != .any else { continue }
            gates[r.name] =
                earlier?.deviceGates[r.name].flatMap { $0.binding == binding ? $0 : nil }
                ?? DeviceGate(
                    receiver: r.name, binding: binding, dataDir: topology.dataDir,
                    logger: logger.child("receiver \(r.name)"))
        }
        // Intake stops (503) for a receiver whose data would go to a blocking sink that is over
        // its queue limit, and for everyone once the journal's budget is spent.
        var limits: [String: [IngestHandler.QueueLimit]] = [:]
        for d in drainers {
            guard let s = topology.sinks.first(where: { $0.name == d.name }), let max = s.built.common.queue.max_bytes?.bytes,
                (s.built.common.queue.when_full ?? .block) == .block
            else { continue }
            for r in topology.receivers where topology.routes.contains(where: { $0.to.contains(s.name) && $0.takes(receiver: r.name) }) {
                limits[r.name, default: []].append(IngestHandler.QueueLimit(sink: d.metrics, maxBytes: Int(max)))
            }
        }
        let set = drainerSet
        let status = StatusEndpoint(
            topology: topology, journal: journal, drainers: { set.all }, removed: { set.removed },
            clock: clock, port: port.load(ordering: .relaxed), requestLog: requestLog)
        return IngestHandler(
            receivers: topology.receivers.map(\.receiver), journal: journal, quarantine: quarantine,
            clock: clock, signatureClock: signatureClock, logger: logger.child("ingest"),
            sinkMetrics: { [fleetPart] in set.all.map(\.metrics) + (fleetPart?.workers.map(\.metrics) ?? []) },
            journalMaxBytes: topology.journal.max_bytes.map { Int($0.bytes) },
            makeRoom: { [weak self] target in self?.makeRoomForRemovedSinks(downTo: target) },
            queueLimits: limits, connections: connectionGuard,
            readAPI: topology.readAPI.map { ReadAPI(settings: $0, requests: requestLog, logger: logger.child("read_api")) },
            requestLog: requestLog, status: status, deviceGates: gates,
            reusing: earlier?.receiverMetrics ?? [], fleet: fleetPart)
    }

    /// SIGHUP: takes a new, checked config while serving. Sinks whose config or routes changed
    /// are rebuilt (each stops after its write in progress and the new one goes on from its
    /// cursor), new ones start, removed ones stop (their queue stays on disk); receivers, routes,
    /// the read API, the status page and the log follow the new config; the rest keep running.
    /// Returns what it did, one line each, for the log.
    public func reload(_ new: Topology) -> [String] {
        let old = topology
        var said: [String] = []
        var kept = new
        if old.listenHost != new.listenHost || (new.listenPort != 0 && old.listenPort != new.listenPort) {
            said.append("listen changed: it takes effect after a restart")
        }
        if old.dataDir != new.dataDir { said.append("data_dir changed: it takes effect after a restart"); kept.dataDir = old.dataDir }
        kept.listenHost = old.listenHost
        kept.listenPort = old.listenPort
        let current = drainers
        var next: [SinkDrainer] = []
        if old.fleet != nil && (old.sinkFingerprints != new.sinkFingerprints || old.sinks.map(\.name) != new.sinks.map(\.name)) {
            said.append("the sinks or their routes changed: in a fleet, they take effect after a restart")
        }
        for s in new.sinks where old.fleet == nil {
            let running = current.first { $0.name == s.name }
            if let running, old.sinkFingerprints[s.name] == new.sinkFingerprints[s.name] {
                next.append(running)
                continue
            }
            if let running {
                running.requestStop()
                running.stop(within: 10)
            }
            do {
                let d = try makeDrainer(s, topology: kept, metrics: running?.metrics ?? SinkMetrics(name: s.name), inbox: running?.inbox)
                try d.start()
                next.append(d)
                said.append(running == nil ? "sink \(s.name) added" : "sink \(s.name) rebuilt (its config or routes changed)")
            } catch {
                said.append("sink \(s.name) cannot start: \(error)")
            }
        }
        for d in current where !new.sinks.contains(where: { $0.name == d.name }) {
            d.requestStop()
            d.stop(within: 10)
            d.inbox?.close()
            let waiting = journal.backlog(
                fromSeq: d.metrics.cursorSeq.load(ordering: .relaxed),
                skip: d.metrics.cursorSkip.load(ordering: .relaxed)
            ).records
            said.append(
                "sink \(d.name) removed: \(waiting) record(s) that waited for it stay in the journal until it is put back "
                    + "(or `healthgate forget \(d.name)`)")
        }
        // Before the removed drainers leave the set: their cursors keep holding the journal.
        drainerSet.setRemoved(RemovedSinks.scan(dataDir: kept.dataDir, configured: Set(new.sinks.map(\.name))))
        drainerSet.set(next)
        let receivers = Set(new.receivers.map(\.name)), before = Set(old.receivers.map(\.name))
        for r in receivers.subtracting(before).sorted() { said.append("receiver \(r) added") }
        for r in before.subtracting(receivers).sorted() { said.append("receiver \(r) removed") }
        reloadTLS(kept, said: &said)
        live.withLock { $0 = kept }
        switchable.replace(with: makeHandler(kept, reusing: handler))
        return said
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
            throw ServiceError(
                "data_dir \(dir) has mode \(String(mode, radix: 8)) (others may read it) and cannot be made "
                    + "0700 by this user; run `chmod 700 \(dir)` as its owner")
        }
        logger.warning("data_dir \(dir) had mode \(String(mode, radix: 8)); set to 700 so that only this user reads health data")
    }

    static func lockPath(dataDir: String) -> String { FileIO.join(dataDir, "lock") }

    /// Takes the data dir's lock, or says which process holds it.
    static func lock(dataDir: String) throws -> Int32 {
        // A data dir not made yet (a `replay` before any `serve`) is made as serve makes it.
        try FileIO.makeDirectories(dataDir, mode: 0o700)
        let path = lockPath(dataDir: dataDir)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 { throw IOError("open", path) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = (try? FileIO.readAll(path)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            close(fd)
            throw ServiceError(
                "another healthgate process (a serve, or a replay with no serve running) is using the data dir \(dataDir)"
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
        for w in fleetPart?.workers ?? [] { try w.start() }
        control?.start()
        let port = try server.start()
        self.port.store(port, ordering: .relaxed)
        handler.status?.port.store(port, ordering: .relaxed)
        writeStatus()
        if case .success(let t) = startThread({ [self] in statusLoop() }) { statusThread = t }
        return port
    }

    /// Writes `status.json` once a second until stopped.
    private func statusLoop() {
        // In a fleet, this machine says it is alive every 10 s (for `healthgate status`).
        let machines = topology.fleet.map { FleetMachines(url: $0.state) }
        var lastBeat = -Double.infinity
        while true {
            if let machines, monotonicSeconds() - lastBeat >= 10 {
                lastBeat = monotonicSeconds()
                do throws(FleetDatabase.Failure) {
                    try machines.beat(role: role)
                } catch {
                    logger.warning("fleet: cannot note this machine in the fleet's state: \(error)")
                }
            }
            let stop: Bool = statusMonitor.withLock {
                if !stopping { statusMonitor.wait(seconds: 1) }
                return stopping
            }
            if stop { return }
            watchRemovedSinks()
            writeStatus()
            handler.refusals.flush(now: clock.now())
        }
    }

    /// Once a second: the sinks out of the config as the data dir has them now (`healthgate
    /// forget` sets one aside), and, when the journal nears its budget with its oldest segment
    /// held by them alone, what waits for them there into their dead letters.
    private func watchRemovedSinks() {
        let t = topology
        drainerSet.setRemoved(RemovedSinks.scan(dataDir: t.dataDir, configured: Set(t.sinks.map(\.name))))
        if let max = journalMaxBytes { makeRoomForRemovedSinks(downTo: max * 3 / 4) }
        onCommit()
    }

    /// While the journal holds more than `target` bytes and its oldest segment is held by sinks
    /// out of the config alone, that segment's records go to their dead letters and it is
    /// deleted (one caller at a time: the status thread, or a request at the budget).
    func makeRoomForRemovedSinks(downTo target: Int) {
        roomMaker.withLock { _ in
            let t = topology
            for _ in 0..<256 {
                let removed = drainerSet.removed
                guard journal.bytesOnDisk > target, let configured = drainerSet.configuredLowest, !removed.isEmpty else { return }
                let moved = RemovedSinks.forceOut(
                    removed, configuredLowest: configured, journal: journal, maxBytes: target,
                    dataDir: t.dataDir, logger: logger, clock: clock, fraction: 0)
                if moved.isEmpty { return }
                drainerSet.setRemoved(RemovedSinks.scan(dataDir: t.dataDir, configured: Set(t.sinks.map(\.name))))
                onCommit()
            }
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
            logger.warning(
                "\(unanswered) request(s) still in flight at the shutdown deadline were cut off (unanswered, so the "
                    + "phones send them again)")
        }
        control?.stop()
        fleetPart?.publisher?.stop()
        for w in fleetPart?.workers ?? [] { w.requestStop() }
        for w in fleetPart?.workers ?? [] { w.stop(within: max(0.1, deadline - monotonicSeconds())) }
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

/// Answers until the real handler is in place (a moment while `serve` starts).
struct NotReady: HTTPHandler {
    func handle(_ request: HTTPRequest) -> HTTPResponse {
        problem(503, "Starting", "The gateway is starting; try again in a moment.", headers: [HTTPHeader("Retry-After", "1")])
    }
    func maxBodyBytes(forPath path: String) -> Int { 0 }
    func bodyTooLarge(path: String, limit: Int) -> HTTPResponse { handle(HTTPRequest(method: "POST", path: path)) }
    func tooMuchInFlight(path: String, limit: Int) -> HTTPResponse { handle(HTTPRequest(method: "POST", path: path)) }
    func preflight(_ headersOnly: HTTPRequest) -> HTTPResponse? { handle(headersOnly) }
}

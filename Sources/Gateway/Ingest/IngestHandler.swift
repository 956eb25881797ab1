import CanonicalJSON
import FastJSON
import Fleet
import HealthgateCore
import Pipeline
import SinkKit
import Posix
import Synchronization

/// The gateway's request handling as a plain function: find the receiver, let it read the
/// request, journal what it accepted (fsynced), keep what it could not take, answer.
public final class IngestHandler: HTTPHandler, Sendable {
    let receiversByPath: [String: any Receiver]
    let metricsByName: [String: ReceiverMetrics]
    public let receiverMetrics: [ReceiverMetrics]
    let journal: Journal
    /// On a fleet's ingest machine (`serve --role ingest`): where a request's records go
    /// instead of the journal.
    let fleet: FleetPart?
    let quarantine: Quarantine
    let clock: any Clock
    let signatureClock: any Clock
    let logger: Logger
    let sinkMetrics: @Sendable () -> [SinkMetrics]
    let journalMaxBytes: Int?
    /// Frees journal room down to the bytes given, where only sinks out of the config hold it.
    let makeRoom: @Sendable (Int) -> Void
    let queueLimits: [String: [QueueLimit]]
    let refusals: RefusalLog
    let connections: ConnectionGuard?
    /// What `read_api` serves under its prefix, if configured.
    let readAPI: ReadAPI?
    /// Every request a receiver answered past its auth check (see `RequestLog`).
    let requestLog: RequestLog?
    private let seenDevices = Mutex<Set<String>>([])
    /// `GET /` and `GET /status`.
    let status: StatusEndpoint?
    /// The receivers bound to devices (`devices:`), by name.
    let deviceGates: [String: DeviceGate]
    static let unknownPathLimit = 64 * 1024

    /// A blocking sink's queue limit, as it applies to the receivers that feed the sink.
    public struct QueueLimit: Sendable {
        public var sink: SinkMetrics
        public var maxBytes: Int

        public init(sink: SinkMetrics, maxBytes: Int) {
            self.sink = sink
            self.maxBytes = maxBytes
        }
    }

    public init(
        receivers: [any Receiver], journal: Journal, quarantine: Quarantine, clock: any Clock,
        signatureClock: any Clock, logger: Logger, sinkMetrics: @escaping @Sendable () -> [SinkMetrics],
        journalMaxBytes: Int? = nil, makeRoom: @escaping @Sendable (Int) -> Void = { _ in },
        queueLimits: [String: [QueueLimit]] = [:], connections: ConnectionGuard? = nil,
        readAPI: ReadAPI? = nil, requestLog: RequestLog? = nil, status: StatusEndpoint? = nil,
        deviceGates: [String: DeviceGate] = [:], reusing earlier: [ReceiverMetrics] = [],
        fleet: FleetPart? = nil
    ) {
        self.fleet = fleet
        self.status = status
        self.deviceGates = deviceGates
        self.connections = connections
        self.readAPI = readAPI
        self.requestLog = requestLog
        self.journalMaxBytes = journalMaxBytes
        self.makeRoom = makeRoom
        self.refusals = RefusalLog(logger: logger)
        self.queueLimits = queueLimits
        var byPath: [String: any Receiver] = [:]
        var metrics: [ReceiverMetrics] = []
        for r in receivers {
            for p in r.paths { byPath[p] = r }
            // A receiver kept across a reload keeps its counts.
            metrics.append(earlier.first { $0.name == r.name } ?? ReceiverMetrics(name: r.name))
        }
        self.receiversByPath = byPath
        self.receiverMetrics = metrics
        self.metricsByName = Dictionary(uniqueKeysWithValues: metrics.map { ($0.name, $0) })
        self.journal = journal
        self.quarantine = quarantine
        self.clock = clock
        self.signatureClock = signatureClock
        self.logger = logger
        self.sinkMetrics = sinkMetrics
    }

    public func maxBodyBytes(forPath path: String) -> Int {
        receiversByPath[normalize(path)]?.maxBodyBytes ?? IngestHandler.unknownPathLimit
    }

    public func bodyTooLarge(path: String, limit: Int) -> HTTPResponse {
        if let r = receiversByPath[normalize(path)] {
            metricsByName[r.name]!.tooLarge.add(1, ordering: .relaxed)
            logger.warning("\(r.name): refused a body over its limit of \(limit) bytes")
        }
        return problem(
            413, "Body too large",
            "The body is larger than this receiver's limit of \(limit) bytes. The app halves its request size after a 413.")
    }

    public func tooMuchInFlight(path: String, limit: Int) -> HTTPResponse {
        if let r = receiversByPath[normalize(path)] {
            metricsByName[r.name]!.unavailable.add(1, ordering: .relaxed)
            logger.warning("\(r.name): refused a body: request bodies in flight would pass http.max_buffered (\(limit) bytes)")
        }
        return problem(
            503, "Busy",
            "The gateway holds as many request bodies as it may at once (http.max_buffered). "
                + "Nothing of this request was kept; send it again shortly.", headers: [HTTPHeader("Retry-After", "5")])
    }

    public func preflight(_ request: HTTPRequest) -> HTTPResponse? {
        let path = normalize(request.path)
        guard let receiver = receiversByPath[path] else {
            // GETs of /healthz and /metrics, and unknown paths, are answered by `handle`.
            return nil
        }
        guard request.method == "POST" else { return nil }
        if let refusal = receiver.authorize(request) {
            metricsByName[receiver.name]!.requests.add(1, ordering: .relaxed)
            metricsByName[receiver.name]!.refused.add(1, ordering: .relaxed)
            refuse(receiver.name, refusal.status, request, why: RefusalLog.why(refusal.status))
            return refusal
        }
        return nil
    }

    /// Paths match with or without a trailing slash.
    private func normalize(_ path: String) -> String {
        path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        let path = normalize(request.path)
        if let receiver = receiversByPath[path] {
            guard request.method == "POST" else {
                return problem(
                    405, "Method not allowed", "\(path) takes POST requests.",
                    headers: [HTTPHeader("Allow", "POST")])
            }
            return ingest(request, receiver)
        }
        if let readAPI, let answer = readAPI.handle(request, path: path) { return refused(answer, by: "read API", request) }
        if let status, let answer = status.handle(request, path: path, receivers: receiverMetrics) {
            return refused(answer, by: "status page", request)
        }
        switch (request.method, path) {
        case ("GET", "/healthz"), ("HEAD", "/healthz"):
            return health()
        case ("GET", "/metrics"):
            let text = PrometheusText.render(
                receivers: receiverMetrics, sinks: sinkMetrics(), journal: journal,
                quarantine: quarantine.usage, connections: connections, now: clock.now())
            return HTTPResponse(
                status: 200, headers: [HTTPHeader("Content-Type", "text/plain; version=0.0.4")],
                body: Array(text.utf8))
        default:
            return problem(
                404, "Not found",
                "No receiver listens on \(path). Check the URL in the app against "
                    + "`healthgate check`.")
        }
    }

    func health() -> HTTPResponse {
        if journal.isClosed {
            return problem(503, "Shutting down", "The journal is closed.")
        }
        if let fleet {
            // A fleet machine can do its role while a broker takes its publishes (ingest) and
            // each sink's worker consumes and saves its state (deliver): 503 sends the phones
            // (through a load balancer) to another ingest machine, and tells an operator why.
            let publishing = fleet.publisher?.problem
            let workers = fleet.workers.map { ($0.name, $0.problem) }
            let why = publishing ?? workers.lazy.compactMap { w in w.1.map { "sink \(w.0): \($0)" } }.first
            var w = JSONWriter(capacity: 256)
            w.beginObject()
            w.key("status"); w.string(why == nil ? "ok" : "unavailable")
            w.key("role"); w.string(fleet.role.rawValue)
            if fleet.publisher != nil { w.key("brokers"); w.string(publishing == nil ? "reachable" : "unreachable") }
            if !workers.isEmpty {
                w.key("sinks")
                w.beginObject()
                for (name, problem) in workers { w.key(name); w.string(problem == nil ? "delivering" : "not delivering") }
                w.endObject()
            }
            if let why { w.key("why"); w.string(why) }
            w.endObject()
            return HTTPResponse(status: why == nil ? 200 : 503, headers: [HTTPHeader("Content-Type", "application/json")], body: w.bytes)
        }
        var w = JSONWriter(capacity: 128)
        let sinks = sinkMetrics()
        let down = sinks.contains { $0.reachability.problem != nil || $0.paused != nil }
        w.beginObject()
        // 200 while the journal takes data (phones lose nothing); "degraded" when a sink's
        // destination cannot be reached, keeps refusing its writes for a reason of its config, or
        // the crash-loop guard paused it (its records wait in the journal).
        w.key("status"); w.string(down ? "degraded" : "ok")
        w.key("journal_seq"); w.int(Int(journal.lastDurableSeq))
        // Each sink's destination as its drainer last found it. A sink that is down does not
        // make the gateway unhealthy: its records wait in the journal.
        w.key("sinks")
        w.beginObject()
        for m in sinks {
            w.key(m.name); w.string(m.paused != nil ? "paused" : m.reachability.word)
        }
        w.endObject()
        let paused = sinks.filter { $0.paused != nil }
        if !paused.isEmpty {
            w.key("paused")
            w.beginObject()
            for m in paused {
                guard let p = m.paused else { continue }
                w.key(m.name)
                w.beginObject()
                w.key("from_entry"); w.uint(p.from.seq)
                w.key("from_record"); w.int(p.from.skip)
                w.key("crashes"); w.int(p.crashes)
                w.key("resume"); w.string(CrashGuard.howToResume(m.name))
                w.endObject()
            }
            w.endObject()
        }
        w.endObject()
        return HTTPResponse(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: w.bytes)
    }

    /// What became of a request, for the receiver's last-request figures and the request log.
    struct Noted {
        var records = 0
        var refused = 0
        var duplicates = 0
        var device: String?
        var id: String?
        var note: String?
    }

    func ingest(_ request: HTTPRequest, _ receiver: any Receiver) -> HTTPResponse {
        var noted = Noted()
        let started = monotonicSeconds()
        let response = ingest(request, receiver, noted: &noted)
        metricsByName[receiver.name]!.noteLatency(monotonicSeconds() - started)
        // Refused credentials are not a phone's request (RefusalLog says them); a request for a
        // device the receiver is not bound to is, and is noted.
        guard (response.status != 401 && response.status != 403) || noted.note != nil else { return response }
        let now = clock.now()
        let m = metricsByName[receiver.name]!
        m.lastStatus.store(response.status, ordering: .relaxed)
        m.lastRequestNanos.store(now.unixNanoseconds, ordering: .relaxed)
        if response.status < 300, let device = noted.device { sayFirst(receiver.name, device, request, noted) }
        requestLog?.note(
            time: now, receiver: receiver.name, device: noted.device ?? request.header("x-device-id"),
            requestID: noted.id ?? IngestHandler.deliveryID(request), status: response.status,
            records: noted.records, refused: noted.refused, duplicates: noted.duplicates, note: noted.note)
        return response
    }

    func ingest(_ request: HTTPRequest, _ receiver: any Receiver, noted: inout Noted) -> HTTPResponse {
        let m = metricsByName[receiver.name]!
        m.requests.add(1, ordering: .relaxed)
        if request.body.count > receiver.maxBodyBytes {
            refuse(
                receiver.name, 413, request,
                why: "a body of \(request.body.count) bytes, over the receiver's max_body_bytes (\(receiver.maxBodyBytes))")
            return bodyTooLarge(path: request.path, limit: receiver.maxBodyBytes)
        }
        let reception = receiver.receive(request, context: ReceiveContext(now: signatureClock.now()))
        switch consume reception {
        case .refused(let response, let reason):
            m.refused.add(1, ordering: .relaxed)
            refuse(receiver.name, response.status, request, why: reason)
            return response
        case .answer(let response):
            if response.status == 401 || response.status == 403 {
                m.refused.add(1, ordering: .relaxed)
                refuse(receiver.name, response.status, request, why: RefusalLog.why(response.status))
            } else if response.status < 300 {
                m.checks.add(1, ordering: .relaxed)
            }
            return response
        case .unreadable(let status, let reason):
            m.unreadable.add(1, ordering: .relaxed)
            noted.note = "unreadable: " + reason
            var detail = reason
            do {
                if try quarantine.keep(body: request.body, reason: reason, receiver: receiver.name, request: request) != nil {
                    detail += ". The body is kept in the gateway's quarantine."
                }
            } catch {
                logger.error("\(receiver.name): cannot keep an unreadable body in quarantine: \(error)")
            }
            refuse(
                receiver.name, status, request,
                why: "an unreadable body of \(request.body.count) bytes\(IngestHandler.requestID(request)): \(reason)")
            return problem(status, status == 413 ? "Body too large" : "Unreadable body", detail)
        case .accept(let batch, let reply):
            noted.device = batch.device
            noted.id = batch.requestID
            noted.duplicates = batch.duplicates
            // Credentials write only for the devices they are bound to: anything else is refused
            // whole, before a record is kept.
            if let gate = deviceGates[receiver.name], let refusal = gate.refusal(devices: batch.devices) {
                if refusal.status == 403 {
                    m.wrongDevice.add(1, ordering: .relaxed)
                    refuse(receiver.name, 403, request, why: "a device the receiver's devices: does not allow")
                    noted.note = "refused: device not allowed"
                } else {
                    m.unavailable.add(1, ordering: .relaxed)
                }
                return refusal
            }
            // Bad records are set aside first: if that fails, nothing is journaled and the
            // phone sends the whole request again.
            if !batch.quarantined.isEmpty {
                do {
                    try quarantine.keep(records: batch.quarantined, receiver: receiver.name)
                } catch {
                    m.unavailable.add(1, ordering: .relaxed)
                    logger.error("\(receiver.name): cannot keep \(batch.quarantined.count) bad record(s) in quarantine: \(error)")
                    return unavailable(error.isNoSpace)
                }
                m.quarantined.add(batch.quarantined.count, ordering: .relaxed)
                logger.warning(
                    "\(receiver.name): \(batch.quarantined.count) record(s) set aside in quarantine"
                        + "\(IngestHandler.requestID(request)), first reason: \(batch.quarantined[0].reason)")
            }
            if !batch.isEmpty {
                if let refusal = keep(batch, receiver: receiver.name) {
                    m.unavailable.add(1, ordering: .relaxed)
                    return refusal
                }
                m.accepted.add(batch.count, ordering: .relaxed)
                if batch.unknownTypes > 0 { m.unknownTypes.add(batch.unknownTypes, ordering: .relaxed) }
                if batch.unknownUnits > 0 { m.unknownUnits.add(batch.unknownUnits, ordering: .relaxed) }
            }
            for action in batch.afterCommit { action() }
            noted.records = batch.count
            noted.refused = batch.quarantined.count
            return reply
        }
    }

    /// Makes a request's records durable before its 2xx: into the journal (fsynced) on one
    /// machine; on a fleet's ingest machine, published and confirmed by a quorum of brokers.
    /// The answer when they could not be (nothing of them kept); nil when they are.
    func keep(_ batch: ReceivedBatch, receiver: String) -> HTTPResponse? {
        if let fleet {
            guard let publisher = fleet.publisher else {
                return problem(
                    503, "Not an ingest machine",
                    "This machine delivers a fleet's records and takes none: send the data to an ingest machine "
                        + "(`serve --role ingest` or `all`). Nothing of this request was kept.",
                    headers: [HTTPHeader("Retry-After", "30")])
            }
            do {
                try publisher.publish(FleetMessages.make(batch, partitions: fleet.partitions))
                return nil
            } catch {
                logger.warning("\(receiver): \(error); answering 503")
                return problem(
                    503, "The message broker did not confirm",
                    "The fleet's brokers did not confirm this request's records in time. "
                        + "Nothing of it may be counted on; send it again.",
                    headers: [HTTPHeader("Retry-After", "5")])
            }
        }
        if let full = admission(receiver, adding: batch.payload.count) { return full }
        do {
            // A big request becomes several bounded entries, kept or lost together.
            try journal.append(payload: batch.payload, parts: batch.cuts.parts(total: batch.payload.count), time: clock.now())
            return nil
        } catch {
            return unavailable(error.isNoSpace)
        }
    }

    /// 503 when taking `bytes` more would pass the journal's budget, or a blocking sink this
    /// receiver feeds is over its queue limit; nil to go on.
    func admission(_ receiver: String, adding bytes: Int) -> HTTPResponse? {
        // Records that wait only for sinks taken out of the config give way first (to their
        // dead letters): phones are not refused for a sink nobody runs.
        if let max = journalMaxBytes, journal.bytesOnDisk + bytes > max {
            makeRoom(max - bytes)
        }
        if let max = journalMaxBytes, journal.bytesOnDisk + bytes > max {
            logger.warning(
                "\(receiver): journal.max_bytes (\(max) bytes) is reached; answering 503 until sinks catch up "
                    + "(see `healthgate status`)")
            return problem(
                503, "Storage budget reached",
                "The gateway's journal is at its configured size while a sink catches up. "
                    + "Nothing of this request was kept; send it again later.",
                headers: [HTTPHeader("Retry-After", "60")])
        }
        for limit in queueLimits[receiver] ?? [] {
            let b = journal.backlog(
                fromSeq: limit.sink.cursorSeq.load(ordering: .relaxed),
                skip: limit.sink.cursorSkip.load(ordering: .relaxed))
            if b.bytes + bytes > limit.maxBytes {
                logger.warning(
                    "\(receiver): sink \(limit.sink.name) has \(b.bytes) bytes waiting, over its queue.max_bytes "
                        + "(\(limit.maxBytes)); answering 503 until it catches up")
                return problem(
                    503, "A destination is behind",
                    "Sink \(limit.sink.name) has more waiting than its queue limit allows. "
                        + "Nothing of this request was kept; send it again later.",
                    headers: [HTTPHeader("Retry-After", "60")])
            }
        }
        return nil
    }

    /// The first request of each phone since the start, in the log: that a phone gets through is
    /// the first thing a user pairing one wants to see. (Bounded: past 10,000 phones, no more.)
    func sayFirst(_ receiver: String, _ device: String, _ request: HTTPRequest, _ noted: Noted) {
        let first = seenDevices.withLock { seen -> Bool in
            guard seen.count < 10_000 else { return false }
            return seen.insert(receiver + "\u{0}" + device).inserted
        }
        guard first else { return }
        logger.info(
            "\(receiver): first request from device \(QuarantinedRecord.name(device)) (\(request.remoteAddress))"
                + "\(IngestHandler.requestID(request)): \(noted.records) record(s) stored"
                + (noted.refused > 0 ? ", \(noted.refused) set aside in quarantine" : ""))
    }

    /// A refused request: in the log (rate-limited, never a credential) and as the receiver's
    /// newest refusal on the status page.
    func refuse(_ receiver: String, _ status: Int, _ request: HTTPRequest, why: String) {
        let now = clock.now()
        refusals.note(receiver: receiver, status: status, address: request.remoteAddress, now: now, why: why)
        metricsByName[receiver]?.lastRefusal.withLock {
            $0 = ReceiverMetrics.Refusal(time: now, status: status, why: why, address: request.remoteAddress)
        }
    }

    /// Refused credentials of the read API and the status page go to the log as a receiver's
    /// do (the first at once, the rest summed up once a minute), never the token.
    func refused(_ answer: HTTPResponse, by what: String, _ request: HTTPRequest) -> HTTPResponse {
        if answer.status == 401 || answer.status == 403 {
            refusals.note(receiver: what, status: answer.status, address: request.remoteAddress, now: clock.now())
        }
        return answer
    }

    /// `, delivery <id>` for a request that names itself (Syncky's X-Syncky-Delivery, or
    /// X-Request-Id), so a log line can be matched with the app's own log; else nothing.
    static func requestID(_ request: HTTPRequest) -> String {
        deliveryID(request).map { ", delivery " + QuarantinedRecord.name($0) } ?? ""
    }

    /// The id a request gives itself: X-Syncky-Delivery, else X-Request-Id.
    static func deliveryID(_ request: HTTPRequest) -> String? {
        (request.header("x-syncky-delivery") ?? request.header("x-request-id")).flatMap { $0.isEmpty ? nil : $0 }
    }

    func unavailable(_ noSpace: Bool) -> HTTPResponse {
        problem(
            503, "Cannot store the data now",
            "The gateway could not write to its data dir (\(noSpace ? "the disk is full" : "an I/O error")). "
                + "Nothing of this request was kept; send it again later.",
            headers: [HTTPHeader("Retry-After", "30")])
    }
}

/// A machine's part of a fleet: the publisher that takes requests (roles ingest and all), the
/// sinks' workers (deliver and all), the partitions.
public struct FleetPart: Sendable {
    public let role: FleetRole
    public let publisher: FleetPublisher?
    public let workers: [FleetWorker]
    public let partitions: Int
}

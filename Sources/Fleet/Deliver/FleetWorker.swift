import CanonicalJSON
import Glibc
import HealthgateCore
import Pipeline
import Posix
import SinkKit
import Synchronization

/// One sink on a deliver machine: its thread consumes the sink's partition queues (the broker
/// gives each to one worker at a time: single active consumer), runs the routes that lead to
/// the sink with a set of transform instances per partition, writes batches as a drainer does
/// (retries, backoff, Retry-After, dead letters — here to the sink's dead-letter queue), saves
/// each partition's transform state in PostgreSQL, and only then acknowledges the messages.
/// A worker that dies leaves its messages unacknowledged: the broker gives them and the
/// partition to another worker, which claims the partition's state and recognises what that
/// state already holds. docs/fleet.md says what each failure does.
public final class FleetWorker: @unchecked Sendable {
    public let name: String
    let built: BuiltSink
    let routes: [Route]
    let fleet: FleetSettings
    let dataDir: String
    let logger: Logger
    let timeZones: any TimeZoneLookup
    let clock: any WaitClock
    public let metrics: SinkMetrics
    private let wake = Monitor()
    private let stopping = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let thread = Locked<pthread_t?>(nil)
    private let problemText = Locked<String?>("starting")

    /// Unacknowledged messages the broker hands this worker per partition: bounds its memory
    /// (messages are at most 1 MB; quorum queues have no per-channel limit).
    static let prefetch = 4
    /// Heartbeats: a write to a slow sink must not look like a dead worker.
    static let heartbeat = 60
    /// How often a worker compares what it holds with its share of the sink's partitions.
    static let rebalanceInterval = 10.0

    // The thread's own.
    private var connection: AMQPConnection?
    private var nextBroker = 0
    private var connectFailures = 0
    private let states: PartitionStates
    private let machines: FleetMachines
    private var held: [Int: Held] = [:]
    /// The consumer tag of each partition queue on this connection: `p<n>`, then `p<n>.<k>`
    /// after the k-th time this worker handed it on and joined its line again.
    private var tags: [Int: String] = [:]
    private var handovers = 0
    private var lastRebalanceAt = monotonicSeconds()
    private var sink: (any Sink)?
    private var delivery: BatchDelivery?
    private var lastProbeAt = -Double.infinity
    private var lastIdleAt = -Double.infinity

    /// A partition this worker takes now: its transforms, the epoch it claimed, and the
    /// messages its saved state already holds.
    final class Held {
        let routes: SinkRoutes
        let epoch: Int64
        var applied: Set<String>

        init(routes: SinkRoutes, epoch: Int64, applied: Set<String>) {
            self.routes = routes
            self.epoch = epoch
            self.applied = applied
        }
    }

    public init(
        name: String, built: BuiltSink, routes: [Route], fleet: FleetSettings, dataDir: String, logger: Logger,
        clock: any WaitClock = SystemClock(), timeZones: any TimeZoneLookup = SystemTimeZones(), metrics: SinkMetrics? = nil
    ) {
        self.name = name
        self.built = built
        self.routes = routes
        self.fleet = fleet
        self.dataDir = dataDir
        self.logger = logger
        self.clock = clock
        self.timeZones = timeZones
        self.metrics = metrics ?? SinkMetrics(name: name)
        states = PartitionStates(url: fleet.state, holder: FleetMachines.me)
        machines = FleetMachines(url: fleet.state)
    }

    /// Why this worker cannot deliver now (no broker, no state database, a sink that will not
    /// open); nil while it can. For `/healthz`.
    public var problem: String? { problemText.withLock { $0 } }

    public func start() throws(IOError) {
        switch startThread({ [self] in
            run()
            wake.withLock {
                finished.store(true, ordering: .releasing)
                wake.broadcast()
            }
        }) {
        case .success(let t): thread.withLock { $0 = t }
        case .failure(let e): throw IOError("pthread_create", name, code: e.code)
        }
    }

    public func requestStop() {
        wake.withLock {
            stopping.store(true, ordering: .releasing)
            wake.broadcast()
        }
    }

    /// Stops after the write in progress (its messages, unacknowledged, go to the next worker)
    /// and waits up to `deadline` seconds.
    public func stop(within deadline: Double) {
        requestStop()
        guard
            let t = thread.withLock({ t -> pthread_t? in
                defer { t = nil }; return t
            })
        else { return }
        let done: Bool = wake.withLock {
            let until = monotonicSeconds() + deadline
            while !finished.load(ordering: .acquiring) && monotonicSeconds() < until {
                wake.wait(seconds: until - monotonicSeconds())
            }
            return finished.load(ordering: .acquiring)
        }
        if done { pthread_join(t, nil) } else { pthread_detach(t) }
    }

    private var isStopping: Bool { stopping.load(ordering: .acquiring) }

    // MARK: The loop

    private func run() {
        defer {
            sink?.close()
            connection?.close()
            states.close()
            machines.close()
        }
        guard openSink() else { return }
        while !isStopping {
            guard let c = connected() else { continue }
            do throws(AMQPConnection.Failure) {
                let batch = try collect(from: c)
                if batch.isEmpty {
                    if c.consumerCancelled { throw AMQPConnection.Failure(description: "the broker cancelled the consumer") }
                    try idle(c)
                } else {
                    try handle(batch, on: c)
                }
                try rebalance(c)
            } catch {
                drop("\(error)")
            }
        }
    }

    /// The messages waiting, up to a batch's worth: the first within a second, the rest within
    /// the sink's `max_wait` of it.
    private func collect(from c: AMQPConnection) throws(AMQPConnection.Failure) -> [AMQPConnection.Delivery] {
        guard let first = try c.nextDelivery(timeout: 1) else { return [] }
        var batch = [first]
        var lines = FleetWorker.lines(first.body)
        var bytes = first.body.count
        let until = monotonicSeconds() + built.common.batch.maxWaitSeconds
        while lines < built.common.batch.maxItems && bytes < 8 << 20 && !isStopping {
            let left = until - monotonicSeconds()
            guard left > 0, let d = try c.nextDelivery(timeout: left) else { break }
            lines += FleetWorker.lines(d.body)
            bytes += d.body.count
            batch.append(d)
        }
        return batch
    }

    static func lines(_ body: [UInt8]) -> Int { body.withUnsafeBytes { b in b.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 } } }

    /// Routes, writes, saves the partitions' state, acknowledges: in that order, so that an
    /// acknowledged message is in the sink (or its dead letters) and in the state. Returns
    /// without acknowledging when stopping; the broker then gives the messages to a worker again.
    @discardableResult
    private func handle(_ batch: [AMQPConnection.Delivery], on c: AMQPConnection) throws(AMQPConnection.Failure) -> Bool {
        var out: [Record] = []
        var applied: [Int: [String]] = [:]
        var published: [Int: Int64] = [:]
        var filtered = 0
        var again = 0
        let letters = deadLetters()
        for d in batch {
            guard let p = partition(of: d.consumer) else {
                letters.keep(
                    line: d.body[...], reason: "a message for consumer \(String(reflecting: d.consumer)), which is none of this worker's")
                continue
            }
            guard let h = try claim(p) else { return false }
            if let id = d.messageID, h.applied.contains(id) {
                again += 1
                continue
            }
            Record.forEach(
                in: d.body,
                bad: { index, line, error in
                    letters.keep(line: line, reason: "line \(index + 1) of a message is not a canonical record: \(error)")
                }
            ) { r, _ in
                if !h.routes.process(r, into: &out) { filtered += 1 }
            }
            applied[p, default: []].append(d.messageID ?? "")
            if let t = d.published { published[p] = max(published[p] ?? t, t) }
        }
        for p in applied.keys.sorted() { held[p]?.routes.flush(into: &out) }
        if filtered > 0 { metrics.filtered.add(filtered, ordering: .relaxed) }
        if again > 0 {
            logger.info("sink \(name): \(again) message(s) delivered again were already in the sink and its state; acknowledged")
        }
        if !out.isEmpty {
            guard deliver(out) else { return false }
        }
        guard save(applied, published: published) else { return false }
        try c.ack(batch[batch.count - 1].tag, multiple: true)
        problemText.withLock { $0 = nil }
        return true
    }

    /// The partition whose queue a message was taken from, by its consumer's tag.
    private func partition(of tag: String) -> Int? {
        guard tag.hasPrefix("p"), let p = Int(tag.dropFirst().prefix { $0 != "." }), tags[p] == tag else { return nil }
        return p
    }

    /// The partition as this worker holds it, claimed (with its saved state) the first time it
    /// comes; nil when stopping before the state database answered.
    private func claim(_ p: Int) throws(AMQPConnection.Failure) -> Held? {
        if let h = held[p] { return h }
        var failures = 0
        while !isStopping {
            let claimed: PartitionStates.Claim?
            do throws(PartitionStates.Failure) {
                claimed = try states.claim(sink: name, partition: p)
            } catch {
                failures += 1
                note("cannot claim partition \(p): \(error)", failures: failures)
                guard try pause(built.common.retry.cap(afterFailures: failures)) else { return nil }
                continue
            }
            guard let c = claimed else {
                // Its last worker is delivering what it was sent of it: after that, its state
                // is complete and the order of the device's records kept.
                guard try pause(0.1) else { return nil }
                continue
            }
            let routes = SinkRoutes(routes: routes, sink: name, clock: clock, timeZones: timeZones, logger: logger)
            routes.restore(c.states, logger: logger)
            // What the sink has of this partition's devices may be from an earlier hold: the
            // saved state replaces it.
            do {
                try sink?.restoreState(c.states[SinkDrainer.sinkStateKey] ?? [], of: scope(p))
            } catch {
                logger.error("sink \(name): partition \(p)'s saved state cannot be read (\(error)); it starts empty")
                try? sink?.restoreState([], of: scope(p))
            }
            let h = Held(routes: routes, epoch: c.epoch, applied: c.applied)
            held[p] = h
            return h
        }
        return nil
    }

    /// Saves the state of the partitions whose messages were applied, with those messages' ids.
    /// False when stopping first, or when a partition was claimed by another worker meanwhile
    /// (then this connection is given up: the broker moved the partition, its messages are
    /// the other worker's).
    private func save(_ applied: [Int: [String]], published: [Int: Int64] = [:]) -> Bool {
        let saves = applied.keys.sorted().compactMap { p in
            held[p].map { h in
                PartitionStates.Save(
                    partition: p, epoch: h.epoch, states: states(of: p, h), applied: applied[p]!.filter { !$0.isEmpty },
                    lastPublished: published[p])
            }
        }
        var failures = 0
        while !isStopping {
            do throws(PartitionStates.Failure) {
                let fenced = try states.save(sink: name, saves)
                if !fenced.isEmpty {
                    drop("partition(s) \(fenced.map(String.init).joined(separator: ", ")) were claimed by another worker")
                    return false
                }
                for s in saves { held[s.partition]?.applied = Set(s.applied) }
                return true
            } catch {
                failures += 1
                note("cannot save the transforms' state: \(error)", failures: failures)
                guard (try? pause(built.common.retry.cap(afterFailures: failures))) == true else { return false }
            }
        }
        return false
    }

    /// A partition's state: its transforms' and the sink's of the partition's devices.
    private func states(of p: Int, _ h: Held) -> [String: [UInt8]] {
        var states = h.routes.states
        if let s = sink?.saveState(of: scope(p)) { states[SinkDrainer.sinkStateKey] = s }
        return states
    }

    /// The devices of partition `p`.
    private func scope(_ p: Int) -> DeviceScope {
        let partitions = fleet.partitions
        return DeviceScope { FleetQueues.partition(of: $0, among: partitions) == p }
    }

    /// Writes records until each is accepted or dead-lettered; false when stopping, or when the
    /// connection was lost meanwhile (its messages are then another worker's).
    private func deliver(_ records: [Record]) -> Bool {
        guard delivery != nil else { return false }
        var start = 0
        while start < records.count {
            let end = min(records.count, start + built.common.batch.maxItems)
            let outcome = delivery!.deliver(
                Array(records[start..<end]), wait: { [self] seconds in (try? pause(seconds)) == true },
                abandon: { [self] in connection?.isOpen != true })
            guard outcome == .delivered else { return false }
            start = end
        }
        return true
    }

    /// Nothing came: the sink's and the transforms' time-driven work.
    private func idle(_ c: AMQPConnection) throws(AMQPConnection.Failure) {
        let now = monotonicSeconds()
        if now - lastIdleAt >= 1 {
            lastIdleAt = now
            sink?.idle()
            if let s = sink { metrics.report = s.report() }
            var out: [Record] = []
            var ticked: [Int: [String]] = [:]
            for (p, h) in held {
                let before = out.count
                h.routes.tick(now: clock.now(), into: &out)
                h.routes.flush(into: &out)
                if out.count > before { ticked[p] = Array(h.applied) }
            }
            if !out.isEmpty, deliver(out) { _ = save(ticked) }
        }
        if now - lastProbeAt >= 30, let s = sink {
            lastProbeAt = now
            metrics.reachability = s.probe()
        }
        if problem != nil && connection != nil { problemText.withLock { $0 = nil } }
    }

    // MARK: Sharing the partitions

    /// Every `rebalanceInterval`, while it delivers well: a worker holding more than its share
    /// of the sink's partitions (the partitions over the deliver machines alive) hands the
    /// extra on. The broker gives each queue to the first consumer in its line; a worker that
    /// stops consuming one and joins again goes to the back of that line.
    private func rebalance(_ c: AMQPConnection) throws(AMQPConnection.Failure) {
        let now = monotonicSeconds()
        guard now - lastRebalanceAt >= FleetWorker.rebalanceInterval, problem == nil, held.count > 1 else { return }
        lastRebalanceAt = now
        guard let workers = try? machines.deliverers(seenWithin: 30), workers > 1 else { return }
        let share = (fleet.partitions + workers - 1) / workers
        for p in held.keys.sorted().dropFirst(share) where c.isOpen && !isStopping {
            try release(p, on: c, workers: workers)
        }
    }

    /// Hands partition `p` on: marks the handover in the state (the next worker's claim waits
    /// for its end), stops consuming the queue, delivers and acknowledges what the broker had
    /// sent of it, ends the handover and joins the queue's line again, at its back.
    private func release(_ p: Int, on c: AMQPConnection, workers: Int) throws(AMQPConnection.Failure) {
        guard let h = held[p], let tag = tags[p] else { return }
        guard (try? states.beginHandover(sink: name, partition: p, epoch: h.epoch)) == true else { return }
        try c.cancel(tag: tag)
        var sent: [AMQPConnection.Delivery] = []
        while let d = try c.nextDelivery(timeout: 0.05) { sent.append(d) }
        let delivered = sent.isEmpty ? true : try handle(sent, on: c)
        try? states.endHandover(sink: name, partition: p, epoch: h.epoch)
        // Not acknowledged (stopping, or the partition was claimed meanwhile): the connection
        // goes, and the messages with it, to the next worker.
        guard delivered else { return }
        held[p] = nil
        handovers += 1
        tags[p] = "p\(p).\(handovers)"
        try c.consume(queue: FleetQueues.queue(sink: name, partition: p), prefetch: FleetWorker.prefetch, tag: tags[p]!)
        logger.info("sink \(name): partition \(p) handed on; this worker holds \(held.count), its share for \(workers) worker(s)")
    }

    // MARK: Connection, sink, waiting

    /// The connection, consuming every partition queue of the sink, made with the next broker
    /// that takes it; nil after a pause when none did. A new connection holds no partition yet:
    /// what the transforms saw since the last save was not acknowledged, and comes again.
    private func connected() -> AMQPConnection? {
        if let c = connection, c.isOpen { return c }
        held = [:]
        tags = Dictionary(uniqueKeysWithValues: (0..<fleet.partitions).map { ($0, FleetQueues.key($0)) })
        let queues = FleetQueues(sinks: [name], partitions: fleet.partitions)
        do throws(AMQPConnection.Failure) {
            let (c, broker) = try queues.connect(fleet.brokers, from: nextBroker, timeout: { 5 }, heartbeat: FleetWorker.heartbeat) {
                c throws(AMQPConnection.Failure) in
                for p in 0..<fleet.partitions {
                    try c.consume(
                        queue: FleetQueues.queue(sink: name, partition: p), prefetch: FleetWorker.prefetch, tag: FleetQueues.key(p))
                }
            }
            nextBroker = broker
            connectFailures = 0
            connection = c
            logger.info("sink \(name): consuming its \(fleet.partitions) partition queue(s) through \(c.url.shown)")
            return c
        } catch {
            // Said at the first failure and every tenth (20 s) after, not every 2 s.
            connectFailures += 1
            note("no broker takes its consumer: \(error)", failures: connectFailures)
            _ = try? pause(2)
            return nil
        }
    }

    /// Gives up the connection (its unacknowledged messages go back to their queues) and the
    /// partitions with it: they are claimed again when their messages come.
    private func drop(_ why: String) {
        if connection != nil { logger.warning("sink \(name): the broker connection is given up: \(why)") }
        connection?.close()
        connection = nil
        held = [:]
        nextBroker += 1
        problemText.withLock { $0 = why }
    }

    private func note(_ why: String, failures: Int) {
        problemText.withLock { $0 = why }
        if failures == 1 || failures % 10 == 0 { logger.error("sink \(name): \(why)") }
    }

    /// The dead letters of this sink: lines published to its dead-letter queue, confirmed.
    private func deadLetters() -> DeadLetters {
        let queue = FleetQueues.deadLetterQueue(sink: name)
        let outlet = DeadLetters.Outlet(name: "the dead-letter queue \(queue)") { [self] lines in
            guard let c = connection, c.isOpen else { return false }
            do throws(AMQPConnection.Failure) {
                try c.publish(exchange: "", key: queue, body: lines)
                try c.waitForConfirms(until: monotonicSeconds() + 10)
                return true
            } catch {
                return false
            }
        }
        return DeadLetters(sink: name, dataDir: dataDir, metrics: metrics, logger: logger, clock: clock, outlet: outlet)
    }

    /// Opens the sink, trying again with backoff; false when stopping first.
    private func openSink() -> Bool {
        var failures = 0
        while sink == nil && !isStopping {
            let context = SinkContext(
                name: name, dataDir: dataDir, stateDir: SinkDrainer.stateDirectory(sink: name, dataDir: dataDir), clock: clock,
                logger: logger.child("sink \(name)"))
            do {
                let s = try built.open(context)
                sink = s
                delivery = BatchDelivery(
                    sink: s, name: name, retry: built.common.retry, metrics: metrics, deadLetters: deadLetters(),
                    logger: logger, clock: clock)
            } catch {
                failures += 1
                metrics.lastError = "cannot open: \(error)"
                note("cannot open: \(error)", failures: failures)
                _ = try? pause(built.common.retry.cap(afterFailures: failures))
            }
        }
        return sink != nil
    }

    /// Waits `seconds`, answering the broker meanwhile (rabbitmq-c keeps heartbeats only inside
    /// its calls; deliveries that come wait in the connection). False when stopping.
    private func pause(_ seconds: Double) throws(AMQPConnection.Failure) -> Bool {
        let until = monotonicSeconds() + seconds
        while !isStopping {
            let left = until - monotonicSeconds()
            if left <= 0 { return true }
            if let c = connection, c.isOpen {
                try c.service(waiting: min(left, 1))
            } else {
                wake.withLock { if !isStopping { wake.wait(seconds: min(left, 1)) } }
            }
        }
        return false
    }
}

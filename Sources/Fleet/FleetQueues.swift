import HealthgateCore

/// The broker's layout, one place: every record is published to one direct exchange with its
/// device's partition as the routing key; each sink has a quorum queue per partition, bound
/// under that key, so a record reaches every sink's queue of its partition (a sink that is
/// down holds back only its own queues, as on one machine). Names are made of the sink's name
/// (config: `[A-Za-z0-9_-]`) and numbers only.
public struct FleetQueues: Sendable, Equatable {
    public static let exchange = "healthgate.records"
    /// Deliveries of one message past this many (crashed workers count) go to the sink's dead letters.
    public static let deliveryLimit = 100

    public var sinks: [String]
    public var partitions: Int

    public init(sinks: [String], partitions: Int) {
        self.sinks = sinks
        self.partitions = partitions
    }

    /// The partition of a device's records: the same on every machine and every start (FNV-1a
    /// of its UTF-8, not Swift's per-process seeded `Hasher`), so per-device order holds.
    /// Changing `partitions` moves devices: drain the queues first.
    public static func partition(of device: String, among partitions: Int) -> Int {
        Int(FNV1a.hash(device.utf8) % UInt64(max(1, partitions)))
    }

    public static func key(_ partition: Int) -> String { "p\(partition)" }

    public static func queue(sink: String, partition: Int) -> String { "healthgate.\(sink).p\(partition)" }

    /// A sink's dead letters: what it rejected (as `dead-letters.ndjson` lines), and the
    /// messages past the delivery limit (as they were published). `replay --sink` reads it.
    public static func deadLetterQueue(sink: String) -> String { "healthgate.\(sink).dead" }

    /// Declares the exchange, each sink's queues and their bindings (idempotent: the same
    /// arguments each time; a queue declared with others is a channel error, said as such).
    public func declare(on c: AMQPConnection) throws(AMQPConnection.Failure) {
        try c.declareExchange(FleetQueues.exchange)
        for sink in sinks {
            let dead = FleetQueues.deadLetterQueue(sink: sink)
            try c.declareQueue(dead)
            for p in 0..<partitions {
                let q = FleetQueues.queue(sink: sink, partition: p)
                try c.declareQueue(
                    q, singleActiveConsumer: true, deliveryLimit: FleetQueues.deliveryLimit, deadLetterExchange: "",
                    deadLetterKey: dead)
                try c.bind(queue: q, exchange: FleetQueues.exchange, key: FleetQueues.key(p))
            }
        }
    }

    /// A connection to the first of `brokers`, from `start` on, that takes it within `timeout()`
    /// seconds (nil: no time left to try another), with this layout declared, publisher
    /// confirms on, and `prepare` done; with its broker's index. Every machine's way in.
    public func connect(
        _ brokers: [AMQPURL], from start: Int = 0, timeout: () -> Double?, heartbeat: Int = 10,
        prepare: (AMQPConnection) throws(AMQPConnection.Failure) -> Void = { _ throws(AMQPConnection.Failure) in }
    ) throws(AMQPConnection.Failure) -> (connection: AMQPConnection, broker: Int) {
        var reasons: [String] = []
        for i in 0..<brokers.count {
            guard let seconds = timeout() else { break }
            let index = (start + i) % brokers.count
            do throws(AMQPConnection.Failure) {
                let c = try AMQPConnection(url: brokers[index], timeout: seconds, heartbeat: heartbeat)
                try declare(on: c)
                try c.selectConfirms()
                try prepare(c)
                return (c, index)
            } catch {
                reasons.append("\(error)")
            }
        }
        throw AMQPConnection.Failure(
            description: reasons.isEmpty ? "no time was left to try a broker" : reasons.joined(separator: "; "))
    }
}

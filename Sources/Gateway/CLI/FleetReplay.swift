import CanonicalJSON
import FastJSON
import Fleet
import HealthgateCore
import Posix

/// `healthgate replay` with a `fleet:` config: records go back through the brokers and the
/// deliver machines deliver them, as they do everything else (one worker per sink and
/// partition, ever). `replay FILE` publishes a file's records as ingest would (every sink, its
/// routes applied by the workers); with `--sink NAME`, into that sink's queues only, as they
/// are. `replay --sink NAME` alone takes the sink's dead-letter queue: each message's records go
/// back to the sink's queues, and the message is acknowledged once the brokers confirmed them.
struct FleetReplay {
    let fleet: FleetSettings
    let sinks: [String]
    let decode: (ArraySlice<UInt8>) -> CanonicalRecord?

    /// A connection to the first broker that takes it, the fleet's queues declared, in confirm mode.
    func connect() throws -> AMQPConnection {
        do throws(AMQPConnection.Failure) {
            return try FleetQueues(sinks: sinks, partitions: fleet.partitions).connect(fleet.brokers, timeout: { 10 }).connection
        } catch {
            throw ServiceError("no broker took the connection: \(error)")
        }
    }

    /// Publishes `records` (to every sink, or to `sink`'s queues) and waits until the brokers
    /// confirmed them.
    func publish(_ records: [CanonicalRecord], sink: String?, on c: AMQPConnection) throws {
        guard !records.isEmpty else { return }
        var batch = ReceivedBatch()
        for r in records { batch.append(r) }
        for m in FleetMessages.make(batch, partitions: fleet.partitions) {
            if let sink, let p = Int(m.key.dropFirst()) {
                try c.publish(exchange: "", key: FleetQueues.queue(sink: sink, partition: p), body: m.body)
            } else {
                try c.publish(exchange: FleetQueues.exchange, key: m.key, body: m.body)
            }
        }
        try c.waitForConfirms(until: monotonicSeconds() + 30)
    }

    /// Sends what waits in `sink`'s dead-letter queue back to its queues: as many messages as
    /// waited when it began (what the sink rejects again meanwhile waits for the next replay).
    /// A message with a line that is no record stays in the queue, said.
    func replayDeadLetters(sink: String) throws -> Int32 {
        let c = try connect()
        defer { c.close() }
        let queue = FleetQueues.deadLetterQueue(sink: sink)
        let waiting = try c.depth(of: queue)
        if waiting == 0 {
            print("sink \(sink): its dead-letter queue \(queue) is empty: nothing to replay")
            return 0
        }
        try c.consume(queue: queue, prefetch: 100, tag: "replay")
        var (taken, records, left) = (0, 0, 0)
        while taken < waiting, let d = try c.nextDelivery(timeout: 5) {
            taken += 1
            var unreadable = 0
            var found: [CanonicalRecord] = []
            for line in d.body.split(separator: 0x0A, omittingEmptySubsequences: true) {
                if let r = decode(line) { found.append(r) } else { unreadable += 1 }
            }
            try publish(found, sink: sink, on: c)
            records += found.count
            if unreadable == 0 {
                try c.ack(d.tag)
            } else {
                left += 1
                printErr("a message of \(queue) holds \(unreadable) line(s) that are no record: it stays in the queue")
            }
        }
        print(
            "sink \(sink): \(records) record(s) of \(taken) dead-letter message(s) are back in its queues; the deliver "
                + "machines deliver them" + (left > 0 ? " (\(left) message(s) stay in \(queue))" : ""))
        return left > 0 ? 1 : 0
    }
}

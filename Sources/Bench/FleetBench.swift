import Fleet
import Foundation
import Glibc
import HealthgateTesting
import Posix

/// `make bench`'s fleet row: the postgres sink's 1 MB × 8 run again through an ingest machine, a
/// three-node RabbitMQ cluster on loopback and a deliver machine, beside the broker's own ceiling
/// (as many records, in 1 MB messages, published with confirms by 8 publishers to the partition
/// queues and consumed by one consumer, measured alone in the same run) and the one-machine row.
enum FleetBench {
    static let partitions = 16
    static let senders = 8

    struct Result {
        var m: Measurement
        /// The broker alone: records and messages a second.
        var brokerRecords: Double
        var brokerMessages: Double
    }

    static func run(binary: String, dir: String, seconds: Double, maxSamples: Int) -> Result? {
        let cluster: RabbitMQCluster
        do {
            cluster = try RabbitMQCluster(nodes: 3)
        } catch {
            print("fleet: no RabbitMQ cluster (\(error)): no fleet row")
            return nil
        }
        let target = BenchTarget(.postgres, dir: dir + "/postgres")
        defer { target.stop() }
        guard let dsn = target.postgresDSN else { return nil }
        let urls = (0..<3).map { cluster.url($0) }
        guard let broker = ceiling(urls: urls, records: maxSamples) else { return nil }
        print(String(format: "fleet: the broker's own ceiling (publish with confirms, consume): %.0f records/s", broker.records))

        let fleet = """

            fleet:
              brokers: [\(urls.map { "\"\($0)\"" }.joined(separator: ", "))]
              state: "\(dsn)"
              partitions: \(partitions)
            """
        target.reset()
        let runDir = dir + "/run"
        let template = BenchMain.makeBody(samples: Suite.samplesFor(bytes: 1_000_000))
        let m = BenchMain.measure(
            binary: binary,
            config: BenchMain.config(dataDir: runDir + "/ingest", transforms: false, sinkLine: target.sinkLine) + fleet,
            dir: runDir, template: template, connections: senders, seconds: seconds, maxSamples: maxSamples, run: 1,
            fleetDeliver: BenchMain.config(dataDir: runDir + "/deliver", transforms: false, sinkLine: target.sinkLine) + fleet)
        return Result(m: m, brokerRecords: broker.records, brokerMessages: broker.messages)
    }

    /// About `records` canonical lines in 1 MB messages, published by `senders` publishers
    /// (each waiting for its message's confirm, as an ingest machine waits for a request's) to
    /// the partition queues of their own, and consumed and acknowledged by one consumer meanwhile:
    /// records and messages a second, from the first publish to the last acknowledgement.
    static func ceiling(urls: [String], records: Int) -> (records: Double, messages: Double)? {
        let line = Array(
            (#"{"v":1,"op":"upsert","kind":"quantity","device":"d_benchbenchbenchbench0","receiver":"phone","uuid":"00000000-0000-0000-0000-000000000000","type":"heart_rate","start":"2026-12-01T07:00:00Z","end":"2026-12-01T07:00:00Z","value":72,"unit":"count/min","source":{"app":"com.apple.health"}}"#
                + "\n").utf8)
        let perMessage = 1_000_000 / line.count
        let body = Array([[UInt8]](repeating: line, count: perMessage).joined())
        let messages = max(senders * 4, (records + perMessage - 1) / perMessage)
        let queues = (0..<partitions).map { "healthgate-bench.ceiling.p\($0)" }
        do {
            let consumer = try AMQPConnection(url: try AMQPURL(urls[0]), timeout: 10)
            defer { consumer.close() }
            for q in queues { try consumer.declareQueue(q) }
            for q in queues { try consumer.consume(queue: q, prefetch: 4, tag: q) }
            let failed = Locked<String?>(nil)
            let started = monotonicSeconds()
            let group = DispatchGroup()
            for s in 0..<senders {
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    do {
                        let c = try AMQPConnection(url: try AMQPURL(urls[s % urls.count]), timeout: 10)
                        defer { c.close() }
                        try c.selectConfirms()
                        for k in stride(from: s, to: messages, by: senders) {
                            try c.publish(exchange: "", key: queues[k % queues.count], body: body)
                            try c.waitForConfirms(until: monotonicSeconds() + 30)
                        }
                    } catch {
                        failed.withLock { $0 = "\(error)" }
                    }
                }
            }
            var consumed = 0
            while consumed < messages && failed.withLock({ $0 }) == nil && monotonicSeconds() - started < 300 {
                guard let d = try consumer.nextDelivery(timeout: 1) else { continue }
                try consumer.ack(d.tag)
                consumed += 1
            }
            group.wait()
            if let why = failed.withLock({ $0 }) {
                print("fleet: the broker's ceiling could not be measured: \(why)")
                return nil
            }
            let elapsed = monotonicSeconds() - started
            return (Double(consumed * perMessage) / elapsed, Double(consumed) / elapsed)
        } catch {
            print("fleet: the broker's ceiling could not be measured: \(error)")
            return nil
        }
    }

    /// The fleet's lines under the suite's table.
    static func report(_ r: Result, oneMachine: Suite.Row?, postgresCeiling: Double?) -> String {
        var out = "\n**A fleet** (`serve --role ingest` → RabbitMQ 3.10, three nodes on this machine → `serve --role deliver` → "
        out += "the postgres sink, \(partitions) partitions; 1 MB bodies × \(senders) senders, everything on the same cores):\n\n"
        out += "| | acknowledged samples/s | end to end samples/s | beside |\n| --- | --- | --- | --- |\n"
        if let o = oneMachine {
            out += "| one machine (the postgres row above) | \(Suite.thousands(o.m.ackRate)) | \(Suite.thousands(o.m.endToEndRate)) | "
            out += postgresCeiling.map { "PostgreSQL's ceiling \(Suite.thousands($0)) records/s" } ?? ""
            out += " |\n"
        }
        out += "| fleet | \(Suite.thousands(r.m.ackRate)) | \(Suite.thousands(r.m.endToEndRate)) | "
        out += "the broker alone (publish with confirms, consume): \(Suite.thousands(r.brokerRecords)) records/s "
        out += String(format: "(%.0f messages of 1 MB/s)", r.brokerMessages)
        out += r.m.failures > 0 ? "; \(r.m.failures) failed requests" : ""
        out += " |\n"
        return out
    }
}

import Fleet
import Foundation
import Glibc
import HealthgateCore
@testable import HealthgateTesting
import Posix
import Testing

/// The AMQP client against Debian's RabbitMQ: a three-node cluster on loopback, shared by the
/// suite (it takes some 20 s to form), its tests one after another (some kill nodes).
@Suite(.serialized) final class AMQPConnectionTests {
    static let shared = Locked<RabbitMQCluster?>(nil)

    /// The suite's cluster, started by the first test that needs it.
    static func cluster() throws -> RabbitMQCluster {
        try shared.withLock { c in
            if let c { return c }
            let made = try RabbitMQCluster(nodes: 3)
            c = made
            return made
        }
    }

    func connect(_ node: Int, _ cluster: RabbitMQCluster) throws -> AMQPConnection {
        try AMQPConnection(url: AMQPURL(cluster.url(node)), timeout: 10)
    }

    /// A quorum queue of its own, bound to a direct exchange under its own name.
    func queue(_ name: String, on c: AMQPConnection, singleActiveConsumer: Bool = false) throws {
        try c.declareExchange("hgtest")
        try c.declareQueue(name, singleActiveConsumer: singleActiveConsumer)
        try c.bind(queue: name, exchange: "hgtest", key: name)
    }

    @Test func aConfirmedPublishIsTakenFromAnotherNodeOnceAndGoneWhenAcknowledged() throws {
        let cluster = try Self.cluster()
        let publisher = try connect(0, cluster)
        try queue("confirmed", on: publisher)
        try publisher.selectConfirms()
        let bodies = (0..<50).map { i in Array("{\"n\":\(i)}\n".utf8) }
        for b in bodies { try publisher.publish(exchange: "hgtest", key: "confirmed", body: b) }
        try publisher.waitForConfirms(until: monotonicSeconds() + 20)

        let consumer = try connect(2, cluster)
        try consumer.consume(queue: "confirmed", prefetch: 100, tag: "t1")
        var got: [[UInt8]] = []
        while got.count < bodies.count, let d = try consumer.nextDelivery(timeout: 10) {
            #expect(!d.redelivered)
            got.append(d.body)
            try consumer.ack(d.tag)
        }
        #expect(got == bodies)
        // The broker settles acks on its own time: one in flight when the channel closes may be
        // delivered again (at least once). Wait until it settled them all.
        #expect(
            ServeProcess.eventually(20) {
                (try? cluster.ctl(0, ["list_queues", "-q", "name", "messages"]).1)?.contains("confirmed\t0") ?? false
            })
        consumer.close()
        // Acknowledged: a new consumer finds nothing.
        let again = try connect(1, cluster)
        try again.consume(queue: "confirmed", prefetch: 10, tag: "t2")
        #expect(try again.nextDelivery(timeout: 2) == nil)
    }

    @Test func aMessageNoQueueTakesIsRefusedNotConfirmed() throws {
        let cluster = try Self.cluster()
        let c = try connect(1, cluster)
        try c.declareExchange("hgtest")
        try c.selectConfirms()
        try c.publish(exchange: "hgtest", key: "no-such-queue", body: Array("x".utf8))
        #expect {
            try c.waitForConfirms(until: monotonicSeconds() + 10)
        } throws: { ($0 as? AMQPConnection.Failure)?.refused == true }
        // The connection is still good.
        try queue("after-refusal", on: c)
        try c.publish(exchange: "hgtest", key: "after-refusal", body: Array("y".utf8))
        try c.waitForConfirms(until: monotonicSeconds() + 10)
    }

    @Test func whatWasDeliveredAndNotAcknowledgedComesAgainToTheNextConsumer() throws {
        let cluster = try Self.cluster()
        let p = try connect(0, cluster)
        try queue("unacked", on: p)
        try p.selectConfirms()
        try p.publish(exchange: "hgtest", key: "unacked", body: Array("once".utf8))
        try p.waitForConfirms(until: monotonicSeconds() + 10)
        let first = try connect(1, cluster)
        try first.consume(queue: "unacked", prefetch: 1, tag: "a")
        let d = try #require(try first.nextDelivery(timeout: 10))
        #expect(!d.redelivered)
        first.close() // dies with it unacknowledged
        let second = try connect(2, cluster)
        try second.consume(queue: "unacked", prefetch: 1, tag: "b")
        let again = try #require(try second.nextDelivery(timeout: 10))
        #expect(again.body == Array("once".utf8))
        #expect(again.redelivered)
        try second.ack(again.tag)
    }

    @Test func aSingleActiveConsumerQueueFeedsOneConsumerUntilItGoes() throws {
        let cluster = try Self.cluster()
        let p = try connect(0, cluster)
        try queue("one-at-a-time", on: p, singleActiveConsumer: true)
        try p.selectConfirms()
        let a = try connect(1, cluster), b = try connect(2, cluster)
        try a.consume(queue: "one-at-a-time", prefetch: 10, tag: "a")
        try b.consume(queue: "one-at-a-time", prefetch: 10, tag: "b")
        for i in 0..<5 { try p.publish(exchange: "hgtest", key: "one-at-a-time", body: Array("\(i)".utf8)) }
        try p.waitForConfirms(until: monotonicSeconds() + 10)
        var toA: [String] = []
        while toA.count < 5, let d = try a.nextDelivery(timeout: 5) {
            toA.append(String(decoding: d.body, as: UTF8.self))
            try a.ack(d.tag)
        }
        #expect(toA == ["0", "1", "2", "3", "4"])
        #expect(try b.nextDelivery(timeout: 1) == nil)
        a.close()
        try p.publish(exchange: "hgtest", key: "one-at-a-time", body: Array("5".utf8))
        try p.waitForConfirms(until: monotonicSeconds() + 10)
        let toB = try #require(try b.nextDelivery(timeout: 10))
        #expect(toB.body == Array("5".utf8))
    }

    @Test func aWrongPasswordIsALoginFailureThatShowsNoPassword() throws {
        let cluster = try Self.cluster()
        let url = try AMQPURL("amqp://healthgate:wrong-hunter2@127.0.0.1:\(cluster.nodes[0].port)/%2f")
        #expect {
            _ = try AMQPConnection(url: url, timeout: 10)
        } throws: { e in
            let text = "\(e)"
            return text.contains("login") && !text.contains("hunter2")
        }
        let nobody = try AMQPURL("amqp://u:p@127.0.0.1:\(ScriptedEndpoint.freePort())/%2f")
        #expect(throws: AMQPConnection.Failure.self) { _ = try AMQPConnection(url: nobody, timeout: 5) }
    }

    /// It kills nodes. One node down leaves a quorum (2 of 3): publishes are confirmed.
    /// Two down leave none: a publish is not confirmed by the deadline — what ingest turns into a
    /// 503 — and is taken once the nodes are back.
    @Test func confirmsNeedAQuorumOfNodes() throws {
        let cluster = try Self.cluster()
        let setup = try connect(0, cluster)
        try queue("quorum", on: setup)
        setup.close()

        cluster.kill(1)
        defer {
            for n in [1, 2] where !cluster.isRunning(n) { try? cluster.start(n) }
            for n in [1, 2] { try? cluster.waitUntilUp(n) }
        }
        let p = try connect(0, cluster)
        try p.selectConfirms()
        try p.publish(exchange: "hgtest", key: "quorum", body: Array("with two of three".utf8))
        try p.waitForConfirms(until: monotonicSeconds() + 30)

        cluster.kill(2)
        // Not confirmed in time, or the node — now alone, and pausing as a minority — drops the
        // connection: either way no confirm, which is all ingest needs to answer 503.
        #expect(throws: AMQPConnection.Failure.self) {
            try p.publish(exchange: "hgtest", key: "quorum", body: Array("with one of three".utf8))
            try p.waitForConfirms(until: monotonicSeconds() + 3)
        }

        try cluster.start(1)
        try cluster.start(2)
        try cluster.waitUntilUp(1)
        try cluster.waitUntilUp(2)
        let c = try connect(1, cluster)
        try c.consume(queue: "quorum", prefetch: 10, tag: "q")
        var got: [String] = []
        while let d = try c.nextDelivery(timeout: 15) {
            got.append(String(decoding: d.body, as: UTF8.self))
            try c.ack(d.tag)
            if got.count == 2 { break }
        }
        #expect(got.first == "with two of three")
    }

    // MARK: The ingest side's publisher

    static let quiet = Logger(component: "test", sink: MemoryLogSink())

    func publisher(_ cluster: RabbitMQCluster, sinks: [String], partitions: Int, timeout: Double = 10) throws -> FleetPublisher {
        try FleetPublisher(
            brokers: try (0..<3).map { try AMQPURL(cluster.url($0)) }, queues: FleetQueues(sinks: sinks, partitions: partitions),
            timeout: timeout, logger: Self.quiet)
    }

    /// Every message waiting in `queue`, taken and acknowledged.
    func drain(_ queue: String, _ cluster: RabbitMQCluster) throws -> [String] {
        let c = try connect(1, cluster)
        try c.consume(queue: queue, prefetch: 500, tag: "drain")
        var out: [String] = []
        while let d = try c.nextDelivery(timeout: 1) {
            out.append(String(decoding: d.body, as: UTF8.self))
            try c.ack(d.tag)
        }
        return out
    }

    @Test func concurrentRequestsAreEachConfirmedAndReachEverySinksQueueOfTheirPartition() throws {
        let cluster = try Self.cluster()
        let p = try publisher(cluster, sinks: ["pubA", "pubB"], partitions: 4)
        defer { p.stop() }
        let failures = Locked(0)
        let threads = (0..<8).map { t in
            startThreadForTest {
                for r in 0..<5 {
                    let messages = (0..<3).map { m in
                        let device = "phone-\(t)-\(m)"
                        let part = FleetQueues.partition(of: device, among: 4)
                        return (key: FleetQueues.key(part), body: Array("\(device) \(r)".utf8))
                    }
                    do { try p.publish(messages) } catch { failures.withLock { $0 += 1 } }
                }
            }
        }
        threads.forEach { pthread_join($0, nil) }
        #expect(failures.withLock { $0 } == 0)
        for sink in ["pubA", "pubB"] {
            var all: [String] = []
            for part in 0..<4 {
                let got = try drain(FleetQueues.queue(sink: sink, partition: part), cluster)
                // Each device's records in its own partition's queue, in the order they were sent.
                for line in got {
                    let device = String(line.split(separator: " ")[0])
                    #expect(FleetQueues.partition(of: device, among: 4) == part)
                }
                for device in Set(got.map { String($0.split(separator: " ")[0]) }) {
                    let rounds = got.filter { $0.hasPrefix(device + " ") }.map { Int($0.split(separator: " ")[1])! }
                    #expect(rounds == Array(0..<5))
                }
                all += got
            }
            #expect(all.count == 8 * 5 * 3)
        }
    }

    @Test func aDevicesPartitionIsTheSameOnEveryMachineAndStart() {
        // FNV-1a of the name: fixed values, whatever process computes them.
        #expect(FleetQueues.partition(of: "", among: 16) == Int(UInt64(0xcbf2_9ce4_8422_2325) % 16))
        #expect(
            FleetQueues.partition(of: "d_benchbenchbenchbench0", among: 16)
                == FleetQueues.partition(of: "d_benchbenchbenchbench0", among: 16))
        let spread = Set((0..<200).map { FleetQueues.partition(of: "phone-\($0)", among: 16) })
        #expect(spread.count == 16)
        #expect((0..<200).allSatisfy { (0..<16).contains(FleetQueues.partition(of: "phone-\($0)", among: 16)) })
    }

    @Test func whenItsBrokerDiesThePublisherGoesOnThroughAnother() throws {
        let cluster = try Self.cluster()
        let p = try publisher(cluster, sinks: ["failover"], partitions: 1)
        defer { p.stop() }
        try p.publish([(key: FleetQueues.key(0), body: Array("before".utf8))])
        cluster.kill(0) // the broker it is connected to: the first of its list
        defer {
            if !cluster.isRunning(0) { try? cluster.start(0) }
            try? cluster.waitUntilUp(0)
        }
        try p.publish([(key: FleetQueues.key(0), body: Array("after".utf8))])
        let got = try drain(FleetQueues.queue(sink: "failover", partition: 0), cluster)
        #expect(got.contains("before") && got.contains("after"))
    }

    @Test func withoutAQuorumARequestFailsWithinItsTimeoutAndTheNextOneGoesThroughOnceItIsBack() throws {
        let cluster = try Self.cluster()
        let p = try publisher(cluster, sinks: ["noquorum"], partitions: 1, timeout: 4)
        defer { p.stop() }
        try p.publish([(key: FleetQueues.key(0), body: Array("1".utf8))])
        try cluster.withNodesDown([1, 2]) {
            let started = monotonicSeconds()
            #expect(throws: FleetPublisher.Failure.self) { try p.publish([(key: FleetQueues.key(0), body: Array("2".utf8))]) }
            #expect(monotonicSeconds() - started < 6)
        }
        #expect(
            ServeProcess.eventually(60) {
                (try? p.publish([(key: FleetQueues.key(0), body: Array("3".utf8))])) != nil
            })
    }

    // MARK: serve --role ingest

    /// An ingest machine answers 2xx once the brokers confirmed the request's records, which are
    /// then in every sink's queue of their partition (the lines the journal would have held),
    /// and nothing of them in its own journal; without a quorum it answers 503 with Retry-After.
    @Test func anIngestMachineAnswers2xxOnlyForRecordsTheBrokersConfirmed() throws {
        let cluster = try Self.cluster()
        let brokers = (0..<3).map { "\"\(cluster.url($0))\"" }.joined(separator: ", ")
        let serve = try ServeProcess(
            config: """
                listen: 127.0.0.1:0
                data_dir: DATA_DIR
                receivers:
                  lp: {kind: influx, device: lab-phone, auth: {type: bearer, token: tok-ingest-0123456789}}
                routes:
                  - {from: [lp], to: [archive, db]}
                sinks:
                  archive: {kind: file, path: "archive.ndjson"}
                  db: {kind: file, path: "db.ndjson"}
                fleet:
                  brokers: [\(brokers)]
                  state: "postgres://healthgate@127.0.0.1/unused"
                  partitions: 4
                """, arguments: ["--role", "ingest"])
        defer { serve.stop() }
        let auth = [("Authorization", "Bearer tok-ingest-0123456789")]
        let body = "heart_rate,source=watch value=72 1760400000\nheart_rate,source=watch value=75 1760400060\n"
        let r = try serve.client().request("POST", "/api/v2/write?precision=s", headers: auth, body: Array(body.utf8))
        #expect(r.status == 204, "\(r.status) \(r.text) \(serve.stderrText)")
        let partition = FleetQueues.partition(of: "lab-phone", among: 4)
        for sink in ["archive", "db"] {
            let got = try drain(FleetQueues.queue(sink: sink, partition: partition), cluster)
            let lines = got.flatMap { $0.split(separator: "\n").map(String.init) }
            #expect(lines.count == 2, "\(sink): \(got)")
            #expect(lines.allSatisfy { $0.contains("\"device\":\"lab-phone\"") && $0.contains("\"type\":\"heart_rate\"") })
            #expect(lines.first?.contains("\"value\":72") == true)
        }
        // Nothing stays on the machine's own disk: its journal holds no entry, no sink runs here.
        let journal = (try? FileManager.default.contentsOfDirectory(atPath: serve.dataDir + "/journal")) ?? []
        let journaled = journal.reduce(0) {
            $0 + ((try? FileManager.default.attributesOfItem(atPath: serve.dataDir + "/journal/" + $1)[.size] as? Int) ?? 0)
        }
        #expect(journaled == 0, "\(journal)")
        #expect(!FileManager.default.fileExists(atPath: serve.dataDir + "/archive.ndjson"))

        // /healthz: the machine can do its role while a broker takes its publishes.
        let healthy = try serve.client().request("GET", "/healthz")
        #expect(healthy.status == 200 && healthy.text.contains("\"role\":\"ingest\""), "\(healthy.text)")

        // No quorum: 503 with Retry-After, within the publisher's timeout; /healthz says so.
        try cluster.withNodesDown([1, 2]) {
            let started = monotonicSeconds()
            let refused = try serve.client().request("POST", "/api/v2/write?precision=s", headers: auth, body: Array(body.utf8))
            #expect(refused.status == 503, "\(refused.status) \(refused.text)")
            #expect(refused.headers.contains { $0.0.lowercased() == "retry-after" }, "\(refused.headers)")
            #expect(monotonicSeconds() - started < 15)
            #expect(
                ServeProcess.eventually(20) {
                    (try? serve.client().request("GET", "/healthz").status) == 503
                })
        }
        // Back: /healthz is 200 again within the idle check, and requests go through.
        #expect(
            ServeProcess.eventually(60) {
                (try? serve.client().request("GET", "/healthz").status) == 200
            })
        let again = try serve.client().request("POST", "/api/v2/write?precision=s", headers: auth, body: Array(body.utf8))
        #expect(again.status == 204, "\(again.status) \(again.text)")
        #expect(!serve.stderrText.contains("tok-ingest") && !serve.stderrText.contains(cluster.password))
    }
}

/// A thread running `body` (joined by the caller).
func startThreadForTest(_ body: @escaping () -> Void) -> pthread_t {
    switch startThread(body) {
    case .success(let t): return t
    case .failure(let e): fatalError("no thread: \(e)")
    }
}

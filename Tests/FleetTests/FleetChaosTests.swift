import Fleet
import Foundation
import Glibc
import HealthgateCore
@testable import HealthgateTesting
import Posix
import Synchronization
import Testing

/// The fleet as it will fail: two ingest and two deliver machines under load from phones that
/// retry what was not answered 2xx on the other ingest machine; meanwhile, each at a random
/// moment, a broker node is killed (kill -9) and started again, an ingest machine and a deliver
/// machine are killed and replaced by fresh ones (empty data dirs), and a node is cut off
/// (frozen) for a while. Every record a phone was answered 2xx for arrives, once, as sent.
extension AMQPConnectionTests {
    /// One phone: sends its rounds one after another, each to the ingest machine it is given;
    /// what is not answered 2xx is sent again (the same records) to the next, for up to a minute.
    final class Phone: @unchecked Sendable {
        let device: String
        let ports: Locked<[UInt16]>
        let acknowledged = Locked<[String: Int]>([:])
        let statuses = Locked<[Int: Int]>([:])
        let stopping = Atomic<Bool>(false)

        init(device: String, ports: Locked<[UInt16]>) {
            self.device = device
            self.ports = ports
        }

        func run() {
            var round = 0
            var machine = Int.random(in: 0..<2)
            while !stopping.load(ordering: .acquiring) {
                let body = AMQPConnectionTests.chunk(device, round: round, count: 10)
                let given = monotonicSeconds() + 60
                while monotonicSeconds() < given {
                    let port = ports.withLock { $0[machine % $0.count] }
                    let status =
                        (try? RawHTTPClient(port: port).request("POST", "/v1/ingest", headers: AMQPConnectionTests.ingestAuth, body: body))?
                        .status ?? -1
                    statuses.withLock { $0[status, default: 0] += 1 }
                    if status == 202 {
                        acknowledged.withLock { a in for n in 0..<10 { a["\(device)-\(round)-\(n)"] = round * 100 + n } }
                        break
                    }
                    machine += 1
                    usleep(200_000)
                }
                round += 1
                machine += 1
                usleep(50_000)
            }
        }
    }

    @Test func underLoadAKilledNodeIngestMachineAndWorkerAndACutOffNodeLoseNothing() throws {
        let cluster = try Self.cluster()
        let db = try DatabaseProcess.postgres()
        let config = Self.fleetConfig(
            cluster, state: db.postgresURL, partitions: 4,
            sinks: """
                  db: {kind: postgres, dsn: "\(db.postgresURL)", batch: {max_wait: 20ms}, retry: {initial: 100ms, max: 1s}}
                """, to: "db")
        var ingest = try (0..<2).map { _ in try ServeProcess(config: config, arguments: ["--role", "ingest"]) }
        var deliver = try (0..<2).map { _ in try ServeProcess(config: config, arguments: ["--role", "deliver"]) }
        defer {
            for s in ingest + deliver { s.stop() }
        }
        let ports = Locked(ingest.map(\.port))
        let phones = (0..<4).map { Phone(device: "chaos-\($0)", ports: ports) }
        let threads = phones.map { p in startThreadForTest { p.run() } }

        // The failures, in a random order at random moments (the seed is in the test's output;
        // HG_CHAOS_SEED runs one again).
        let seed = ProcessInfo.processInfo.environment["HG_CHAOS_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64(UInt32.max))
        print("fleet chaos: seed \(seed)")
        var rng = SeededRandom(seed)
        func pause() { usleep(UInt32(Double.random(in: 1.5...4, using: &rng) * 1e6)) }
        var failures: [(String, () throws -> Void)] = [
            (
                "kill -9 of a broker node",
                {
                    let node = Int.random(in: 0..<3, using: &rng)
                    cluster.kill(node)
                    pause()
                    try cluster.start(node)
                    try cluster.waitUntilUp(node)
                }
            ),
            (
                "kill -9 of an ingest machine",
                {
                    let i = Int.random(in: 0..<2, using: &rng)
                    ingest[i].stop(signal: SIGKILL)
                    pause()
                    ingest[i] = try ServeProcess(config: config, arguments: ["--role", "ingest"])
                    ports.withLock { $0[i] = ingest[i].port }
                }
            ),
            (
                "kill -9 of a deliver machine",
                {
                    let i = Int.random(in: 0..<2, using: &rng)
                    deliver[i].stop(signal: SIGKILL)
                    pause()
                    deliver[i] = try ServeProcess(config: config, arguments: ["--role", "deliver"])
                }
            ),
            (
                "a broker node cut off for 15 s",
                {
                    let node = Int.random(in: 0..<3, using: &rng)
                    cluster.freeze(node)
                    usleep(15_000_000)
                    cluster.thaw(node)
                    // Frozen, the node never saw itself in the minority (pause_minority): the
                    // cluster lists a partition until it is restarted, as an operator would.
                    let healed = ServeProcess.eventually(20) {
                        (try? cluster.ctl(node, ["cluster_status"]).1.contains("cannot communicate")) == false
                    }
                    if !healed {
                        print("fleet chaos: node \(node) restarted to heal the partition")
                        _ = try cluster.ctl(node, ["stop_app"])
                        _ = try cluster.ctl(node, ["start_app"])
                        try cluster.waitUntilUp(node)
                    }
                }
            )
        ]
        failures.shuffle(using: &rng)
        pause()
        for (what, fail) in failures {
            print("fleet chaos: \(what)")
            try fail()
            pause()
        }
        for p in phones { p.stopping.store(true, ordering: .releasing) }
        threads.forEach { pthread_join($0, nil) }

        var expected: [String: Int] = [:]
        var statuses: [Int: Int] = [:]
        for p in phones {
            expected.merge(p.acknowledged.withLock { $0 }) { a, _ in a }
            statuses.merge(p.statuses.withLock { $0 }) { $0 + $1 }
        }
        print("fleet chaos: \(expected.count) records acknowledged; answers \(statuses.sorted { $0.key < $1.key })")
        #expect(expected.count >= 400, "too little went through to mean anything: \(statuses)")
        // The phones saw 2xx, or 503 (or a killed machine's closed connection), nothing else.
        #expect(Set(statuses.keys).isSubset(of: [202, 503, -1]), "\(statuses)")
        // Each acknowledged record, as sent (a request answered 503 may have been taken too:
        // more may be stored, never less).
        var missing: [String] = []
        _ = ServeProcess.eventually(120) {
            let rows = (try? db.psql("SELECT string_agg(uuid || '=' || value::bigint, ',') FROM healthgate.records")) ?? ""
            var stored: [String: Int] = [:]
            for pair in rows.split(separator: ",") {
                let kv = pair.split(separator: "=")
                if kv.count == 2 { stored[String(kv[0])] = Int(kv[1]) }
            }
            missing = expected.filter { stored[$0.key] != $0.value }.map(\.key).sorted()
            return missing.isEmpty
        }
        #expect(missing.isEmpty, "\(missing.count) acknowledged record(s) not stored as sent, e.g. \(missing.prefix(5))")
        #expect(try db.psql("SELECT count(*) - count(DISTINCT uuid) FROM healthgate.records") == "0")
        for s in ingest + deliver { #expect(!s.stderrText.contains(cluster.password)) }
        // The cluster whole again for the next tests: a node killed or cut off takes a while to
        // rejoin, and until then may not know the queues the others declared.
        let probe = "chaos-probe-\(seed)"
        let whole = ServeProcess.eventually(180) {
            guard let first = try? connect(0, cluster), (try? first.declareQueue(probe)) != nil else { return false }
            return (0..<3).allSatisfy { i in (try? connect(i, cluster).depth(of: probe)) != nil }
        }
        #expect(whole, "the cluster did not come whole again")
    }
}

/// A reproducible generator (SplitMix64): the chaos test's order and moments from its seed.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

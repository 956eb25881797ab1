import Glibc
import HealthgateCore
import Posix
import SinkPostgres

/// What `healthgate status` shows of a fleet: its machines (as they last said they were alive),
/// each sink's messages waiting in its partition queues and dead-letter queue (from the first
/// broker that answers), and who holds each partition (from `fleet.state`).
public struct FleetReport: Sendable {
    public struct Machine: Sendable {
        public var name: String
        public var role: String
        public var secondsSinceSeen: Int
    }

    public struct Holding: Sendable {
        public var holder: String
        public var partitions: [Int]
        /// Since the newest of its partitions' states was saved (nil: none saved yet).
        public var secondsSinceSaved: Int?
    }

    public struct Sink: Sendable {
        public var name: String
        /// Messages in its partition queues not taken by a worker (nil: the broker did not say).
        public var waiting: Int?
        public var deadLetters: Int?
        public var holdings: [Holding]
        public var unclaimed: [Int]
        /// How old the oldest message waiting is at most (s): of the partitions with messages
        /// waiting, the longest since the newest message their worker applied was published
        /// (what waits came after it). Nil when nothing waits or no partition says.
        public var oldestWaiting: Int?
    }

    public var broker: String?
    public var brokerProblem: String?
    public var stateProblem: String?
    public var machines: [Machine]
    public var sinks: [Sink]

    /// As `healthgate status` and the status page say it.
    public func lines(_ fleet: FleetSettings) -> [String] {
        var out = [
            "fleet: \(fleet.brokers.count) broker(s), \(fleet.partitions) partitions" + (broker.map { "; queues as \($0) sees them" } ?? "")
        ]
        if let why = brokerProblem { out.append("  no broker answers: \(why)") }
        if let why = stateProblem { out.append("  the fleet's state cannot be read: \(why)") }
        if !machines.isEmpty {
            out.append("  machines (as they last said they were alive):")
            for m in machines { out.append("    \(m.name): \(m.role), seen \(m.secondsSinceSeen) s ago") }
        }
        for s in sinks {
            var line = "  sink \(s.name): "
            line += s.waiting.map { "\($0) message(s) waiting in its partition queues" } ?? "its queues not declared yet"
            if let age = s.oldestWaiting { line += ", the oldest at most \(age) s old" }
            if let dead = s.deadLetters, dead > 0 {
                line += "; \(dead) dead letter(s) in \(FleetQueues.deadLetterQueue(sink: s.name)) (`healthgate replay --sink \(s.name)`)"
            }
            out.append(line)
            for h in s.holdings {
                let ps = h.partitions.map { "p\($0)" }.joined(separator: " ")
                out.append(
                    "    \(h.holder) holds \(ps)" + (h.secondsSinceSaved.map { "; state saved \($0) s ago" } ?? "; no state saved yet"))
            }
            if !s.unclaimed.isEmpty && s.unclaimed.count < fleet.partitions {
                out.append("    never claimed: " + s.unclaimed.map { "p\($0)" }.joined(separator: " "))
            } else if s.unclaimed.count == fleet.partitions {
                out.append("    no worker has claimed a partition yet")
            }
        }
        return out
    }

    public static func gather(_ fleet: FleetSettings, sinks: [String]) -> FleetReport {
        var report = FleetReport(broker: nil, brokerProblem: nil, stateProblem: nil, machines: [], sinks: [])
        var depths: [String: Int] = [:]
        var reasons: [String] = []
        let names = sinks.flatMap { s in
            (0..<fleet.partitions).map { FleetQueues.queue(sink: s, partition: $0) } + [FleetQueues.deadLetterQueue(sink: s)]
        }
        for url in fleet.brokers {
            var c: AMQPConnection
            do throws(AMQPConnection.Failure) {
                c = try AMQPConnection(url: url, timeout: 5)
            } catch {
                reasons.append(error.description)
                continue
            }
            for q in names {
                if !c.isOpen {
                    // A queue no machine declared yet closed the connection: on with a new one.
                    guard let again = try? AMQPConnection(url: url, timeout: 5) else { break }
                    c = again
                }
                depths[q] = try? c.depth(of: q)
            }
            c.close()
            report.broker = url.shown
            break
        }
        if report.broker == nil { report.brokerProblem = reasons.joined(separator: "; ") }
        let states = PartitionStates(url: fleet.state, holder: "")
        defer { states.close() }
        var held: [PartitionStates.Holder] = []
        do throws(PartitionStates.Failure) {
            held = try states.holders()
        } catch {
            report.stateProblem = error.description
        }
        do throws(FleetDatabase.Failure) {
            report.machines = try FleetMachines(url: fleet.state).list()
        } catch {
            report.stateProblem = report.stateProblem ?? error.description
        }
        for s in sinks {
            let queues = (0..<fleet.partitions).map { FleetQueues.queue(sink: s, partition: $0) }
            let known = queues.compactMap { depths[$0] }
            var byHolder: [String: Holding] = [:]
            for h in held where h.sink == s && h.partition < fleet.partitions {
                var holding = byHolder[h.holder] ?? Holding(holder: h.holder, partitions: [], secondsSinceSaved: nil)
                holding.partitions.append(h.partition)
                if let saved = h.secondsSinceSaved { holding.secondsSinceSaved = min(holding.secondsSinceSaved ?? saved, saved) }
                byHolder[h.holder] = holding
            }
            let behind = held.filter { h in
                h.sink == s && h.partition < fleet.partitions && (depths[queues[h.partition]] ?? 0) > 0
            }.compactMap { $0.secondsSincePublished.map { max(0, $0) } }.max()
            let claimed = Set(held.filter { $0.sink == s }.map(\.partition))
            report.sinks.append(
                Sink(
                    name: s, waiting: known.count == queues.count ? known.reduce(0, +) : nil,
                    deadLetters: depths[FleetQueues.deadLetterQueue(sink: s)],
                    holdings: byHolder.values.sorted { $0.holder < $1.holder },
                    unclaimed: (0..<fleet.partitions).filter { !claimed.contains($0) }, oldestWaiting: behind))
        }
        return report
    }
}

import Glibc
import HealthgateCore
import Pipeline
import Posix
import Synchronization

/// Counters for one receiver, shown by `/metrics`.
public final class ReceiverMetrics: Sendable {
    public let name: String
    public let requests = Atomic<Int>(0)
    public let accepted = Atomic<Int>(0)
    public let quarantined = Atomic<Int>(0)
    public let unreadable = Atomic<Int>(0)
    public let tooLarge = Atomic<Int>(0)
    public let refused = Atomic<Int>(0)
    /// Requests for a device the receiver's `devices:` does not allow.
    public let wrongDevice = Atomic<Int>(0)
    public let unavailable = Atomic<Int>(0)
    public let checks = Atomic<Int>(0)
    public let unknownTypes = Atomic<Int>(0)
    public let unknownUnits = Atomic<Int>(0)
    /// When the last request past the auth check was answered (Unix ns; 0: none yet), and how.
    public let lastRequestNanos = Atomic<Int64>(0)
    public let lastStatus = Atomic<Int>(0)
    /// How long requests past the auth check took to answer: counts per bound of
    /// `latencyBounds` (the last for longer ones), their sum in microseconds.
    let latency = Mutex<(counts: [Int], micros: Int)>((Array(repeating: 0, count: ReceiverMetrics.latencyBounds.count + 1), 0))
    /// Seconds: the histogram's upper bounds.
    static let latencyBounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// The newest refusal of a request to this receiver, 401s included: for the status page.
    public struct Refusal: Sendable {
        public var time: Timestamp
        public var status: Int
        public var why: String
        public var address: String
    }
    public let lastRefusal = Mutex<Refusal?>(nil)

    public init(name: String) { self.name = name }

    func noteLatency(_ seconds: Double) {
        let i = ReceiverMetrics.latencyBounds.firstIndex { seconds <= $0 } ?? ReceiverMetrics.latencyBounds.count
        latency.withLock {
            $0.counts[i] += 1
            $0.micros += Int(seconds * 1_000_000)
        }
    }
}

/// Renders the Prometheus text format for the receivers, the journal and the sinks.
enum PrometheusText {
    static func render(
        receivers: [ReceiverMetrics], sinks: [SinkMetrics], journal: Journal, quarantine: Quarantine.Usage,
        connections: ConnectionGuard? = nil, now: Timestamp
    ) -> String {
        let journalSeq = journal.lastDurableSeq
        let journalSegments = journal.segmentFirstSeqs.count
        var out = ""
        func family(_ name: String, _ help: String, _ type: String = "counter") {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func line(_ name: String, _ labels: [(String, String)], _ value: Int) {
            let l = labels.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",")
            out += "\(name){\(l)} \(value)\n"
        }
        family("healthgate_requests_total", "Requests per receiver.")
        for r in receivers { line("healthgate_requests_total", [("receiver", r.name)], r.requests.load(ordering: .relaxed)) }
        family("healthgate_records_accepted_total", "Records journaled per receiver.")
        for r in receivers { line("healthgate_records_accepted_total", [("receiver", r.name)], r.accepted.load(ordering: .relaxed)) }
        family("healthgate_records_quarantined_total", "Records kept in quarantine per receiver.")
        for r in receivers { line("healthgate_records_quarantined_total", [("receiver", r.name)], r.quarantined.load(ordering: .relaxed)) }
        family("healthgate_quarantine_bytes", "Bytes the quarantine holds (bodies, records and reason lines).", "gauge")
        out += "healthgate_quarantine_bytes \(quarantine.bytes)\n"
        family("healthgate_quarantine_bodies_deleted_total", "Oldest kept bodies deleted to stay within quarantine.max_bytes.")
        out += "healthgate_quarantine_bodies_deleted_total \(quarantine.bodiesDropped)\n"
        family("healthgate_quarantine_left_out_total", "Bodies and records whose reason line was kept without them (quarantine full).")
        out += "healthgate_quarantine_left_out_total \(quarantine.contentsLeftOut)\n"
        family("healthgate_quarantine_lines_dropped_total", "Quarantine entries not written at all: not even the reason line fit.")
        out += "healthgate_quarantine_lines_dropped_total \(quarantine.linesDropped)\n"
        if let g = connections {
            family("healthgate_http_connections", "Open HTTP connections.", "gauge")
            out += "healthgate_http_connections \(g.openConnections)\n"
            family("healthgate_http_connections_closed_total", "Connections the gateway closed, by reason.")
            line("healthgate_http_connections_closed_total", [("reason", "slow_headers")], g.closedSlowHead.load(ordering: .relaxed))
            line("healthgate_http_connections_closed_total", [("reason", "slow_body")], g.closedSlowBody.load(ordering: .relaxed))
            line("healthgate_http_connections_closed_total", [("reason", "slow_reader")], g.closedSlowReader.load(ordering: .relaxed))
            line("healthgate_http_connections_closed_total", [("reason", "make_room")], g.closedToMakeRoom.load(ordering: .relaxed))
            line("healthgate_http_connections_closed_total", [("reason", "full")], g.refusedFull.load(ordering: .relaxed))
        }
        family("healthgate_requests_refused_total", "Requests refused per receiver and reason.")
        for r in receivers {
            line("healthgate_requests_refused_total", [("receiver", r.name), ("reason", "auth")], r.refused.load(ordering: .relaxed))
            line("healthgate_requests_refused_total", [("receiver", r.name), ("reason", "device")], r.wrongDevice.load(ordering: .relaxed))
            line(
                "healthgate_requests_refused_total", [("receiver", r.name), ("reason", "unreadable")], r.unreadable.load(ordering: .relaxed)
            )
            line("healthgate_requests_refused_total", [("receiver", r.name), ("reason", "too_large")], r.tooLarge.load(ordering: .relaxed))
            line(
                "healthgate_requests_refused_total", [("receiver", r.name), ("reason", "unavailable")],
                r.unavailable.load(ordering: .relaxed))
        }
        family("healthgate_records_unknown_type_total", "Records of a type the registry does not know (kept as they came).")
        for r in receivers {
            line("healthgate_records_unknown_type_total", [("receiver", r.name)], r.unknownTypes.load(ordering: .relaxed))
        }
        family("healthgate_records_unknown_unit_total", "Records in a unit the registry does not know (kept as they came).")
        for r in receivers {
            line("healthgate_records_unknown_unit_total", [("receiver", r.name)], r.unknownUnits.load(ordering: .relaxed))
        }
        family("healthgate_check_requests_total", "Check connection requests per receiver.")
        for r in receivers { line("healthgate_check_requests_total", [("receiver", r.name)], r.checks.load(ordering: .relaxed)) }
        family("healthgate_request_duration_seconds", "Time to answer a request past its receiver's auth check.", "histogram")
        for r in receivers {
            let (counts, micros) = r.latency.withLock { $0 }
            var cumulative = 0
            for (i, bound) in ReceiverMetrics.latencyBounds.enumerated() {
                cumulative += counts[i]
                out += "healthgate_request_duration_seconds_bucket{receiver=\"\(escape(r.name))\",le=\"\(bound)\"} \(cumulative)\n"
            }
            cumulative += counts[ReceiverMetrics.latencyBounds.count]
            out += "healthgate_request_duration_seconds_bucket{receiver=\"\(escape(r.name))\",le=\"+Inf\"} \(cumulative)\n"
            out +=
                "healthgate_request_duration_seconds_sum{receiver=\"\(escape(r.name))\"} "
                + "\(Double(micros) / 1_000_000)\n"
            out += "healthgate_request_duration_seconds_count{receiver=\"\(escape(r.name))\"} \(cumulative)\n"
        }
        family("healthgate_build_info", "The running healthgate's version, commit and build day (the value is always 1).", "gauge")
        let build = Healthgate.build
        out +=
            "healthgate_build_info{version=\"\(escape(Healthgate.version))\",commit=\"\(escape(build.commit))\","
            + "built=\"\(escape(build.date))\"} 1\n"
        let process = ProcessFigures.now()
        family("process_resident_memory_bytes", "Resident memory of the process.", "gauge")
        out += "process_resident_memory_bytes \(process.residentBytes)\n"
        family("process_open_fds", "Open file descriptors of the process.", "gauge")
        out += "process_open_fds \(process.openFDs)\n"
        family("process_cpu_seconds_total", "CPU time the process used, user and system.")
        out += "process_cpu_seconds_total \(process.cpuSeconds)\n"
        family("healthgate_journal_last_seq", "Sequence number of the newest durable journal entry.", "gauge")
        out += "healthgate_journal_last_seq \(journalSeq)\n"
        family("healthgate_journal_segments", "Journal segment files on disk.", "gauge")
        out += "healthgate_journal_segments \(journalSegments)\n"
        family("healthgate_sink_records_sent_total", "Records delivered per sink.")
        for s in sinks { line("healthgate_sink_records_sent_total", [("sink", s.name)], s.sent.load(ordering: .relaxed)) }
        family("healthgate_sink_records_kept_total", "Record deliveries that failed and were kept for a retry.")
        for s in sinks { line("healthgate_sink_records_kept_total", [("sink", s.name)], s.kept.load(ordering: .relaxed)) }
        family("healthgate_sink_records_rejected_total", "Records sent to a sink's dead letters.")
        for s in sinks { line("healthgate_sink_records_rejected_total", [("sink", s.name)], s.rejected.load(ordering: .relaxed)) }
        family(
            "healthgate_sink_dead_letters_over_budget_total",
            "Rejected records past dead_letters.max_bytes: kept as their keys only, or not kept.")
        for s in sinks {
            line(
                "healthgate_sink_dead_letters_over_budget_total", [("sink", s.name), ("kept", "keys")],
                s.deadLettersKeysOnly.load(ordering: .relaxed))
            line(
                "healthgate_sink_dead_letters_over_budget_total", [("sink", s.name), ("kept", "none")],
                s.deadLettersNotKept.load(ordering: .relaxed))
        }
        family("healthgate_sink_records_dropped_total", "Records dropped unsent: the sink was over queue.max_bytes with drop_oldest.")
        for s in sinks { line("healthgate_sink_records_dropped_total", [("sink", s.name)], s.dropped.load(ordering: .relaxed)) }
        family("healthgate_sink_records_filtered_total", "Journaled records no route delivers to this sink.")
        for s in sinks { line("healthgate_sink_records_filtered_total", [("sink", s.name)], s.filtered.load(ordering: .relaxed)) }
        // Each sink's own counters (the postgres sink's inserted / updated / unchanged / deleted).
        var own: [String: [(String, Int)]] = [:]
        var order: [String] = []
        for s in sinks {
            for c in s.report?.counters ?? [] {
                if own[c.name] == nil { order.append(c.name) }
                own[c.name, default: []].append((s.name, c.value))
            }
        }
        for name in order {
            family("healthgate_sink_\(name)_total", "Records the sink counted as \(name) (its own count).")
            for (sink, value) in own[name]! { line("healthgate_sink_\(name)_total", [("sink", sink)], value) }
        }
        family("healthgate_journal_bytes", "Journal bytes on disk.", "gauge")
        out += "healthgate_journal_bytes \(journal.bytesOnDisk)\n"
        let backlogs = sinks.map { s in
            journal.backlog(fromSeq: s.cursorSeq.load(ordering: .relaxed), skip: s.cursorSkip.load(ordering: .relaxed))
        }
        family("healthgate_sink_records_waiting", "Records in the journal this sink has not delivered yet.", "gauge")
        for (s, b) in zip(sinks, backlogs) { line("healthgate_sink_records_waiting", [("sink", s.name)], b.records) }
        family("healthgate_sink_bytes_waiting", "Journal bytes this sink has not delivered yet.", "gauge")
        for (s, b) in zip(sinks, backlogs) { line("healthgate_sink_bytes_waiting", [("sink", s.name)], b.bytes) }
        family("healthgate_sink_oldest_waiting_seconds", "Age of the oldest record this sink has not delivered.", "gauge")
        for (s, b) in zip(sinks, backlogs) {
            let age = b.oldestNanos.map { max(0, Int(now.seconds - $0 / 1_000_000_000)) } ?? 0
            line("healthgate_sink_oldest_waiting_seconds", [("sink", s.name)], age)
        }
        family("healthgate_sink_retrying", "1 while the sink's last attempt failed and it waits to try again.", "gauge")
        for s in sinks { line("healthgate_sink_retrying", [("sink", s.name)], s.nextRetryAt.load(ordering: .relaxed) > 0 ? 1 : 0) }
        return out
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}

/// The process's own figures for `/metrics`, from /proc and getrusage.
struct ProcessFigures {
    var residentBytes = 0
    var openFDs = 0
    var cpuSeconds = 0.0

    static func now() -> ProcessFigures {
        var f = ProcessFigures()
        // statm: total and resident pages.
        if let text = try? FileIO.readAll("/proc/self/statm") {
            let fields = String(decoding: text, as: UTF8.self).split(separator: " ")
            if fields.count > 1, let pages = Int(fields[1]) { f.residentBytes = pages * Int(sysconf(Int32(_SC_PAGESIZE))) }
        }
        f.openFDs = ((try? FileIO.list("/proc/self/fd"))?.count ?? 1) - 1 // less the one listing it
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
            f.cpuSeconds =
                Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
        }
        return f
    }
}

import FastJSON
import Glibc
import HealthgateCore
import Pipeline
import SinkKit
import Posix
import CanonicalJSON
import Fleet

/// What `serve` says about itself every second in `<data_dir>/status.json`, for
/// `healthgate status` (which works while `serve` runs, without a connection to it).
enum StatusReport {
    static func json(service: GatewayService, now: Timestamp) -> [UInt8] {
        json(
            journal: service.journal, journalMaxBytes: service.journalMaxBytes, receivers: service.handler.receiverMetrics,
            drainers: service.drainers, removed: service.drainerSet.removed, now: now)
    }

    /// Also `GET /status`.
    /// A sink's name and what waits for it: records, bytes, the oldest one's time.
    private static func waiting(_ name: String, _ b: (records: Int, bytes: Int, oldestNanos: Int64?), into w: inout JSONWriter) {
        w.key("name"); w.string(name)
        w.key("waiting_records"); w.int(b.records)
        w.key("waiting_bytes"); w.int(b.bytes)
        w.key("oldest_waiting")
        if let ns = b.oldestNanos { w.string(Timestamp(seconds: ns / 1_000_000_000).rfc3339()) } else { w.null() }
    }

    static func json(
        journal: Journal, journalMaxBytes: Int?, receivers: [ReceiverMetrics], drainers: [SinkDrainer],
        removed: [RemovedSink] = [], fleet: FleetReport? = nil, now: Timestamp
    ) -> [UInt8] {
        var w = JSONWriter(capacity: 2048)
        w.beginObject()
        w.key("time"); w.string(Timestamp(seconds: now.seconds).rfc3339())
        w.key("pid"); w.int(Int(getpid()))
        w.key("journal")
        w.beginObject()
        w.key("last_seq"); w.uint(journal.lastDurableSeq)
        w.key("segments"); w.int(journal.segmentFirstSeqs.count)
        w.key("bytes"); w.int(journal.bytesOnDisk)
        w.key("max_bytes")
        if let m = journalMaxBytes { w.int(m) } else { w.null() }
        w.endObject()
        w.key("receivers")
        w.beginArray()
        for r in receivers {
            w.beginObject()
            w.key("name"); w.string(r.name)
            w.key("requests"); w.int(r.requests.load(ordering: .relaxed))
            w.key("records_accepted"); w.int(r.accepted.load(ordering: .relaxed))
            w.key("records_quarantined"); w.int(r.quarantined.load(ordering: .relaxed))
            w.key("refused_auth"); w.int(r.refused.load(ordering: .relaxed))
            w.key("refused_device"); w.int(r.wrongDevice.load(ordering: .relaxed))
            w.key("refused_unreadable"); w.int(r.unreadable.load(ordering: .relaxed))
            w.key("refused_too_large"); w.int(r.tooLarge.load(ordering: .relaxed))
            w.key("unavailable"); w.int(r.unavailable.load(ordering: .relaxed))
            let last = r.lastRequestNanos.load(ordering: .relaxed)
            w.key("last_request")
            if last > 0 { w.string(Timestamp(seconds: last / 1_000_000_000).rfc3339()) } else { w.null() }
            w.key("last_status")
            if last > 0 { w.int(r.lastStatus.load(ordering: .relaxed)) } else { w.null() }
            w.endObject()
        }
        w.endArray()
        w.key("sinks")
        w.beginArray()
        for d in drainers {
            let m = d.metrics
            let b = journal.backlog(fromSeq: m.cursorSeq.load(ordering: .relaxed), skip: m.cursorSkip.load(ordering: .relaxed))
            w.beginObject()
            waiting(m.name, b, into: &w)
            w.key("lag_seconds")
            if let ns = b.oldestNanos { w.int(Int(max(0, now.unixNanoseconds - ns) / 1_000_000_000)) } else { w.null() }
            w.key("sent"); w.int(m.sent.load(ordering: .relaxed))
            w.key("kept"); w.int(m.kept.load(ordering: .relaxed))
            w.key("in_retry"); w.int(m.inRetry.load(ordering: .relaxed))
            w.key("rejected"); w.int(m.rejected.load(ordering: .relaxed))
            w.key("filtered"); w.int(m.filtered.load(ordering: .relaxed))
            w.key("dropped"); w.int(m.dropped.load(ordering: .relaxed))
            w.key("last_error")
            if let e = m.lastError { w.string(e) } else { w.null() }
            let reach = m.reachability
            w.key("destination"); w.string(reach.word)
            // Paused by the crash-loop guard: where, why, and how to go on.
            w.key("paused")
            if let p = m.paused {
                w.beginObject()
                p.writeMembers(to: &w)
                w.key("signal"); w.string(p.signalName)
                w.key("resume"); w.string(CrashGuard.howToResume(m.name))
                w.endObject()
            } else {
                w.null()
            }
            w.key("unreachable_reason")
            if case .unreachable(let why) = reach { w.string(why) } else { w.null() }
            w.key("failing_reason")
            if case .failing(let why) = reach { w.string(why) } else { w.null() }
            w.key("next_retry")
            let next = m.nextRetryAt.load(ordering: .relaxed)
            if next > 0 { w.string(Timestamp(seconds: next).rfc3339()) } else { w.null() }
            if let report = m.report {
                w.key("detail")
                if let d = report.detail { w.string(d) } else { w.null() }
                w.key("counters")
                w.beginObject()
                for c in report.counters { w.key(c.name); w.int(c.value) }
                w.endObject()
            }
            w.endObject()
        }
        w.endArray()
        // Sinks taken out of the config whose records still wait in the journal.
        w.key("removed_sinks")
        w.beginArray()
        for r in removed {
            w.beginObject()
            waiting(r.name, journal.backlog(fromSeq: r.cursor.seq, skip: r.cursor.skip), into: &w)
            w.key("what_to_do"); w.string("put sink \(r.name) back in the config to deliver them, or `healthgate forget \(r.name)`")
            w.endObject()
        }
        w.endArray()
        if let fleet { write(fleet, into: &w) }
        w.endObject()
        w.newline()
        return w.bytes
    }

    /// A fleet's machines, and each sink's queues and holders (`fleet` in `GET /status`).
    static func write(_ r: FleetReport, into w: inout JSONWriter) {
        func optional(_ v: Int?) { if let v { w.int(v) } else { w.null() } }
        w.key("fleet")
        w.beginObject()
        w.key("broker"); if let b = r.broker { w.string(b) } else { w.null() }
        w.key("broker_problem"); if let p = r.brokerProblem { w.string(p) } else { w.null() }
        w.key("state_problem"); if let p = r.stateProblem { w.string(p) } else { w.null() }
        w.key("machines")
        w.beginArray()
        for m in r.machines {
            w.beginObject()
            w.key("name"); w.string(m.name)
            w.key("role"); w.string(m.role)
            w.key("seen_seconds_ago"); w.int(m.secondsSinceSeen)
            w.endObject()
        }
        w.endArray()
        w.key("sinks")
        w.beginArray()
        for s in r.sinks {
            w.beginObject()
            w.key("name"); w.string(s.name)
            w.key("waiting_messages"); optional(s.waiting)
            w.key("oldest_waiting_at_most_seconds"); optional(s.oldestWaiting)
            w.key("dead_letters"); optional(s.deadLetters)
            w.key("holders")
            w.beginArray()
            for h in s.holdings {
                w.beginObject()
                w.key("holder"); w.string(h.holder)
                w.key("partitions"); w.beginArray(); for p in h.partitions { w.int(p) }; w.endArray()
                w.key("state_saved_seconds_ago"); optional(h.secondsSinceSaved)
                w.endObject()
            }
            w.endArray()
            w.key("never_claimed"); w.beginArray(); for p in s.unclaimed { w.int(p) }; w.endArray()
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }
}

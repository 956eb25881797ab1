import FastJSON
import Fleet
import Glibc
import HealthgateCore
import Pipeline
import Posix

/// `healthgate status`: what waits where and why, from the data dir (works while `serve`
/// runs: it reads the status `serve` writes every second).
struct StatusCommand {
    let options: Options
    init(_ o: Options) { options = o }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "status", sink: StderrLogSink(minimum: .error)))
        ConfigSource.announce("status", source, t)
        if let fleet = t.fleet {
            for line in FleetReport.gather(fleet, sinks: t.sinks.map(\.name)).lines(fleet) { print(line) }
        }
        let running = GatewayService.isServing(dataDir: t.dataDir)
        let statusPath = FileIO.join(t.dataDir, "status.json")
        guard FileIO.exists(statusPath) else {
            print("data dir \(t.dataDir): no status yet (serve has not run on it)\(running ? "" : "; serve is not running")")
            return running ? 1 : 0
        }
        let bytes = try FileIO.readAll(statusPath)
        let parser = JSONParser()
        let doc: JSONDocument
        do { doc = try parser.parse(bytes) } catch {
            throw UsageError("\(statusPath) is unreadable (\(error)); it is rewritten every second while serve runs")
        }
        let s = doc.root
        let time = s["time"]?.string ?? "?"
        if running {
            print("serve is running (pid \(s["pid"]?.int64 ?? 0)) on \(t.dataDir); figures as of \(time)")
        } else {
            print("serve is not running on \(t.dataDir); figures from its last status, \(time) (counters are since that start)")
        }
        if let j = s["journal"] {
            print(
                "journal: up to entry #\(j["last_seq"]?.int64 ?? 0), \(j["segments"]?.int64 ?? 0) segment(s), "
                    + Self.size(Int(j["bytes"]?.int64 ?? 0)))
        }
        print("receivers:")
        for r in s["receivers"].map({ Array($0.elements) }) ?? [] {
            let name = r["name"]?.string ?? "?"
            func n(_ k: String) -> Int64 { r[k]?.int64 ?? 0 }
            var line = "  \(name): \(n("requests")) request(s), \(n("records_accepted")) record(s) taken"
            if n("records_quarantined") > 0 {
                line += ", \(n("records_quarantined")) set aside in quarantine/\(name).ndjson"
            }
            let refused = [
                ("auth", n("refused_auth")), ("unreadable", n("refused_unreadable")),
                ("too large", n("refused_too_large")), ("503", n("unavailable"))
            ].filter { $0.1 > 0 }
            if !refused.isEmpty { line += "; refused: " + refused.map { "\($0.1) \($0.0)" }.joined(separator: ", ") }
            print(line)
        }
        print("sinks:")
        for k in s["sinks"].map({ Array($0.elements) }) ?? [] {
            let name = k["name"]?.string ?? "?"
            func n(_ key: String) -> Int64 { k[key]?.int64 ?? 0 }
            let waiting = n("waiting_records")
            let retrying = k["next_retry"]?.string
            var line = "  \(name): "
            let paused = k["paused"].flatMap { $0.kind == .object ? $0 : nil }
            line +=
                paused != nil
                ? "PAUSED"
                : k["failing_reason"]?.string != nil
                    ? "FAILING"
                    : retrying != nil ? "RETRYING" : (waiting > 0 ? "delivering" : "up to date")
            line += "; \(waiting) record(s) waiting (\(Self.size(Int(n("waiting_bytes")))) of journal)"
            if waiting > 0, let oldest = k["oldest_waiting"]?.string { line += ", oldest received \(oldest)" }
            // Of the records waiting, those in the batch being retried (not every try counted).
            line += "; sent \(n("sent")), rejected \(n("rejected"))"
            if n("in_retry") > 0 { line += ", \(n("in_retry")) of those waiting being retried" }
            if n("dropped") > 0 { line += ", DROPPED \(n("dropped")) (queue.max_bytes with drop_oldest)" }
            let dead = NDJSONSummaries().of(FileIO.join(t.dataDir, "sinks/\(name)/dead-letters.ndjson"))?.lines ?? 0
            if dead > 0 { line += "; \(dead) dead letter(s) in sinks/\(name)/dead-letters.ndjson" }
            if let d = k["destination"]?.string, d != "unknown" { line += "; destination \(d)" }
            print(line)
            if let p = paused {
                print(
                    "    paused since \(p["since"]?.string ?? "?"): the process died on this sink \(p["crashes"]?.int64 ?? 0) starts in a row "
                        + "(\(p["signal"]?.string ?? "?")) at journal entry \(p["from"]?["seq"]?.int64 ?? 0), record \(p["from"]?["skip"]?.int64 ?? 0)"
                )
                print("    \(p["resume"]?.string ?? "")")
            }
            if let why = k["unreachable_reason"]?.string { print("    unreachable: \(why)") }
            if let why = k["failing_reason"]?.string { print("    failing: \(why)") }
            if let e = k["last_error"]?.string { print("    last error: \(e)") }
            if let r = retrying { print("    next try: \(r)") }
            if let d = k["detail"]?.string { print("    \(d)") }
            if let counters = k["counters"], counters.kind == .object {
                let parts = counters.members.map { "\($0.key.string) \($0.value.int64 ?? 0)" }
                if !parts.isEmpty { print("    " + parts.joined(separator: ", ")) }
            }
        }
        let removed = s["removed_sinks"].map { Array($0.elements) } ?? []
        if !removed.isEmpty {
            print("removed from the config, records still waiting in the journal:")
            for k in removed {
                let name = k["name"]?.string ?? "?"
                print(
                    "  \(name): \(k["waiting_records"]?.int64 ?? 0) record(s) waiting (\(Self.size(Int(k["waiting_bytes"]?.int64 ?? 0))) "
                        + "of journal); put it back in the config to deliver them, or `healthgate forget \(name)`")
            }
        }
        try printCommands(t)
        return 0
    }

    /// Write-back commands and their results, from the command store.
    func printCommands(_ t: Topology) throws {
        // One machine: only a store `write` made (status creates none).
        guard t.fleet != nil || FileIO.exists(FileIO.join(t.dataDir, "commands.sqlite")) else { return }
        let all: [WriteCommand]
        do {
            all = try CommandStore.open(dataDir: t.dataDir, fleet: t.fleet).all()
        } catch {
            print("write-back commands: cannot be read (\(error))")
            return
        }
        guard !all.isEmpty else { return }
        print("write-back commands:")
        for c in all {
            var line = "  \(c.receiver) \(c.id) v\(c.version) \(c.op) \(c.type)"
            switch c.value {
            case .number(let d)?: line += " \(WriteCommandCLI.number(d))\(c.unit.map { " \($0)" } ?? "")"
            case .name(let n)?: line += " \(n)"
            case nil: break
            }
            if let s = c.start { line += " at \(s.rfc3339())" }
            if c.isDone {
                line += ": \(c.resultStatus ?? "done")\(c.resultReason.map { " (\($0))" } ?? "")"
            } else {
                line += ": waiting"
                if c.sentCount > 0, let at = c.lastSentAt {
                    line += " (sent \(c.sentCount) time(s), last \(Timestamp(seconds: at).rfc3339()))"
                } else {
                    line += " (not sent yet: the phone has made no data request since)"
                }
                if let v = c.resultVersion { line += "; version \(v) was \(c.resultStatus ?? "?")" }
            }
            print(line)
        }
        let waiting = all.filter { !$0.isDone }.count
        print("\(waiting) command(s) waiting, \(all.count - waiting) done")
    }

    static func size(_ bytes: Int) -> String {
        if bytes < 10_000 { return "\(bytes) B" }
        if bytes < 10_000_000 { return "\(bytes / 1000) kB" }
        return "\(bytes / 1_000_000) MB"
    }

}

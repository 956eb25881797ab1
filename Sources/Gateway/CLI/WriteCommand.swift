import Glibc
import HealthgateCore
import Posix

/// `healthgate write TYPE VALUE [UNIT] --at TIME`: queues a write-back command (guide sections
/// 10–11), checked against the type registry; `serve` sends it in the reply to the phone's next
/// data request. `healthgate delete COMMAND_ID` queues the delete of what a command wrote.
struct WriteCommandCLI {
    let options: Options
    let arguments: [String]

    func run() throws -> Int32 {
        guard arguments.count == 2 || arguments.count == 3 else {
            throw UsageError("usage: healthgate write TYPE VALUE [UNIT] --at TIME [--end TIME] [--receiver NAME] [--id ID] [--force]")
        }
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "write", sink: StderrLogSink(minimum: .error)))
        ConfigSource.announce("write", source, t)
        let receiver = try WriteCommandCLI.writeBackReceiver(t, options.values["--receiver"])
        guard let atText = options.values["--at"] else {
            throw UsageError("--at TIME is needed: when the record happened (RFC 3339, e.g. 2026-10-14T07:00:00Z, or now)")
        }
        let start = try WriteCommandCLI.time(atText, "--at")
        let end = try options.values["--end"].map { try WriteCommandCLI.time($0, "--end") } ?? start
        guard end >= start else { throw UsageError("--end is before --at") }
        let (value, unit) = try CommandCheck.check(
            type: arguments[0], value: arguments[1],
            unit: arguments.count == 3 ? arguments[2] : nil,
            force: options.flags.contains("--force"))
        if let id = options.values["--id"], !CommandCheck.validID(id) {
            throw UsageError("a command id is 1–64 of A-Z a-z 0-9 _ . : - (got \"\(id)\")")
        }
        let store = try CommandStore.open(dataDir: t.dataDir, fleet: t.fleet)
        let c = try store.write(
            receiver: receiver, id: options.values["--id"], type: arguments[0], value: value, unit: unit,
            start: start, end: end, now: SystemClock().now().seconds)
        let shown: String
        switch value {
        case .number(let d): shown = "\(WriteCommandCLI.number(d))\(unit.map { " \($0)" } ?? "")"
        case .name(let n): shown = n
        }
        print("queued \(c.id) (version \(c.version)): \(c.type) \(shown) at \(start.rfc3339()) for receiver \(receiver)")
        print("it goes out in the reply to the phone's next data request; `healthgate status` shows its result")
        return 0
    }

    static func number(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
    }

    static func time(_ text: String, _ option: String) throws -> Timestamp {
        if text == "now" { return Timestamp(seconds: SystemClock().now().seconds) }
        guard let (t, _) = Timestamp.parseRFC3339(text) else {
            throw UsageError(
                "\(option) \"\(text)\" is not an RFC 3339 time (e.g. 2026-10-14T07:00:00Z or 2026-10-14T09:00:00+02:00) or now")
        }
        return t
    }

    /// The receiver commands are for: the one named, or the only one with write_back on.
    static func writeBackReceiver(_ t: Topology, _ named: String?) throws -> String {
        let candidates = t.receivers.filter { $0.config.kind == "syncky" && $0.config.write_back == true }
        if let named {
            guard let r = t.receivers.first(where: { $0.name == named }) else {
                throw UsageError("no receiver is named \"\(named)\"\(suggestion(named, t.receivers.map(\.name)))")
            }
            guard r.config.write_back == true else {
                throw UsageError(
                    "receiver \(named) has write_back off: set `write_back: true` on it (and turn on "
                        + "Accept writes to Health in the app)")
            }
            return named
        }
        guard let first = candidates.first else {
            throw UsageError("no syncky receiver has `write_back: true`; set it on the receiver the phone sends to")
        }
        guard candidates.count == 1 else {
            throw UsageError(
                "several receivers take write-back (\(candidates.map(\.name).joined(separator: ", "))): say which with --receiver")
        }
        return first.name
    }
}

struct DeleteCommandCLI {
    let options: Options
    let arguments: [String]

    func run() throws -> Int32 {
        guard arguments.count == 1 else { throw UsageError("usage: healthgate delete COMMAND_ID [--receiver NAME]") }
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "delete", sink: StderrLogSink(minimum: .error)))
        ConfigSource.announce("delete", source, t)
        let receiver = try WriteCommandCLI.writeBackReceiver(t, options.values["--receiver"])
        let store = try CommandStore.open(dataDir: t.dataDir, fleet: t.fleet)
        let c = try store.delete(receiver: receiver, id: arguments[0], now: SystemClock().now().seconds)
        print(
            "queued the delete of \(c.id) (version \(c.version), \(c.type)) for receiver \(receiver); "
                + "it goes out in the reply to the phone's next data request")
        return 0
    }
}

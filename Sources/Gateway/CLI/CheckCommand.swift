import Glibc
import HealthgateCore
import Posix
import YAMLConfig

/// `healthgate check`: validates the config and prints what it builds.
struct CheckCommand {
    let options: Options
    init(_ o: Options) { options = o }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options, credentials: .standIn)
        let logger = Logger(component: "check", sink: StderrLogSink(minimum: .warning))
        let (t, unset) = try load(source, logger: logger)
        var dataDirWarning: String?
        switch CheckCommand.dataDirProblem(t.dataDir) {
        case nil: break
        case .warning(let why)?: dataDirWarning = why
        case .error(let why)?: throw UsageError(why)
        }
        func say(_ line: String) { print(CheckCommand.shown(line, unset)) }
        print(
            "config \(source.file): ok\(unset.isEmpty ? "" : " (with \(unset.count) variable(s) not set here: \(unset.joined(separator: ", ")))")"
        )
        say("listen \(t.listenHost):\(t.listenPort)\(t.tls != nil ? " (HTTPS)" : ""), data dir \(t.dataDir)")
        say("receivers:")
        for r in t.receivers {
            say(
                "  \(r.name): \(r.config.kind) POST \(r.receiver.paths.joined(separator: ", ")), "
                    + "auth \(r.config.auth?.type.rawValue ?? "none")\(r.config.hmac != nil ? ", HMAC signatures required" : "")")
        }
        // The graph: receivers → each route's transforms in order → sinks.
        say("routes:")
        for route in t.routes {
            let receivers = t.receivers.map(\.name).filter { route.takes(receiver: $0) }
            let steps = [receivers.joined(separator: ", ")] + route.transforms.map(\.kind) + [route.to.joined(separator: ", ")]
            say("  \(route.name): \(steps.joined(separator: " → "))")
        }
        say("sinks:")
        for s in t.sinks {
            say("  \(s.name): \(s.built.summary); batch \(s.built.common.batch.maxItems)")
        }
        if let api = t.readAPI {
            let scoped = api.tokens.filter { $0.devices != nil }.count
            say(
                "read API: GET \(api.prefix)/{samples,workouts,daily,latest,batches,openapi.json} over sink \(api.sink); "
                    + "\(api.tokens.count) read token(s)\(scoped > 0 ? ", \(scoped) limited to some devices" : "")")
        }
        if let f = t.fleet {
            say(
                "fleet: \(f.brokers.count) broker(s) (\(f.brokers.map(\.shown).joined(separator: ", "))), \(f.partitions) partitions, "
                    + "state in PostgreSQL")
            say("warning: serve runs a fleet's ingest machines (--role ingest), not yet its deliver machines (docs/fleet.md)")
        }
        for w in t.warnings { say("warning: \(w)") }
        if t.receivers.isEmpty { say("warning: the config has no receivers: nothing can send data to this gateway") }
        if let w = dataDirWarning { say("warning: \(w)") }
        return 0
    }

    enum DataDirProblem { case warning(String), error(String) }

    /// Whether `serve` could make and write `dir`: tried for real (a file made and removed in it,
    /// or in the nearest directory that exists when it does not yet). A refusal this user meets
    /// but another might not (permissions, not root) is a warning.
    static func dataDirProblem(_ dir: String) -> DataDirProblem? {
        var existing = dir
        while !FileIO.exists(existing) && existing != "/" && !existing.isEmpty {
            let up = FileIO.dirname(existing)
            if up == existing { break }
            existing = up
        }
        if existing.isEmpty { existing = "." }
        guard FileIO.isDirectory(existing) else {
            return .error("data_dir \(dir) cannot be made: \(existing) is not a directory")
        }
        let probe = FileIO.join(existing, ".healthgate-check-\(getpid())")
        let ok = mkdir(probe, 0o700) == 0
        let e = errno
        if ok { rmdir(probe); return nil }
        let why = String(cString: strerror(e))
        let what = existing == dir ? "written" : "made (in \(existing))"
        if (e == EACCES || e == EPERM) && geteuid() != 0 {
            return .warning(
                "data_dir \(dir) cannot be \(what) by this user (uid \(geteuid())): \(why); "
                    + "fine if serve runs as another user that can")
        }
        return .error("data_dir \(dir) cannot be \(what): \(why)")
    }

    /// The config loaded, and the variables it names that are unset here. Such a variable is
    /// most often a secret only the server's environment has (the example config names a
    /// dozen): the rest is checked with a stand-in for it, and each is said — unless
    /// `--require-env` makes it an error, as it is for `serve`.
    private func load(_ source: ConfigSource, logger: Logger) throws(ConfigProblems) -> (Topology, [String]) {
        let first: ConfigProblems
        do {
            return (try source.load(logger: logger), [])
        } catch {
            first = error
        }
        var unset: [String] = []
        for p in first.problems { if let name = p.unsetVariable, !unset.contains(name) { unset.append(name) } }
        if unset.isEmpty || options.flags.contains("--require-env") { throw first }
        for name in unset { printErr("warning: environment variable \(name) is not set here: checked with a stand-in; serve needs it") }
        let standIns = Dictionary(uniqueKeysWithValues: unset.map { ($0, CheckCommand.standIn($0)) })
        do {
            return (try source.load(logger: logger, standIns: standIns), unset)
        } catch {
            // A value that is wrong only because a stand-in is not what belongs there (`listen:
            // ${LISTEN}`, a url, a file to read) is reported as what it is: the variable is not
            // set — found by where the value is, or by the stand-in's text in the problem.
            let becauseUnset = first.problems.filter { $0.unsetVariable != nil }
            var problems: [ConfigProblem] = []
            for p in error.problems {
                let named = Set(standIns.filter { p.message.contains($0.value) }.keys)
                let originals = becauseUnset.filter {
                    ($0.location != nil && $0.location == p.location) || named.contains($0.unsetVariable!)
                }
                for o in originals.isEmpty ? [p] : originals where !problems.contains(o) { problems.append(o) }
            }
            throw ConfigProblems(problems: problems)
        }
    }

    /// A stand-in's text, wherever `check` prints it (a data dir, a sink's path), shown as the
    /// `${NAME}` it stands for.
    private static func shown(_ line: String, _ unset: [String]) -> String {
        var line = line
        for name in unset { line = line.replacing(standIn(name), with: "${\(name)}") }
        return line
    }

    static func standIn(_ name: String) -> String { "stand-in-for-\(name)-0123456789abcdef" }
}

import HealthgateCore
import Posix
import YAMLConfig

/// `healthgate check`: validates the config and prints what it builds.
struct CheckCommand {
    let options: Options
    init(_ o: Options) { options = o }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let logger = Logger(component: "check", sink: StderrLogSink(minimum: .warning))
        let (t, unset) = try load(source, logger: logger)
        print("config \(source.file): ok\(unset.isEmpty ? "" : " (with \(unset.count) variable(s) not set here: \(unset.joined(separator: ", ")))")")
        print("listen \(t.listenHost):\(t.listenPort)\(t.tls != nil ? " (HTTPS)" : ""), data dir \(t.dataDir)")
        print("receivers:")
        for r in t.receivers {
            print("  \(r.name): \(r.config.kind) POST \(r.receiver.paths.joined(separator: ", ")), "
                  + "auth \(r.config.auth?.type.rawValue ?? "none")\(r.config.hmac != nil ? ", HMAC signatures required" : "")")
        }
        // The graph: receivers → each route's transforms in order → sinks.
        print("routes:")
        for route in t.routes {
            let receivers = t.receivers.map(\.name).filter { route.takes(receiver: $0) }
            let steps = [receivers.joined(separator: ", ")] + route.transforms.map(\.kind) + [route.to.joined(separator: ", ")]
            print("  \(route.name): \(steps.joined(separator: " → "))")
        }
        print("sinks:")
        for s in t.sinks {
            print("  \(s.name): \(s.built.summary); batch \(s.built.common.batch.maxItems)")
        }
        if let api = t.readAPI {
            let scoped = api.tokens.filter { $0.devices != nil }.count
            print("read API: GET \(api.prefix)/{samples,workouts,daily,latest,batches,openapi.json} over sink \(api.sink); "
                  + "\(api.tokens.count) read token(s)\(scoped > 0 ? ", \(scoped) limited to some devices" : "")")
        }
        for w in t.warnings { print("warning: \(w)") }
        return 0
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
        let standIns = Dictionary(uniqueKeysWithValues: unset.map { ($0, "stand-in-for-\($0)-0123456789abcdef") })
        do {
            return (try source.load(logger: logger, standIns: standIns), unset)
        } catch {
            // A value that is wrong only because a stand-in is not what belongs there (`listen:
            // ${LISTEN}`, a url) is reported as what it is: the variable is not set.
            let becauseUnset = first.problems.filter { $0.unsetVariable != nil }
            var problems: [ConfigProblem] = []
            for p in error.problems {
                if let original = becauseUnset.first(where: { $0.location != nil && $0.location == p.location }) {
                    if !problems.contains(original) { problems.append(original) }
                } else {
                    problems.append(p)
                }
            }
            throw ConfigProblems(problems: problems)
        }
    }
}

import HealthgateCore
import Posix

/// `healthgate check`: validates the config and prints what it builds.
struct CheckCommand {
    let options: Options
    init(_ o: Options) { options = o }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let logger = Logger(component: "check", sink: StderrLogSink(minimum: .warning))
        let t = try source.load(logger: logger)
        print("config \(source.file): ok")
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
}

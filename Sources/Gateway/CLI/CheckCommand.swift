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
        print("routes:")
        for route in t.routes {
            let transforms = route.transforms.isEmpty ? "" : " (\(route.transforms.count) transform(s))"
            print("  \(route.name): \(route.from.map(\.pattern).joined(separator: ", ")) -> \(route.to.joined(separator: ", "))\(transforms)")
        }
        print("sinks:")
        for s in t.sinks {
            print("  \(s.name): \(s.built.summary); batch \(s.built.common.batch.maxItems)")
        }
        for w in t.warnings { print("warning: \(w)") }
        return 0
    }
}

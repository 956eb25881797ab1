import HealthgateCore
import Pipeline
import Posix

/// `healthgate forget SINK`: lets go of the records that wait for a sink taken out of the
/// config. Until then the journal keeps them (within its budget: past it they go to the sink's
/// dead letters), so that putting the sink back delivers them. A running `serve` takes it
/// within a second; its segments are then deleted once no other sink needs them.
struct ForgetCommand {
    let options: Options
    let sink: String

    init(_ o: Options, sink: String) {
        options = o
        self.sink = sink
    }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "forget", sink: StderrLogSink(minimum: .error)))
        if t.sinks.contains(where: { $0.name == sink }) {
            throw UsageError("sink \(sink) is in the config: take it out first (and reload), then forget what waits for it")
        }
        guard try RemovedSinks.forget(sink, dataDir: t.dataDir) else {
            print("nothing waits for a sink named \(sink) in \(t.dataDir)")
            return 0
        }
        print("sink \(sink): what waited for it is let go (its cursor is kept as sinks/\(sink)/cursor.forgotten); "
              + (GatewayService.isServing(dataDir: t.dataDir) ? "serve lets the journal drop it within a second"
                                                             : "the next serve lets the journal drop it"))
        return 0
    }
}

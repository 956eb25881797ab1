import HealthgateCore
import Pipeline
import Posix

/// `healthgate resume SINK [--skip]`: goes on with a sink the crash-loop guard paused (after
/// three starts in a row that died on it at one place). Without `--skip` the sink tries the
/// same records again (after an upgrade that fixed the crash); with it, the records it was
/// working on go to its dead letters and it goes on after them. A running `serve` takes the
/// request within a second; otherwise the next start does.
struct ResumeCommand {
    let options: Options
    let sink: String

    init(_ o: Options, sink: String) {
        options = o
        self.sink = sink
    }

    func run() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "resume", sink: StderrLogSink(minimum: .error)))
        guard t.sinks.contains(where: { $0.name == sink }) else {
            throw UsageError("no sink is named \"\(sink)\"\(suggestion(sink, t.sinks.map(\.name)))")
        }
        let guardFiles = CrashGuard(sink: sink, sinkDirectory: SinkDrainer.stateDirectory(sink: sink, dataDir: t.dataDir))
        guard let pause = guardFiles.paused() else {
            print("sink \(sink) is not paused; nothing to do")
            return 0
        }
        let skip = options.flags.contains("--skip")
        try guardFiles.requestResume(skip: skip)
        let what = skip
            ? "the records it was working on (from journal entry \(pause.from.seq), record \(pause.from.skip), to entry \(pause.to.seq), "
                + "record \(pause.to.skip)) go to \(DeadLetters.path(sink: sink, dataDir: t.dataDir)), and it goes on after them"
            : "it tries its records again from journal entry \(pause.from.seq), record \(pause.from.skip)"
        if GatewayService.isServing(dataDir: t.dataDir) {
            print("sink \(sink): resumed; serve takes it up within a second: \(what)")
        } else {
            print("sink \(sink): will resume when serve starts: \(what)")
        }
        return 0
    }
}

import HealthgateCore
import Pipeline
import Posix

/// The commands that act on one sink's files in the data dir, beside a running `serve` or
/// before the next one: `healthgate resume SINK [--skip]` and `healthgate forget SINK`. A
/// running `serve` takes what they ask within a second; otherwise its next start does.
struct SinkCommand {
    let options: Options
    let sink: String

    init(_ o: Options, sink: String) {
        options = o
        self.sink = sink
    }

    /// When what it asked is taken up.
    func when(_ dataDir: String) -> String {
        GatewayService.isServing(dataDir: dataDir) ? "serve takes it up within a second" : "the next serve takes it up"
    }

    /// `resume`: goes on with a sink the crash-loop guard paused (three starts in a row that died
    /// on it at one place). Without `--skip` it tries the same records again (after an upgrade
    /// that fixed the crash); with it, the records it was working on go to its dead letters first.
    func resume() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "resume", sink: StderrLogSink(minimum: .error)))
        ConfigSource.announce("resume", source, t)
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
        let what =
            skip
            ? "the records it was working on (from journal entry \(pause.from.seq), record \(pause.from.skip), to entry \(pause.to.seq), "
                + "record \(pause.to.skip)) go to \(DeadLetters.path(sink: sink, dataDir: t.dataDir)), and it goes on after them"
            : "it tries its records again from journal entry \(pause.from.seq), record \(pause.from.skip)"
        print("sink \(sink): resumed (\(when(t.dataDir))): \(what)")
        return 0
    }

    /// `forget`: lets go of the records that wait for a sink taken out of the config. Until then
    /// the journal keeps them (within its budget: past it they go to the sink's dead letters).
    func forget() throws -> Int32 {
        let source = try ConfigSource.resolve(options)
        let t = try source.load(logger: Logger(component: "forget", sink: StderrLogSink(minimum: .error)))
        ConfigSource.announce("forget", source, t)
        if t.sinks.contains(where: { $0.name == sink }) {
            throw UsageError("sink \(sink) is in the config: take it out first (and reload), then forget what waits for it")
        }
        guard try RemovedSinks.forget(sink, dataDir: t.dataDir) else {
            print("nothing waits for a sink named \(sink) in \(t.dataDir)")
            return 0
        }
        print(
            "sink \(sink): what waited for it is let go (its cursor is kept as sinks/\(sink)/cursor.forgotten); "
                + "the journal drops it once no other sink needs it (\(when(t.dataDir)))")
        return 0
    }
}

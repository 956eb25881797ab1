import CLinux
import Fleet
import Glibc
import HealthgateCore
import Pipeline
import Posix
import YAMLConfig

/// `healthgate serve`: runs until SIGTERM or SIGINT, then shuts down gracefully.
struct ServeCommand {
    let options: Options
    init(_ o: Options) { options = o }

    /// `--role ingest|deliver|all` (default all).
    static func role(_ options: Options) throws(UsageError) -> FleetRole {
        guard let given = options.values["--role"] else { return .all }
        guard let role = FleetRole(rawValue: given) else {
            throw UsageError("--role is ingest, deliver or all (the default), not \"\(given)\"")
        }
        return role
    }

    func run() throws -> Int32 {
        // One heap, not eight a core: memory a big request or a drain's batch used is reused by
        // the next, whichever thread frees it and allocates again (less memory at peak for the
        // same CPU: docs/benchmarks.md). MALLOC_ARENA_MAX in the environment still wins, for
        // whoever tunes it.
        if DefaultConfig.env("MALLOC_ARENA_MAX") == nil { hg_limit_malloc_arenas(1) }
        if DefaultConfig.env("MALLOC_TRIM_THRESHOLD_") == nil && DefaultConfig.env("GLIBC_TUNABLES") == nil {
            hg_keep_freed_memory(64 << 20, 4 << 20)
        }
        let role = try ServeCommand.role(options)
        let logSink = StderrLogSink(minimum: .info)
        let logger = Logger(component: "healthgate", sink: logSink)
        let source = try ConfigSource.resolve(options, credentials: .make)
        let topology = try source.load(logger: logger)
        if role != .all && topology.fleet == nil {
            throw UsageError(
                "--role \(role.rawValue) runs one part of a fleet: \(source.file) needs a fleet: section (brokers, state, "
                    + "partitions; docs/fleet.md)")
        }
        logSink.configure(
            minimum: topology.log.level?.level ?? .info,
            format: topology.log.format == .json ? .json : .logfmt)
        for w in topology.warnings { logger.warning(w) }

        var signatureClock: any Clock = SystemClock()
        if let now = DefaultConfig.env("HEALTHGATE_NOW") {
            guard let secs = Int64(now) else { throw UsageError("HEALTHGATE_NOW must be Unix seconds, not \"\(now)\"") }
            signatureClock = FixedClock(Timestamp(seconds: secs))
            logger.warning(
                "HEALTHGATE_NOW is set: signatures are checked against \(Timestamp(seconds: secs)), not the real clock. This is for tests only."
            )
        }

        // Block the stop signals in every thread; this one waits for them.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
        // A crash on a sink's threads is noted in that sink's crash note (the crash-loop guard).
        CrashAttribution.install()

        let service = try GatewayService(
            topology: topology, logger: logger, clock: options.clock, signatureClock: signatureClock, role: role)
        let port = try service.start()
        let scheme = topology.tls != nil ? "https" : "http"
        print("healthgate \(CLI.version): config \(source.file), data dir \(topology.dataDir)")
        print("listening on \(scheme)://\(topology.listenHost):\(port)")
        for r in topology.receivers {
            print("receiver \(r.name): POST \(r.receiver.paths.joined(separator: ", ")) (\(r.config.kind))")
        }
        var t = topology
        t.listenPort = port
        // The link holds the token and the secret: print it to a terminal only, never into a
        // file, a pipe or a service's log (journald).
        if let s = topology.receivers.first(where: { $0.config.kind == "syncky" }) {
            if isatty(1) == 1,
                let link = try? SetupLink.build(
                    receiver: s.name, config: s.config, topology: t, host: nil,
                    format: "native", scheme: "syncky")
            {
                print("Syncky setup link for receiver \(s.name) (it holds the token and secret; show it only to the phone's owner):")
                print("  \(link)")
                if isatty(1) == 1, let qr = try? TerminalQR.render(link) {
                    print("Scan it in Syncky (Settings › Connections › + › Paste a setup link):")
                    print(qr, terminator: "")
                }
                if let w = SetupLink.hostWarning(config: s.config, topology: t, host: nil) { print(w) }
            } else {
                // The embedded default finds its data dir the same way `link` will.
                print(
                    "Syncky setup link (it holds the token and secret, so it is printed on a terminal only): "
                        + "run `healthgate link --qr --receiver \(s.name)\(options.config.map { " --config \($0)" } ?? "")`")
            }
        }
        fflush(nil)

        var sig: Int32 = 0
        while true {
            sigwait(&set, &sig)
            guard sig == SIGHUP else { break }
            reload(source, service: service, logSink: logSink, logger: logger)
        }
        logger.info(
            "received \(sig == SIGTERM ? "SIGTERM" : "SIGINT"); stopping within \(formatSeconds(topology.shutdownTimeout)) "
                + "(shutdown_timeout)")
        // Whatever hangs (a sink's close, a disk), the process is gone soon after the deadline;
        // what was not delivered is in the journal, and acknowledged data is never in memory only.
        let hardDeadline = topology.shutdownTimeout + 2
        let watchdog = startThread {
            sleep(UInt32(hardDeadline.rounded(.up)))
            logger.error("still stopping \(formatSeconds(hardDeadline)) after the signal: exiting now")
            _exit(0)
        }
        if case .success(let t) = watchdog { pthread_detach(t) }
        service.stop()
        logger.info("stopped")
        return 0
    }

    /// SIGHUP: the config file read and checked again; a bad one is refused with its problems
    /// and the running config stays.
    func reload(_ source: ConfigSource, service: GatewayService, logSink: StderrLogSink, logger: Logger) {
        guard !source.isEmbedded else {
            logger.warning("SIGHUP: serve runs on the embedded default, which has no file to read again; nothing reloaded")
            return
        }
        let new: Topology
        do {
            new = try ConfigSource.resolve(options).load(logger: logger)
        } catch let problems as ConfigProblems {
            logger.error("SIGHUP: \(source.file) is refused, the running config stays: \(problems.problems.count) problem(s)")
            for p in problems.problems { logger.error("SIGHUP: \(p)") }
            return
        } catch {
            logger.error("SIGHUP: \(source.file) cannot be read (\(error)); the running config stays")
            return
        }
        for w in new.warnings { logger.warning(w) }
        let said = service.reload(new)
        logSink.configure(minimum: new.log.level?.level ?? .info, format: new.log.format == .json ? .json : .logfmt)
        logger.info("SIGHUP: \(source.file) reloaded" + (said.isEmpty ? "; nothing else changed" : ""))
        for line in said { logger.info("SIGHUP: \(line)") }
    }
}

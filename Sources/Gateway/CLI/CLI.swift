import Glibc
import HealthgateCore
import Posix
import Transforms
import YAMLConfig

/// The command line: one type per subcommand, shared options parsed once.
/// Exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config.
public enum CLI {
    public static let version = Healthgate.version

    public static let usage = """
        healthgate \(version) — a gateway for Apple Health data

        usage:
          healthgate serve [[--config] FILE] [--role ingest|deliver|all]
                                               run the gateway (no config: ./healthgate.yaml, else the embedded default);
                                               --role: one part of a fleet (the config's fleet:; docs/fleet.md)
          healthgate init  [[--config] FILE] [--force] [--new-credentials]
                                               write a config; the token and secret serve made here are kept (--new-credentials: fresh ones)
          healthgate check [[--config] FILE] [--require-env]
                                               validate the config; print receivers, routes and sinks (an unset
                                               ${VAR} is a warning, checked with a stand-in; --require-env: an error)
          healthgate link  [--receiver NAME] [--host HOST] [--format F] [--scheme S] [--qr] [--config FILE]
                                               print the Syncky setup link (--qr: and its QR code)
          healthgate write TYPE VALUE [UNIT] --at TIME [--end TIME] [--receiver NAME] [--id ID] [--force]
                                               queue a write-back command (sent in the reply to the next data request)
          healthgate delete COMMAND_ID [--receiver NAME]
                                               queue the delete of what a command wrote
          healthgate status [[--config] FILE]  per sink: records waiting, oldest, sent/kept/rejected, last error
          healthgate resume SINK [--skip]      go on with a sink the crash-loop guard paused (--skip: its batch to dead letters)
          healthgate forget SINK               let go of what waits for a sink taken out of the config
          healthgate replay FILE.ndjson [--sink NAME] [--config FILE]
                                               deliver an archive, or a sink's dead letters, again
          healthgate replay --journal [--since TIME] [--sink NAME]
          healthgate replay --sink NAME      (fleet: the sink's dead-letter queue)
                                               deliver again what the journal still holds
          healthgate version                   the version, the commit and the day it was built
          healthgate help [COMMAND]            this text, or one command's (also: healthgate COMMAND --help)

        environment:
          HEALTHGATE_CONFIG     the config file when --config is not given
          HEALTHGATE_DATA_DIR   the embedded default's data dir (default ./healthgate-data)
          HEALTHGATE_LISTEN     the embedded default's listen address (default 0.0.0.0:8080)
          HEALTHGATE_NOW        Unix seconds that replace the clock in signature checks (tests only)
        """

    static let commands = ["serve", "init", "check", "link", "write", "delete", "status", "resume", "forget", "replay", "version", "help"]

    /// One command's lines of `usage` (its own and those that go on from it), or nil.
    static func commandUsage(_ command: String) -> String? {
        guard commands.contains(command) else { return nil }
        var out: [Substring] = []
        var taking = false
        for line in usage.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  healthgate ") {
                taking = line == "  healthgate \(command)" || line.hasPrefix("  healthgate \(command) ")
                if taking { out.append(line) }
            } else if taking && line.hasPrefix("        ") {
                out.append(line)
            } else {
                taking = false
            }
        }
        if out.isEmpty && command == "help" { return "usage:\n  healthgate help [COMMAND]            this text, or one command's" }
        return out.isEmpty ? nil : "usage:\n" + out.joined(separator: "\n")
    }

    /// `transforms`: the transform kinds routes may name (`healthgate-testserve` adds test ones);
    /// `clock`: the wall clock `serve` runs on (`healthgate-testserve` moves it, to cross a
    /// phone's midnight without waiting for it).
    public static func main(
        _ arguments: [String],
        transforms: [(name: String, build: TransformRegistry.Builder)] = TransformRegistry.builders,
        clock: any WaitClock = SystemClock()
    ) -> Int32 {
        func Options(_ a: [String], allowed: Set<String>) throws(UsageError) -> Gateway.Options {
            var o = try Gateway.Options(a, allowed: allowed)
            o.transforms = transforms
            o.clock = clock
            return o
        }
        var args = Array(arguments.dropFirst())
        guard let command = args.first else {
            printErr(usage)
            return 2
        }
        args.removeFirst()
        // `healthgate COMMAND --help`: that command's usage, whatever else is on the line.
        if args.contains("--help") || args.contains("-h"), let u = commandUsage(command) {
            print(u)
            return 0
        }
        do {
            switch command {
            case "serve": return try ServeCommand(try Options(try configPositional(args), allowed: ["--role"])).run()
            case "init": return try InitCommand(try Options(try configPositional(args), allowed: ["--force", "--new-credentials"])).run()
            case "check": return try CheckCommand(try Options(try configPositional(args), allowed: ["--require-env"])).run()
            case "link": return try LinkCommand(try Options(args, allowed: ["--receiver", "--host", "--format", "--scheme", "--qr"])).run()
            case "status": return try StatusCommand(try Options(try configPositional(args), allowed: [])).run()
            case "forget":
                let (positional, rest) = Gateway.Options.split(args)
                guard positional.count == 1, let sink = positional.first else {
                    throw UsageError("which sink? `healthgate forget SINK [--config FILE]` (one taken out of the config)")
                }
                return try SinkCommand(try Options(rest, allowed: []), sink: sink).forget()
            case "resume":
                let (positional, rest) = Gateway.Options.split(args)
                guard positional.count == 1, let sink = positional.first else {
                    throw UsageError("which sink? `healthgate resume SINK [--skip] [--config FILE]`")
                }
                return try SinkCommand(try Options(rest, allowed: ["--skip"]), sink: sink).resume()
            case "replay":
                let file = args.first.flatMap { $0.hasPrefix("-") ? nil : $0 }
                let o = try Options(file == nil ? args : Array(args.dropFirst()), allowed: ["--sink", "--journal", "--since"])
                if file == nil && !o.flags.contains("--journal") && o.values["--sink"] == nil {
                    throw UsageError(
                        "which file? `healthgate replay FILE.ndjson [--sink NAME]`, `--journal [--since TIME]`, or (in a "
                            + "fleet) `--sink NAME` for its dead-letter queue")
                }
                if file != nil && (o.flags.contains("--journal") || o.values["--since"] != nil) {
                    throw UsageError("give a FILE or --journal, not both (--since goes with --journal)")
                }
                return try ReplayCommand(o, file: file).run()
            case "version", "--version", "-V":
                let b = Healthgate.build
                print("healthgate \(version) (commit \(b.commit), built \(b.date))")
                return 0
            case "help", "--help", "-h":
                guard let name = args.first else {
                    print(usage)
                    return 0
                }
                guard let u = commandUsage(name) else {
                    throw UsageError("no command \"\(name)\"\(suggestion(name, commands)); `healthgate help` lists them")
                }
                print(u)
                return 0
            case "write":
                let (positional, rest) = Gateway.Options.split(args)
                return try WriteCommandCLI(
                    options: try Options(rest, allowed: ["--at", "--end", "--receiver", "--id", "--force"]),
                    arguments: positional
                ).run()
            case "delete":
                let (positional, rest) = Gateway.Options.split(args)
                return try DeleteCommandCLI(options: try Options(rest, allowed: ["--receiver"]), arguments: positional).run()
            default:
                printErr("healthgate: unknown command \"\(command)\"\(suggestion(command, commands))\n\n\(usage)")
                return 2
            }
        } catch let e as UsageError {
            printErr("healthgate \(command): \(e.message)")
            return 2
        } catch let e as CommandCheck.Failure {
            printErr("healthgate \(command): \(e.description)")
            return 2
        } catch let e as ConfigProblems {
            printErr(e.description)
            printErr("healthgate \(command): the config has \(e.problems.count) problem(s); nothing was started")
            return 2
        } catch {
            printErr("healthgate \(command): \(error)")
            return 1
        }
    }
}

public struct UsageError: Error {
    public var message: String
    public init(_ m: String) { message = m }
}

/// `healthgate check FILE` as `healthgate check --config FILE` (serve, init and status too):
/// the one positional argument is the config file.
func configPositional(_ args: [String]) throws(UsageError) -> [String] {
    let (positional, rest) = Options.split(args)
    guard let file = positional.first, !file.hasPrefix("-") else { return args }
    guard positional.count == 1 else {
        throw UsageError("one config file, not \(positional.count) (\(positional.joined(separator: " ")))")
    }
    if rest.contains(where: { $0 == "--config" || $0.hasPrefix("--config=") }) {
        throw UsageError("the config is \(file) or --config, not both")
    }
    return rest + ["--config", file]
}

/// `--config FILE` and each command's own flags.
struct Options {
    var config: String?
    var transforms: [(name: String, build: TransformRegistry.Builder)] = TransformRegistry.builders
    var clock: any WaitClock = SystemClock()
    var values: [String: String] = [:]
    var flags: Set<String> = []

    static let valueOptions: Set<String> = [
        "--config", "--receiver", "--host", "--format", "--scheme", "--sink", "--since",
        "--at", "--end", "--id", "--role"
    ]

    /// Positional arguments (before, between or after options) and the options.
    static func split(_ args: [String]) -> ([String], [String]) {
        var positional: [String] = []
        var rest: [String] = []
        var i = 0
        while i < args.count {
            let a = args[i]
            if a.hasPrefix("--") {
                rest.append(a)
                if valueOptions.contains(a), i + 1 < args.count, !a.contains("=") {
                    rest.append(args[i + 1])
                    i += 1
                }
            } else {
                positional.append(a)
            }
            i += 1
        }
        return (positional, rest)
    }

    init(_ args: [String], allowed: Set<String>) throws(UsageError) {
        var i = 0
        while i < args.count {
            var a = args[i]
            var inline: String?
            if let eq = a.firstIndex(of: "="), a.hasPrefix("--") {
                inline = String(a[a.index(after: eq)...])
                a = String(a[..<eq])
            }
            guard a == "--config" || allowed.contains(a) else {
                throw UsageError("unknown option \"\(a)\"\(suggestion(a, ["--config"] + allowed.sorted()))")
            }
            if Options.valueOptions.contains(a) {
                let v: String
                if let inline {
                    v = inline
                } else {
                    guard i + 1 < args.count else { throw UsageError("\(a) needs a value") }
                    i += 1
                    v = args[i]
                }
                if a == "--config" { config = v } else { values[a] = v }
            } else {
                flags.insert(a)
            }
            i += 1
        }
        if config == nil, let env = getenv("HEALTHGATE_CONFIG") { config = String(cString: env) }
    }
}

func printErr(_ s: String, newline: Bool = true) {
    var line = Array(s.utf8)
    if newline { line.append(0x0A) }
    line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}

func environment() -> [String: String] {
    var env: [String: String] = [:]
    var p = environ
    while let entry = p.pointee {
        let s = String(cString: entry)
        if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
        p += 1
    }
    return env
}

/// Which config a command uses: --config / HEALTHGATE_CONFIG, else ./healthgate.yaml, else the
/// embedded default (whose token and secret are made once and kept in the data dir).
struct ConfigSource {
    var text: String
    var file: String
    var isEmbedded: Bool
    var transforms: [(name: String, build: TransformRegistry.Builder)] = TransformRegistry.builders

    static let conventionalPath = "healthgate.yaml"

    /// What the embedded default does when its data dir holds no token and secret yet: only
    /// `serve` makes them; `check` checks with stand-ins; every other command refuses, since it
    /// would be looking at a data dir no gateway uses (a `link` run from another directory once
    /// minted a token no serve knew).
    enum Credentials { case make, standIn, existing }

    static func resolve(_ options: Options, credentials: Credentials = .existing) throws -> ConfigSource {
        var source = try find(options, credentials: credentials)
        source.transforms = options.transforms
        return source
    }

    /// One line on stderr naming the config and the data dir a command used, so that a command
    /// run from the wrong place says so.
    static func announce(_ command: String, _ source: ConfigSource, _ t: Topology) {
        let file = source.isEmbedded ? source.file : FileIO.absolute(source.file)
        printErr("healthgate \(command): config \(file), data dir \(FileIO.absolute(t.dataDir))")
    }

    private static func find(_ options: Options, credentials: Credentials) throws -> ConfigSource {
        if let path = options.config {
            guard let text = try read(path) else {
                throw UsageError("\(path): no such config file (create one with `healthgate init --config \(path)`)")
            }
            return ConfigSource(text: text, file: path, isEmbedded: false)
        }
        if let text = try read(conventionalPath) {
            return ConfigSource(text: text, file: conventionalPath, isEmbedded: false)
        }
        return ConfigSource(text: try DefaultConfig.embedded(credentials), file: "(embedded default)", isEmbedded: true)
    }

    /// The file's text, or nil when there is none. One this process may not read is an error
    /// that says so and who the process runs as (it used to say "no such config file").
    static func read(_ path: String) throws -> String? {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.readAll(path)
        } catch {
            if error.code == ENOENT || error.code == ENOTDIR { return nil }
            guard error.code == EACCES || error.code == EPERM else { throw error }
            throw UsageError(
                "\(path): permission denied: healthgate runs as \(Self.runningAs()) and may not read this file or "
                    + "search a directory above it. Give that user read access (the systemd unit runs as healthgate: "
                    + "`sudo chgrp healthgate /etc/healthgate /etc/healthgate/healthgate.yaml`, "
                    + "`sudo chmod 0750 /etc/healthgate`, `sudo chmod 0640 /etc/healthgate/healthgate.yaml`)")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func runningAs() -> String {
        let uid = geteuid()
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return "uid \(uid)" }
        return "user \(String(cString: name)) (uid \(uid))"
    }

    func load(logger: Logger, standIns: [String: String] = [:]) throws(ConfigProblems) -> Topology {
        try ConfigLoader.load(
            text: text, file: file, environment: environment().merging(standIns) { real, _ in real },
            logger: logger, transforms: transforms)
    }
}

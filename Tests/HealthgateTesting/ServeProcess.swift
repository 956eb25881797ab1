import Foundation
import Glibc

/// A real `healthgate serve` in a child process, on a free loopback port, with its own
/// temporary data dir. Tests talk to it over real HTTP and can kill it.
final class ServeProcess {
    let process = Process()
    let dataDir: String
    let configPath: String
    let binary: String
    private(set) var port: UInt16 = 0
    let stdoutPipe = Pipe()
    let stderrPipe = Pipe()
    /// Each pipe read to its end on a thread of its own (internal for ShutdownTests).
    private(set) var stdoutReader: PipeReader?
    private(set) var stderrReader: PipeReader?
    /// What `serve` wrote to stdout so far.
    var stdoutText: String { stdoutReader?.buffer.text ?? "" }
    /// What the test noted beside serve's stderr.
    private let notes = LockedBuffer()

    static var binary: String {
        if let b = ProcessInfo.processInfo.environment["HEALTHGATE_BIN"] { return b }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        for c in ["release", "debug"] {
            let p = root.appendingPathComponent(".build/\(c)/healthgate").path
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return root.appendingPathComponent(".build/release/healthgate").path
    }

    /// `healthgate` with the test transforms (`Tests/TestServe`), built with the tests
    /// (`HEALTHGATE_TESTSERVE_BIN` names another build of it: the sanitizer runs').
    static var testServeBinary: String {
        if let given = ProcessInfo.processInfo.environment["HEALTHGATE_TESTSERVE_BIN"] { return given }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/healthgate-testserve").path
    }

    /// A new directory under `$TMPDIR` (`make test` gives the run one of its own and removes
    /// it afterwards), else /tmp.
    static func makeTempDir(_ tag: String = "hg") -> String {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? "/tmp"
        var template = Array("\(base)/\(tag)-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    /// Starts `serve` with `config` (where `DATA_DIR` is replaced by the temporary data dir).
    /// `listening: false` for a start that may die before it listens (a crash-loop test's).
    init(
        config: String, dataDir: String? = nil, environment: [String: String] = [:], binary: String? = nil,
        listening: Bool = true, arguments extra: [String] = []
    ) throws {
        let dir = dataDir ?? ServeProcess.makeTempDir()
        self.dataDir = dir
        self.binary = binary ?? ServeProcess.binary
        configPath = dir + ".yaml"
        try config.replacingOccurrences(of: "DATA_DIR", with: dir).write(toFile: configPath, atomically: true, encoding: .utf8)
        try launch(arguments: ["serve", "--config", configPath] + extra, cwd: nil, environment: environment, listening: listening)
    }

    /// Starts the binary with its own arguments (e.g. `serve` on the embedded default).
    init(arguments: [String], cwd: String, environment: [String: String]) throws {
        dataDir = environment["HEALTHGATE_DATA_DIR"] ?? cwd + "/healthgate-data"
        configPath = ""
        binary = ServeProcess.binary
        try launch(arguments: arguments, cwd: cwd, environment: environment)
    }

    private func launch(arguments: [String], cwd: String?, environment: [String: String], listening: Bool = true) throws {
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        if let cwd { process.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        var env = ProcessInfo.processInfo.environment
        env["HEALTHGATE_CONFIG"] = nil
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()
        stdoutReader = PipeReader(stdoutPipe)
        stderrReader = PipeReader(stderrPipe)
        guard listening else { return }
        // Wait for the listening line to tell the port.
        let deadline = Date().addingTimeInterval(20)
        while port == 0 {
            guard Date() < deadline, process.isRunning else {
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                process.waitUntilExit()
                _ = stdoutReader?.wait(10)
                _ = stderrReader?.wait(10)
                throw ServeError(description: "serve did not start: \(stdoutText)\n\(stderrText)")
            }
            for line in stdoutText.split(separator: "\n") where line.hasPrefix("listening on ") {
                if let p = line.split(separator: ":").last.flatMap({ UInt16($0) }) { port = p }
            }
            if port == 0 { usleep(10_000) }
        }
    }

    var stderrText: String { (stderrReader?.buffer.text ?? "") + notes.text }

    /// Sends a signal and waits for the process to end.
    func stop(signal: Int32 = SIGTERM) {
        if process.isRunning {
            kill(process.processIdentifier, signal)
            // serve ends within its shutdown_timeout (20 s by default) whatever its sinks do: past a
            // minute it is hung, and killed so that the run goes on (and the test sees it in stderr).
            if !process.waitUntilExit(within: 60) {
                notes.append(Data("\n(the test killed serve: still running 60 s after signal \(signal))\n".utf8))
            }
        }
        // What the process wrote last: its pipes end when it does.
        if !process.isRunning {
            _ = stdoutReader?.wait(10)
            _ = stderrReader?.wait(10)
        }
    }

    deinit { stop(signal: SIGKILL) }

    func client() -> RawHTTPClient { RawHTTPClient(port: port) }

    /// A counter from `/metrics`: the value of `name{sink="…"}` (nil when it is not there).
    /// `/healthz` as JSON; empty when it does not answer.
    func healthz() -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(client().request("GET", "/healthz").body)) as? [String: Any]) ?? [:]
    }

    func metric(_ name: String, sink: String) -> Int? {
        guard let text = try? client().request("GET", "/metrics").text else { return nil }
        let prefix = "\(name){sink=\"\(sink)\"} "
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) }
    }

    /// Every NDJSON line under `<data_dir>/<sub>`, parsed.
    func ndjson(under sub: String) -> [[String: Any]] {
        ServeProcess.ndjson(under: dataDir + "/" + sub)
    }

    static func ndjson(under dir: String) -> [[String: Any]] {
        var out: [[String: Any]] = []
        guard let e = FileManager.default.enumerator(atPath: dir) else { return out }
        for case let rel as String in e where rel.hasSuffix(".ndjson") {
            guard let text = try? String(contentsOfFile: dir + "/" + rel, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                if let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { out.append(o) }
            }
        }
        return out
    }

    /// Waits until `condition` holds or `seconds` pass.
    static func eventually(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }
}

struct ServeError: Error, CustomStringConvertible {
    var description: String
}

/// A pipe read to its end on a thread of its own, with plain blocking reads. Not a
/// `readabilityHandler`: its dispatch source on the descriptor crashed libdispatch's event loop
/// (`_dispatch_event_loop_drain`) in test runs, again and again, when a source's descriptor was
/// closed and reused before libdispatch let go of it. The thread holds the pipe, so its
/// descriptor stays open until the end is read.
final class PipeReader: @unchecked Sendable {
    let buffer = LockedBuffer()
    /// Whether the end of the pipe was read (the writer gone), under the condition's lock.
    private let ended = NSCondition()
    private var finished = false

    init(_ pipe: Pipe) {
        Thread { [self] in
            let fd = pipe.fileHandleForReading.fileDescriptor
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    buffer.append(Data(chunk[0..<n]))
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            withExtendedLifetime(pipe) {}
            ended.lock()
            finished = true
            ended.broadcast()
            ended.unlock()
        }.start()
    }

    var isDone: Bool { wait(0) }

    /// Waits at most `seconds` for the end of the pipe; whether it came.
    func wait(_ seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        ended.lock()
        defer { ended.unlock() }
        while !finished && ended.wait(until: deadline) {}
        return finished
    }
}

final class LockedBuffer: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()

    func append(_ d: Data) {
        lock.lock()
        data.append(d)
        lock.unlock()
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }
}

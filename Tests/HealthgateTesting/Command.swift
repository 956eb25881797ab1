import Foundation
import Glibc

/// Runs a program to its end, or past `timeout` seconds kills it and whatever it started (a hung
/// program must not hang the run). What it writes goes to files, not pipes: a program it started
/// and left behind (Chromium's helpers, a shell's background job) would hold a pipe open and a
/// read to its end would never return.
enum Command {
    /// Its exit status and what it wrote, stdout and stderr together.
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        cwd: String? = nil, timeout: Double = 300
    ) throws -> (Int32, String) {
        let r = try spawn(executable, arguments, environment: environment, cwd: cwd, timeout: timeout, stderr: .withStdout)
        return (r.status, r.out)
    }

    /// Its exit status, its stdout and its stderr apart.
    static func runApart(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        cwd: String? = nil, timeout: Double = 300
    ) throws -> (status: Int32, out: String, err: String) {
        try spawn(executable, arguments, environment: environment, cwd: cwd, timeout: timeout, stderr: .apart)
    }

    /// Its exit status and its stdout; stderr thrown away.
    static func runQuiet(_ executable: String, _ arguments: [String], timeout: Double) throws -> (Int32, String) {
        let r = try spawn(executable, arguments, environment: nil, cwd: nil, timeout: timeout, stderr: .discarded)
        return (r.status, r.out)
    }

    enum Stderr { case withStdout, apart, discarded }

    private static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String]?, cwd: String?,
        timeout: Double, stderr: Stderr
    ) throws -> (status: Int32, out: String, err: String) {
        let dir = ServeProcess.makeTempDir("command")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outPath = dir + "/out", errPath = dir + "/err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        guard let out = FileHandle(forWritingAtPath: outPath), let err = FileHandle(forWritingAtPath: errPath) else {
            throw ServeError(description: "cannot make the output files of \(executable) in \(dir)")
        }
        defer { try? out.close(); try? err.close() }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        // A mark in the environment of all it starts: what leaves its process group (a session
        // of its own, as `script` makes for its terminal) is found by it and ended too.
        let (key, tag) = ("HEALTHGATE_TEST_COMMAND", (dir as NSString).lastPathComponent)
        p.environment = (environment ?? ProcessInfo.processInfo.environment).merging([key: tag]) { $1 }
        let mark = key + "=" + tag
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        p.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        p.standardOutput = out
        switch stderr {
        case .withStdout: p.standardError = out
        case .apart: p.standardError = err
        case .discarded: p.standardError = FileHandle(forWritingAtPath: "/dev/null")
        }
        try p.run()
        let timedOut = !p.waitUntilExit(within: timeout) { killMarked(mark) }
        kill(-p.processIdentifier, SIGKILL) // and whatever it left behind, in its process group
        killMarked(mark)
        let said = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
        var errors = String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self)
        if timedOut { errors += "\n(\(executable) was killed: still running \(timeout) s after it started)" }
        // Foundation counts it running while anything holds what it gave the child: then it has
        // no status to give.
        let status = p.isRunning ? -1 : p.terminationStatus
        return (status, stderr == .withStdout && timedOut ? said + errors : said, errors)
    }

    /// SIGKILLs every process whose environment holds `mark` (KEY=value, whole).
    static func killMarked(_ mark: String) {
        let wanted = Array(mark.utf8)
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return }
        for entry in entries {
            guard let pid = Int32(entry), pid != getpid(),
                let environ = FileManager.default.contents(atPath: "/proc/\(entry)/environ")
            else { continue }
            if environ.split(separator: 0).contains(where: { $0.elementsEqual(wanted) }) { kill(pid, SIGKILL) }
        }
    }
}

extension Process {
    /// Waits for it to end, at most `seconds`; past them it (and its process group: Foundation
    /// starts each child in a group of its own, its pid, so this ends what it started too) is
    /// killed, and `alsoKill` runs. True when it ended by itself. The wait after the kill is
    /// bounded too: Foundation counts a program as running while something it started holds on,
    /// and that something may be out of reach (another session); then `isRunning` stays true.
    @discardableResult
    func waitUntilExit(within seconds: Double, alsoKill: () -> Void = {}) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning && Date() < deadline { usleep(5_000) }
        let ended = !isRunning
        if !ended {
            kill(-processIdentifier, SIGKILL)
            kill(processIdentifier, SIGKILL)
            alsoKill()
            let grace = Date().addingTimeInterval(10)
            while isRunning && Date() < grace { usleep(5_000) }
        }
        return ended
    }
}

import Foundation

/// Runs a program to its end; its exit status and what it wrote, stdout and stderr together.
enum Command {
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    cwd: String? = nil, timeout: Double = 300) throws -> (Int32, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        if let environment { p.environment = environment }
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        // Whatever it does, it does not outlive the timeout (a hung program must not hang the run).
        let pid = p.processIdentifier
        let ended = Ended()
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { ended.lock.withLock { if !ended.value { kill(pid, SIGKILL) } } }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        ended.lock.withLock { ended.value = true }   // its pid may be another's from now on
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    private final class Ended: @unchecked Sendable {
        let lock = NSLock()
        var value = false
    }
}

import CanonicalJSON
import CLinux
import FastJSON
import Glibc
import HealthgateCore
import Pipeline
import Posix
import Synchronization

/// The local control channel of a running `serve`: a Unix socket, `<data_dir>/control.sock`
/// (mode 0600 in the 0700 data dir, and only the same user — or root — is answered). It is
/// how `healthgate replay` hands records to the one process that writes the sinks, so that a
/// sink never has two writers.
///
/// One request per line, a payload after it where said; one answer line:
/// - `replay <sink|*> <bytes>` + that many bytes of canonical NDJSON → `ok <seq>`: the records
///   are durable — in the journal for `*` (they take their routes, as if they had just come
///   in), in the sink's inbox for a sink (they go to it alone, as they are). `<seq>` is the
///   entry the last of them is in.
/// - `position` → `journal <newest seq>`, then per sink `sink <name> <journal cursor> <inbox
///   cursor> <sent> <rejected>`, then `end`.
/// - anything else, or a bad payload → `error <why>`.
public enum ControlChannel {
    public static func socketPath(dataDir: String) -> String { FileIO.join(dataDir, "control.sock") }

    /// The most one `replay` request may carry (the client sends 4 MB chunks).
    static let maxPayload = 64 << 20

    /// Reads one line (without its line feed), at most 4 KiB.
    static func readLine(_ fd: Int32) -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count < 4096 {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        return nil
    }

    static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var buf = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            got += n
        }
        return buf
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        (try? FileIO.writeAll(fd, bytes, path: "control socket")) != nil
    }
}

/// The serve side of the control channel: one thread, one connection at a time.
final class ControlServer: Sendable {
    let path: String
    let journal: Journal
    let currentDrainers: @Sendable () -> [SinkDrainer]
    var drainers: [SinkDrainer] { currentDrainers() }
    let clock: any Clock
    let logger: Logger
    private let listenFD: Int32
    private let state = Locked<(stop: Bool, thread: pthread_t?)>((false, nil))

    /// Binds the socket (replacing a stale one: the data dir's lock says no other serve runs).
    init(dataDir: String, journal: Journal, drainers: @escaping @Sendable () -> [SinkDrainer], clock: any Clock, logger: Logger) throws {
        path = ControlChannel.socketPath(dataDir: dataDir)
        self.journal = journal
        self.currentDrainers = drainers
        self.clock = clock
        self.logger = logger
        unlink(path)
        let fd = hg_unix_socket(path, 1)
        if fd < 0 { throw IOError("bind", path) }
        chmod(path, 0o600)
        listenFD = fd
    }

    func start() {
        if case .success(let t) = startThread({ [self] in run() }) { state.withLock { $0.thread = t } }
    }

    func stop() {
        let t: pthread_t? = state.withLock { s in
            s.stop = true
            defer { s.thread = nil }
            return s.thread
        }
        if let t { pthread_join(t, nil) }
        close(listenFD)
        unlink(path)
    }

    private var isStopping: Bool { state.withLock { $0.stop } }

    private func run() {
        while !isStopping {
            var p = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) > 0 else { continue }
            let fd = hg_accept(listenFD)
            if fd < 0 { continue }
            serve(fd)
            close(fd)
        }
    }

    private func serve(_ fd: Int32) {
        let uid = hg_peer_uid(fd)
        guard uid == Int(getuid()) || uid == 0 else {
            _ = ControlChannel.send(fd, Array("error only the user serve runs as may use this socket\n".utf8))
            return
        }
        // A client that stops talking does not hold the channel for long.
        var tv = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let parser = JSONParser()
        while let line = ControlChannel.readLine(fd) {
            let words = line.split(separator: " ").map(String.init)
            let answer: String
            switch words.first {
            case "replay" where words.count == 3:
                guard let n = Int(words[2]), n >= 0, n <= ControlChannel.maxPayload else {
                    answer = "error a replay request carries at most \(ControlChannel.maxPayload) bytes"
                    _ = ControlChannel.send(fd, Array((answer + "\n").utf8))
                    return
                }
                guard let payload = ControlChannel.readExactly(fd, n) else { return }
                answer = replay(to: words[1], payload, parser: parser)
            case "position" where words.count == 1:
                var out = "journal \(journal.lastDurableSeq)\n"
                for d in drainers {
                    let m = d.metrics
                    out +=
                        "sink \(d.name) \(m.cursorSeq.load(ordering: .relaxed)) \(m.inboxSeq.load(ordering: .relaxed)) "
                        + "\(m.sent.load(ordering: .relaxed)) \(m.rejected.load(ordering: .relaxed))\n"
                }
                answer = out + "end"
            default:
                answer = "error unknown request"
            }
            if !ControlChannel.send(fd, Array((answer + "\n").utf8)) { return }
        }
    }

    /// Journals the records (checked to be canonical records first) for the routes or one sink.
    private func replay(to target: String, _ payload: [UInt8], parser: JSONParser) -> String {
        var bad: String?
        let records = CanonicalCodec.decodeLines(payload, parser: parser) { line, error, _ in
            if bad == nil { bad = "line \(line) is not a canonical record: \(error)" }
        }
        if let bad { return "error \(bad)" }
        if records.isEmpty { return "ok \(journal.lastDurableSeq)" }
        let into: Journal
        if target == "*" {
            into = journal
        } else {
            guard let d = drainers.first(where: { $0.name == target }), let inbox = d.inbox else {
                return "error this serve has no sink named \(target)"
            }
            into = inbox
        }
        do {
            let seq = try into.append(
                payload: payload, parts: Journal.parts(of: payload, count: records.count),
                time: clock.now())
            logger.info("replay: \(records.count) record(s) journaled for \(target == "*" ? "their routes" : "sink " + target)")
            return "ok \(seq)"
        } catch {
            return "error cannot journal them: \(error)"
        }
    }
}

import CanonicalJSON
import CLinux
import Glibc
import HealthgateCore
import Posix

/// `replay` beside a running `serve`: sends the records over the control socket, then follows
/// their delivery until the sinks' cursors pass them.
final class HandOff {
    let fd: Int32
    /// The sink they go to alone; nil: their routes.
    let sink: String?
    /// The journal's newest entry when replay began (a journal replay reads no further).
    let journalAtStart: UInt64
    /// The entry (of the journal, or of the sink's inbox) the last records sent are in.
    private var lastSeq: UInt64 = 0
    private var sent = 0
    private let start: [String: SinkPosition]

    struct SinkPosition {
        var journal: UInt64
        var inbox: UInt64
        var sent: Int
        var rejected: Int
    }

    init(dataDir: String, sink: String?) throws {
        let path = ControlChannel.socketPath(dataDir: dataDir)
        fd = hg_unix_socket(path, 0)
        if fd < 0 {
            let why = String(cString: strerror(errno))
            let holder =
                (try? FileIO.readAll(FileIO.join(dataDir, "lock"))).map { String(decoding: $0, as: UTF8.self) }?
                .split(separator: "\n").first.map { " (pid \($0))" } ?? ""
            throw ServiceError(
                "another healthgate process\(holder) holds the data dir \(dataDir), and no serve answers on "
                    + "\(path) (\(why)): if it is a replay, wait for it to end; if it is a serve of an older "
                    + "version, restart it")
        }
        self.sink = sink
        let (newest, positions) = try HandOff.position(fd)
        journalAtStart = newest
        start = positions
        if let sink, positions[sink] == nil {
            throw ServiceError("the running serve has no sink named \"\(sink)\" (its config differs from this one)")
        }
    }

    deinit { close(fd) }

    /// Hands the records over; returns once serve has journaled them.
    func send(_ records: [CanonicalRecord]) throws {
        guard !records.isEmpty else { return }
        // At most ~4 MB per request: the file is read in chunks of that size.
        let payload = CanonicalCodec.encodeLines(records)
        let head = Array("replay \(sink ?? "*") \(payload.count)\n".utf8)
        guard ControlChannel.send(fd, head), ControlChannel.send(fd, payload), let answer = ControlChannel.readLine(fd) else {
            throw ServiceError(
                "serve closed the control socket while records were handed to it; the ones it answered "
                    + "for (\(sent)) are safe in its queue, replay the file again for the rest")
        }
        guard answer.hasPrefix("ok "), let seq = UInt64(answer.dropFirst(3)) else {
            throw ServiceError("serve refused the records: \(answer.hasPrefix("error ") ? String(answer.dropFirst(6)) : answer)")
        }
        lastSeq = seq
        sent += records.count
    }

    /// Follows delivery until the sinks have passed the last records handed over, saying how
    /// far they are; gives up waiting (the records stay queued in serve) after a minute
    /// without progress.
    func waitForDelivery(read: Int) throws {
        print("handed \(sent) record(s) to serve; they are in its \(sink == nil ? "journal" : "queue for \(sink!)")")
        guard sent > 0 else {
            if let sink { print("\(sink): 0 record(s) delivered") }
            return
        }
        var lastProgress = monotonicSeconds()
        var lastDone = -1
        while true {
            let (_, now) = try HandOff.position(fd)
            let names = sink.map { [$0] } ?? Array(now.keys).sorted()
            var done = 0
            for name in names {
                guard let p = now[name] else { continue }
                let cursor = sink == nil ? p.journal : p.inbox
                if cursor > lastSeq { done += 1 }
            }
            if done == names.count {
                for name in names {
                    guard let p = now[name], let s = start[name] else { continue }
                    let rejected = p.rejected - s.rejected
                    print(
                        "\(name): " + (sink != nil ? "\(sent) record(s) delivered" : "delivered what its routes take")
                            + (rejected > 0 ? ", \(rejected) rejected again (in sinks/\(name)/dead-letters.ndjson)" : ""))
                }
                return
            }
            if done != lastDone {
                lastDone = done
                lastProgress = monotonicSeconds()
            } else if monotonicSeconds() - lastProgress > 60 {
                let waiting = names.filter { n in now[n].map { (sink == nil ? $0.journal : $0.inbox) <= lastSeq } ?? false }
                print(
                    "still waiting for \(waiting.joined(separator: ", ")) (see `healthgate status`); the records are safe "
                        + "in serve's queue and go out once the sink takes them")
                return
            }
            usleep(100_000)
        }
    }

    static func position(_ fd: Int32) throws -> (UInt64, [String: SinkPosition]) {
        guard ControlChannel.send(fd, Array("position\n".utf8)), let first = ControlChannel.readLine(fd),
            first.hasPrefix("journal "), let newest = UInt64(first.dropFirst(8))
        else {
            throw ServiceError("serve's control socket did not answer as expected")
        }
        var out: [String: SinkPosition] = [:]
        while let line = ControlChannel.readLine(fd), line != "end" {
            let w = line.split(separator: " ")
            guard w.count == 6, w[0] == "sink", let j = UInt64(w[2]), let i = UInt64(w[3]), let s = Int(w[4]),
                let r = Int(w[5])
            else { continue }
            out[String(w[1])] = SinkPosition(journal: j, inbox: i, sent: s, rejected: r)
        }
        return (newest, out)
    }
}

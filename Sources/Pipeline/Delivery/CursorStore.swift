import HealthgateCore
import Posix

/// Where a sink stands: the next entry to read and how many of its records are done.
public struct Cursor: Equatable, Sendable {
    public var seq: UInt64
    public var skip: Int

    public init(seq: UInt64, skip: Int) {
        self.seq = seq
        self.skip = skip
    }

    public static let start = Cursor(seq: 1, skip: 0)
}

/// A sink's committed position, `<data_dir>/sinks/<name>/cursor`: its cursor over the journal,
/// its cursor over its inbox (records `replay --sink` handed to it), and the state of the
/// transforms on its routes as it was when the records before the cursors were delivered. All
/// of it is one file written atomically, so state and position never disagree (QUEUES.md).
///
/// Format: a first line `<seq> <skip> <inbox seq> <inbox skip>` (older versions wrote the
/// first two only), then per transform state `state <key bytes> <state bytes>`, a line feed,
/// the key, the state, and a line feed.
public struct CursorStore: Sendable {
    public struct Committed: Equatable, Sendable {
        public var journal: Cursor
        public var inbox: Cursor
        public var states: [String: [UInt8]]

        public init(journal: Cursor = .start, inbox: Cursor = .start, states: [String: [UInt8]] = [:]) {
            self.journal = journal
            self.inbox = inbox
            self.states = states
        }
    }

    public let path: String

    public init(path: String) { self.path = path }

    /// The committed position; the start when there is none. Throws only when it cannot be
    /// read at all; an unreadable file is reported through `damaged` and the start returned.
    public func load(damaged: (String) -> Void) throws(IOError) -> Committed {
        guard FileIO.exists(path) else { return Committed() }
        let bytes = try FileIO.readAll(path)
        guard let c = CursorStore.decode(bytes) else {
            damaged("cursor file \(path) is unreadable; starting from the oldest journal entry")
            return Committed()
        }
        return c
    }

    public func save(_ c: Committed) throws(IOError) {
        try FileIO.writeAtomically(path, CursorStore.encode(c), mode: 0o600)
    }

    public static func encode(_ c: Committed) -> [UInt8] {
        var out = Array("\(c.journal.seq) \(c.journal.skip) \(c.inbox.seq) \(c.inbox.skip)\n".utf8)
        for key in c.states.keys.sorted() {
            let k = Array(key.utf8)
            let v = c.states[key]!
            out += Array("state \(k.count) \(v.count)\n".utf8)
            out += k
            out += v
            out.append(0x0A)
        }
        return out
    }

    public static func decode(_ bytes: [UInt8]) -> Committed? {
        guard let nl = bytes.firstIndex(of: 0x0A) else { return nil }
        let head = String(decoding: bytes[..<nl], as: UTF8.self).split(separator: " ")
        guard head.count == 2 || head.count == 4, let seq = UInt64(head[0]), let skip = Int(head[1]), skip >= 0 else { return nil }
        var c = Committed(journal: Cursor(seq: seq, skip: skip))
        if head.count == 4 {
            guard let iseq = UInt64(head[2]), let iskip = Int(head[3]), iskip >= 0 else { return nil }
            c.inbox = Cursor(seq: iseq, skip: iskip)
        }
        var at = nl + 1
        while at < bytes.count {
            guard let end = bytes[at...].firstIndex(of: 0x0A) else { return nil }
            let words = String(decoding: bytes[at..<end], as: UTF8.self).split(separator: " ")
            guard words.count == 3, words[0] == "state", let kn = Int(words[1]), let vn = Int(words[2]), kn >= 0, vn >= 0,
                end + 1 + kn + vn < bytes.count, bytes[end + 1 + kn + vn] == 0x0A
            else { return nil }
            let key = String(decoding: bytes[(end + 1)..<(end + 1 + kn)], as: UTF8.self)
            c.states[key] = Array(bytes[(end + 1 + kn)..<(end + 1 + kn + vn)])
            at = end + 1 + kn + vn + 1
        }
        return c
    }
}

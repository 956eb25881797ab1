import HealthgateCrypto
import Glibc
import HealthgateCore
import Posix
import Synchronization

/// Syncky's request signatures (guide section 6): `v1=` and the lowercase hex HMAC-SHA256,
/// keyed with the whole `whsec_…` secret, over `X-Syncky-Timestamp` + "." + the raw body,
/// accepted within 300 s of our clock; a signature seen in the last 300 s is a replay.
public struct SynckySignature: Sendable {
    public static let window: Int64 = 300

    let secret: [UInt8]
    let replays: ReplayCache

    public init(secret: String, replays: ReplayCache = ReplayCache()) {
        self.secret = Array(secret.utf8)
        self.replays = replays
    }

    public enum Failure: Equatable, Sendable, CustomStringConvertible {
        case missing
        case badTimestamp
        case mismatch
        case expired
        case replayed
        /// In a fleet, the shared state that says whether another machine took it cannot be reached.
        case unverifiable

        public var description: String {
            switch self {
            case .missing: return "X-Syncky-Timestamp and X-Syncky-Signature are required: signing is on for this receiver."
            case .badTimestamp: return "X-Syncky-Timestamp must be Unix seconds."
            case .mismatch: return "X-Syncky-Signature does not match the body: check the receiver's hmac secret."
            case .expired: return "X-Syncky-Timestamp is more than 300 s from the server's clock: check both clocks."
            case .replayed: return "This signature was already used: the request is a replay."
            case .unverifiable:
                return "The fleet's shared state cannot be reached to check this signature for a replay: send it again later."
            }
        }
    }

    /// nil when the signature is valid and fresh (and then it is remembered for replay checks).
    public func verify(timestamp: String?, signature: String?, body: UnsafeRawBufferPointer, now: Timestamp) -> Failure? {
        guard let timestamp, let signature else { return .missing }
        guard (1...15).contains(timestamp.utf8.count), timestamp.utf8.allSatisfy({ $0 &- 0x30 <= 9 }),
            let t = Int64(timestamp)
        else { return .badTimestamp }
        let mac = Crypto.hmacSHA256(key: secret, prefix: Array(timestamp.utf8) + [0x2E], body: body)
        let expected = Array(("v1=" + Crypto.lowercaseHex(mac)).utf8)
        guard Crypto.constantTimeEqual(Array(signature.utf8), expected) else { return .mismatch }
        guard abs(now.seconds - t) <= SynckySignature.window else { return .expired }
        guard let fresh = replays.insert(signature, time: t, now: now.seconds) else { return .unverifiable }
        guard fresh else { return .replayed }
        return nil
    }

    /// The reply signature of section 10: `t=<t>,v1=<hex>` over delivery id + "." + t + "." + body.
    public func signReply(delivery: String, t: Int64, body: [UInt8]) -> String {
        let mac = body.withUnsafeBytes {
            Crypto.hmacSHA256(key: secret, prefix: Array("\(delivery).\(t).".utf8), body: $0)
        }
        return "t=\(t),v1=" + Crypto.lowercaseHex(mac)
    }
}

/// The signatures of the last 300 s, shared by every request of a receiver. With a file, they
/// survive a restart: each accepted signature is appended (one write, no fsync — a process crash
/// or restart keeps it, a power cut within the window may not), and the file is read back at
/// the first check after a start.
///
/// Cheap at any size: a signature is remembered as 16 bytes of its SHA-256, expiry pops the
/// oldest entries off a queue kept in arrival order (no scan of the whole set), and the file
/// is rewritten with the live entries only once it holds twice as many lines as they are.
public final class ReplayCache: Sendable {
    struct Key: Hashable {
        var a: UInt64
        var b: UInt64
    }

    private struct State {
        var seen: [Key: Int64] = [:]
        /// Every insertion in arrival order, with the time it counts from.
        var order: [(key: Key, at: Int64)] = []
        var head = 0
        var loaded = false
        var fileLines = 0
        var fd: Int32 = -1
    }

    private let state = Locked(State())
    let path: String?
    /// A fleet's signatures, which every ingest machine notes (nil: this machine's alone).
    let shared: SharedSignatures?

    public init(path: String? = nil, shared: SharedSignatures? = nil) {
        self.path = path
        self.shared = shared
    }

    deinit {
        state.withLock { s in if s.fd >= 0 { close(s.fd) } }
    }

    static func key(_ signature: String) -> Key {
        let d = Crypto.sha256(Array(signature.utf8))
        var a: UInt64 = 0, b: UInt64 = 0
        for i in 0..<8 { a = a << 8 | UInt64(d[i]); b = b << 8 | UInt64(d[8 + i]) }
        return Key(a: a, b: b)
    }

    /// How many signatures are remembered (within the window, or about to expire).
    public var count: Int { state.withLock { $0.seen.count } }

    /// Remembers `signature`; false when it was already seen within the window (in a fleet: by
    /// any ingest machine), nil when the fleet's shared state cannot say.
    public func insert(_ signature: String, time: Int64, now: Int64) -> Bool? {
        let key = ReplayCache.key(signature)
        if let shared {
            // This machine's own first (no round trip for a replay sent here), then the fleet's.
            if state.withLock({ s in seen(key, in: &s, now: now) }) { return false }
            guard let fresh = shared.note("\(String(key.a, radix: 16))-\(String(key.b, radix: 16))", at: max(time, now), now: now)
            else { return nil }
            if !fresh { return false }
        }
        return state.withLock { s in
            if seen(key, in: &s, now: now) { return false }
            let at = max(time, now)
            s.seen[key] = at
            s.order.append((key, at))
            persist(key, at: at, state: &s)
            return true
        }
    }

    /// Whether `key` was seen within the window (the file read at the first call).
    private func seen(_ key: Key, in s: inout State, now: Int64) -> Bool {
        if !s.loaded {
            s.loaded = true
            load(into: &s, now: now)
        }
        expire(&s, now: now)
        if let seenAt = s.seen[key], now - seenAt <= SynckySignature.window { return true }
        return false
    }

    /// Drops the entries whose window has passed, oldest first; stops at the first live one.
    private func expire(_ s: inout State, now: Int64) {
        while s.head < s.order.count, now - s.order[s.head].at > SynckySignature.window {
            let e = s.order[s.head]
            if s.seen[e.key] == e.at { s.seen[e.key] = nil }
            s.head += 1
        }
        if s.head > 4096 && s.head * 2 > s.order.count {
            s.order.removeFirst(s.head)
            s.head = 0
        }
    }

    static func line(_ key: Key, at: Int64) -> [UInt8] {
        Array("\(at) \(String(key.a, radix: 16)) \(String(key.b, radix: 16))\n".utf8)
    }

    private func load(into s: inout State, now: Int64) {
        guard let path, let bytes = try? FileIO.readAll(path) else { return }
        var entries: [(key: Key, at: Int64)] = []
        for line in bytes.split(separator: 0x0A) {
            let parts = line.split(separator: 0x20)
            guard parts.count == 3, let at = Int64(String(decoding: parts[0], as: UTF8.self)),
                let a = UInt64(String(decoding: parts[1], as: UTF8.self), radix: 16),
                let b = UInt64(String(decoding: parts[2], as: UTF8.self), radix: 16),
                now - at <= SynckySignature.window
            else { continue }
            entries.append((Key(a: a, b: b), at))
        }
        s.fileLines = entries.count
        for e in entries.sorted(by: { $0.at < $1.at }) {
            s.seen[e.key] = max(s.seen[e.key] ?? e.at, e.at)
            s.order.append(e)
        }
    }

    private func persist(_ key: Key, at: Int64, state s: inout State) {
        guard let path else { return }
        if s.fileLines > 2 * s.seen.count + 10_000 {
            // Rewrite with what is still in the window, so the file stays small.
            var bytes: [UInt8] = []
            bytes.reserveCapacity(s.seen.count * 40)
            for e in s.order[s.head...] where s.seen[e.key] == e.at { bytes += ReplayCache.line(e.key, at: e.at) }
            if (try? FileIO.writeAtomically(path, bytes, mode: 0o600)) != nil {
                if s.fd >= 0 { close(s.fd) }
                s.fd = -1
                s.fileLines = s.seen.count
                return
            }
        }
        if s.fd < 0 {
            _ = try? FileIO.makeDirectories(FileIO.dirname(path), mode: 0o700)
            s.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            guard s.fd >= 0 else { return }
        }
        if (try? FileIO.writeAll(s.fd, ReplayCache.line(key, at: at), path: path)) != nil { s.fileLines += 1 }
    }
}

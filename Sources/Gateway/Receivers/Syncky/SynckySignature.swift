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

        public var description: String {
            switch self {
            case .missing: return "X-Syncky-Timestamp and X-Syncky-Signature are required: signing is on for this receiver."
            case .badTimestamp: return "X-Syncky-Timestamp must be Unix seconds."
            case .mismatch: return "X-Syncky-Signature does not match the body: check the receiver's hmac secret."
            case .expired: return "X-Syncky-Timestamp is more than 300 s from the server's clock: check both clocks."
            case .replayed: return "This signature was already used: the request is a replay."
            }
        }
    }

    /// nil when the signature is valid and fresh (and then it is remembered for replay checks).
    public func verify(timestamp: String?, signature: String?, body: UnsafeRawBufferPointer, now: Timestamp) -> Failure? {
        guard let timestamp, let signature else { return .missing }
        guard (1...15).contains(timestamp.utf8.count), timestamp.utf8.allSatisfy({ $0 &- 0x30 <= 9 }),
              let t = Int64(timestamp) else { return .badTimestamp }
        let mac = Crypto.hmacSHA256(key: secret, prefix: Array(timestamp.utf8) + [0x2E], body: body)
        let expected = Array(("v1=" + Crypto.lowercaseHex(mac)).utf8)
        guard Crypto.constantTimeEqual(Array(signature.utf8), expected) else { return .mismatch }
        guard abs(now.seconds - t) <= SynckySignature.window else { return .expired }
        guard replays.insert(signature, time: t, now: now.seconds) else { return .replayed }
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
public final class ReplayCache: Sendable {
    private struct State {
        var seen: [String: Int64] = [:]
        var lastPrune: Int64 = 0
        var loaded = false
        var appended = 0
    }

    private let state = Mutex(State())
    let path: String?

    public init(path: String? = nil) {
        self.path = path
    }

    /// Remembers `signature`; false when it was already seen within the window.
    public func insert(_ signature: String, time: Int64, now: Int64) -> Bool {
        state.withLock { s in
            if !s.loaded {
                s.loaded = true
                load(into: &s.seen, now: now)
            }
            if now - s.lastPrune > 30 || s.seen.count > 100_000 {
                s.seen = s.seen.filter { now - $0.value <= SynckySignature.window }
                s.lastPrune = now
            }
            if let seenAt = s.seen[signature], now - seenAt <= SynckySignature.window { return false }
            let at = max(time, now)
            s.seen[signature] = at
            persist(signature, at: at, state: &s)
            return true
        }
    }

    private func load(into seen: inout [String: Int64], now: Int64) {
        guard let path, let bytes = try? FileIO.readAll(path) else { return }
        for line in bytes.split(separator: 0x0A) {
            let parts = line.split(separator: 0x20, maxSplits: 1)
            guard parts.count == 2, let at = Int64(String(decoding: parts[0], as: UTF8.self)),
                  now - at <= SynckySignature.window else { continue }
            seen[String(decoding: parts[1], as: UTF8.self)] = at
        }
    }

    private func persist(_ signature: String, at: Int64, state s: inout State) {
        guard let path else { return }
        s.appended += 1
        if s.appended > 10_000 {
            // Rewrite with what is still in the window, so the file stays small.
            s.appended = 0
            var text = ""
            for (sig, t) in s.seen { text += "\(t) \(sig)\n" }
            try? FileIO.writeAtomically(path, Array(text.utf8), mode: 0o600)
            return
        }
        _ = try? FileIO.makeDirectories(FileIO.dirname(path), mode: 0o700)
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        _ = try? FileIO.writeAll(fd, Array("\(at) \(signature)\n".utf8), path: path)
        close(fd)
    }
}

import HealthgateCrypto
import HealthgateCore
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

/// The signatures of the last 300 s, shared by every request of a receiver.
public final class ReplayCache: Sendable {
    private struct State {
        var seen: [String: Int64] = [:]
        var lastPrune: Int64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Remembers `signature`; false when it was already seen within the window.
    public func insert(_ signature: String, time: Int64, now: Int64) -> Bool {
        state.withLock { s in
            if now - s.lastPrune > 30 || s.seen.count > 100_000 {
                s.seen = s.seen.filter { now - $0.value <= SynckySignature.window }
                s.lastPrune = now
            }
            if let seenAt = s.seen[signature], now - seenAt <= SynckySignature.window { return false }
            s.seen[signature] = max(time, now)
            return true
        }
    }
}

/// FNV-1a (64 bits) of a text as 16 hex digits: the short, stable tag that keeps two names
/// distinct after they were cut or made safe (file names, MQTT topic levels). Not a secret.
public enum FNV1a {
    public static let basis: UInt64 = 0xcbf2_9ce4_8422_2325

    /// The hash of `bytes`, continued from `hash` (so several parts hash as one).
    @inlinable public static func hash<C: Sequence>(_ bytes: C, from hash: UInt64 = basis) -> UInt64 where C.Element == UInt8 {
        var h = hash
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }

    public static func hex(_ s: String) -> String {
        let hash = FNV1a.hash(s.utf8)
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

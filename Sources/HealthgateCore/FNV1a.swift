/// FNV-1a (64 bits) of a text as 16 hex digits: the short, stable tag that keeps two names
/// distinct after they were cut or made safe (file names, MQTT topic levels). Not a secret.
public enum FNV1a {
    public static func hex(_ s: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in s.utf8 { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

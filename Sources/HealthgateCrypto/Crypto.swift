import CCrypto

/// HMAC-SHA256, constant-time comparison and random secrets, over libcrypto.
public enum Crypto {
    /// HMAC-SHA256 of the concatenated parts.
    /// Why `keyPEM` and `certPEM` cannot serve TLS together; nil when they can.
    public static func keyPairProblem(keyPEM: String, certPEM: String) -> String? {
        switch hg_check_key_pair(keyPEM, certPEM) {
        case 0: nil
        case 1: "the certificate is not a PEM X.509 certificate"
        case 2: "the key is not a PEM private key (or it is encrypted)"
        default: "the key is not the certificate's"
        }
    }

    public static func hmacSHA256(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let p = parts + Array(repeating: [], count: max(0, 3 - parts.count))
        key.withUnsafeBytes { k in
            p[0].withUnsafeBytes { a in
                p[1].withUnsafeBytes { b in
                    p[2].withUnsafeBytes { c in
                        let ok = hg_hmac_sha256(
                            k.baseAddress, k.count, a.baseAddress, a.count,
                            b.baseAddress, b.count, c.baseAddress, c.count, &out)
                        precondition(ok == 1, "libcrypto HMAC-SHA256 failed")
                    }
                }
            }
        }
        return out
    }

    /// HMAC-SHA256 of `prefix` followed by `body`, without copying the body.
    public static func hmacSHA256(key: [UInt8], prefix: [UInt8], body: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        key.withUnsafeBytes { k in
            prefix.withUnsafeBytes { a in
                let ok = hg_hmac_sha256(
                    k.baseAddress, k.count, a.baseAddress, a.count,
                    body.baseAddress, body.count, nil, 0, &out)
                precondition(ok == 1, "libcrypto HMAC-SHA256 failed")
            }
        }
        return out
    }

    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { b in
            precondition(hg_sha256(b.baseAddress, b.count, &out) == 1, "libcrypto SHA-256 failed")
        }
        return out
    }

    /// A stable UUID-shaped key (version 8, RFC 9562) from the parts that identify a data point,
    /// for formats whose records carry no id: the same point sent again gets the same key.
    public static func derivedKey(_ parts: [String]) -> String {
        var input: [UInt8] = []
        for p in parts {
            input.append(contentsOf: p.utf8)
            input.append(0x1F) // unit separator: ("ab","c") and ("a","bc") differ
        }
        var h = Array(sha256(input).prefix(16))
        h[6] = (h[6] & 0x0F) | 0x80
        h[8] = (h[8] & 0x3F) | 0x80
        let hex = lowercaseHex(h)
        let c = Array(hex)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }

    /// Equal length and equal bytes, in time that depends only on the length.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in hg_memeq(pa.baseAddress, pb.baseAddress, pa.count) == 1 } }
    }

    public static func lowercaseHex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func randomBytes(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        precondition(hg_random_bytes(&out, Int32(n)) == 1, "libcrypto has no randomness")
        return out
    }

    /// Unpadded base64url (RFC 4648 §5).
    public static func base64url(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out = [UInt8]()
        var i = 0
        while i + 2 < bytes.count {
            let v = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            out += [table[v >> 18], table[v >> 12 & 63], table[v >> 6 & 63], table[v & 63]]
            i += 3
        }
        if bytes.count - i == 1 {
            let v = Int(bytes[i]) << 16
            out += [table[v >> 18], table[v >> 12 & 63]]
        } else if bytes.count - i == 2 {
            let v = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8
            out += [table[v >> 18], table[v >> 12 & 63], table[v >> 6 & 63]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `base64url` read back (padding optional); nil when it is not base64url.
    public static func base64urlDecode(_ s: String) -> [UInt8]? {
        guard !s.contains("+") && !s.contains("/") else { return nil }
        var b64 = s.replacing("-", with: "+").replacing("_", with: "/")
        while b64.utf8.count % 4 != 0 { b64 += "=" }
        return base64Decode(b64)
    }

    /// Standard base64 with padding (RFC 4648 §4).
    public static func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out = [UInt8]()
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            var v = 0
            for k in 0..<3 { v = v << 8 | (k < n ? Int(bytes[i + k]) : 0) }
            out.append(table[v >> 18 & 63])
            out.append(table[v >> 12 & 63])
            out.append(n > 1 ? table[v >> 6 & 63] : 0x3D)
            out.append(n > 2 ? table[v & 63] : 0x3D)
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Standard base64 decoding (for Basic auth); nil when malformed.
    public static func base64Decode(_ s: String) -> [UInt8]? {
        var values: [UInt8] = []
        var pad = 0
        for c in s.utf8 {
            switch c {
            case 0x41...0x5A: values.append(c - 0x41)
            case 0x61...0x7A: values.append(c - 0x61 + 26)
            case 0x30...0x39: values.append(c - 0x30 + 52)
            case 0x2B, 0x2D: values.append(62)
            case 0x2F, 0x5F: values.append(63)
            case 0x3D: pad += 1
            default: return nil
            }
            if pad > 0 && c != 0x3D { return nil }
        }
        guard (values.count + pad) % 4 == 0 || pad == 0 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var v = 0
            for (k, x) in chunk.enumerated() { v |= Int(x) << (18 - 6 * k) }
            if chunk.count >= 2 { out.append(UInt8(v >> 16 & 0xFF)) }
            if chunk.count >= 3 { out.append(UInt8(v >> 8 & 0xFF)) }
            if chunk.count >= 4 { out.append(UInt8(v & 0xFF)) }
            if chunk.count == 1 { return nil }
            i += 4
        }
        return out
    }

    /// A fresh token: `hg_` and 43 base64url characters (256 bits).
    public static func newToken() -> String { "hg_" + base64url(randomBytes(32)) }

    /// A fresh signing secret in Syncky's shape: `whsec_` and 43 base64url characters.
    public static func newHMACSecret() -> String { "whsec_" + base64url(randomBytes(32)) }
}

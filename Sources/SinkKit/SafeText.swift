/// The one place a sink's settings and its endpoint's answers are made safe to show: in the
/// log, in `healthgate check` and `status`, and in dead-letter reasons.
public enum SafeText {
    /// Query parameters whose values are names, not secrets, and help to read a log.
    static let plainQueryKeys: Set<String> = ["db", "rp", "precision", "org", "bucket", "consistency"]

    /// `url` without its `user:password@` and with every query value but a few plain ones
    /// masked: `https://u:pw@host/hook?apikey=abc&db=h` → `https://***@host/hook?apikey=***&db=h`.
    public static func url(_ url: String) -> String {
        var rest = Substring(url)
        var out = ""
        if let scheme = rest.firstRange(of: "://") {
            out += rest[..<scheme.upperBound]
            rest = rest[scheme.upperBound...]
        }
        // A password may hold `/`, `?` or `#` (curl then fails, which is when a URL is logged):
        // everything up to the last `@` goes, even if that masks a path with an `@` in it.
        if let at = rest.lastIndex(of: "@") {
            out += "***@"
            rest = rest[rest.index(after: at)...]
        }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        out += rest[..<authorityEnd]
        rest = rest[authorityEnd...]
        // The fragment never goes over the wire; drop it too.
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        guard let q = rest.firstIndex(of: "?") else { return out + rest }
        out += rest[...q]
        let pairs = rest[rest.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            guard let eq = pair.firstIndex(of: "=") else { return String(pair) }
            let key = pair[..<eq]
            return plainQueryKeys.contains(String(key)) ? String(pair) : key + "=***"
        }
        return out + pairs.joined(separator: "&")
    }

    /// An error's text, fit for a log line: at most `limit` characters, control characters
    /// as spaces, and the credentials and query values of any URL in it masked (as `url` does).
    public static func error(_ error: any Error, limit: Int = 400) -> String {
        var text = ""
        for word in String(describing: error).split(separator: " ", omittingEmptySubsequences: false) {
            if !text.isEmpty { text += " " }
            text += word.contains("://") ? url(String(word)) : String(word)
            if text.count > limit { break }
        }
        var out = ""
        for c in text {
            out.append(c.isNewline || c.asciiValue.map { $0 < 0x20 || $0 == 0x7F } == true ? " " : c)
            if out.count >= limit { out += "…"; break }
        }
        return out
    }

    /// What an endpoint answered, fit for a log line: an error message field when the answer is
    /// JSON, at most `limit` characters, every quoted passage and every number replaced, so an
    /// endpoint that echoes what it was sent cannot put health records or values in the log.
    public static func answer(_ body: String, limit: Int = 160) -> String {
        var text = Substring(body)
        for key in ["\"error\"", "\"message\"", "\"detail\"", "\"title\""] {
            if let k = body.firstRange(of: key), let open = body[k.upperBound...].firstIndex(of: "\"") {
                let after = body.index(after: open)
                var i = after
                var escaped = false
                while i < body.endIndex {
                    let c = body[i]
                    if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { break }
                    i = body.index(after: i)
                }
                text = body[after..<i]
                break
            }
        }
        var out = ""
        var quote: Character?
        var lastWasDigit = false
        for c in text {
            if let q = quote {
                if c == q { quote = nil; out += "…" + String(q) }
                continue
            }
            if c == "'" || c == "\"" { quote = c; out.append(c); lastWasDigit = false; continue }
            if c.isNumber {
                if !lastWasDigit { out += "#" }
                lastWasDigit = true
                continue
            }
            lastWasDigit = false
            out.append(c.isNewline || c.asciiValue.map { $0 < 0x20 || $0 == 0x7F } == true ? " " : c)
            if out.count >= limit { out += "…"; break }
        }
        if quote != nil { out += "…" }
        return out
    }
}

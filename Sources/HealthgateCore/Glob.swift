/// Shell-style patterns for names: `*` matches any run of characters, `?` one character;
/// everything else matches itself.
public struct Glob: Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    private let bytes: [UInt8]
    private let literal: Bool
    /// `*`: every name (a route's `from: ["*"]`, asked once per record).
    public let matchesAll: Bool

    public init(_ pattern: String) {
        self.pattern = pattern
        self.bytes = Array(pattern.utf8)
        self.literal = !bytes.contains(0x2A) && !bytes.contains(0x3F)
        self.matchesAll = !bytes.isEmpty && bytes.allSatisfy { $0 == 0x2A }
    }

    public var description: String { pattern }

    public func matches(_ name: String) -> Bool {
        if matchesAll { return true }
        if literal { return name == pattern }
        var name = name
        return name.withUTF8 { Glob.match(bytes[...], $0[...]) }
    }

    private static func match(_ p: ArraySlice<UInt8>, _ s: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        var pi = p.startIndex, si = s.startIndex
        var starP = -1, starS = -1
        while si < s.endIndex {
            if pi < p.endIndex && (p[pi] == 0x3F || p[pi] == s[si]) {
                pi += 1; si += 1
            } else if pi < p.endIndex && p[pi] == 0x2A {
                starP = pi; starS = si; pi += 1
            } else if starP >= 0 {
                pi = starP + 1; starS += 1; si = starS
            } else {
                return false
            }
        }
        while pi < p.endIndex && p[pi] == 0x2A { pi += 1 }
        return pi == p.endIndex
    }
}

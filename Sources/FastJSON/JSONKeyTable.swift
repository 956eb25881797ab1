/// Finds which of a fixed set of names an object key is, by length then bytes, with no
/// allocation: for decoders that read every member once and switch on the result.
public struct JSONKeyTable: Sendable {
    /// Per key length, the (bytes, index) of the names of that length.
    private let byLength: [[([UInt8], Int)]]

    public init(_ names: [String]) {
        let longest = names.map(\.utf8.count).max() ?? 0
        var table = [[([UInt8], Int)]](repeating: [], count: longest + 1)
        for (i, n) in names.enumerated() { table[n.utf8.count].append((Array(n.utf8), i)) }
        byLength = table
    }

    /// The position of `key` in the names given to `init`, or nil.
    @inlinable
    public func index(of key: JSONKey) -> Int? {
        key.withBytes { lookup($0) }
    }

    @usableFromInline
    func lookup(_ b: UnsafeRawBufferPointer) -> Int? {
        guard b.count < byLength.count else { return nil }
        for (name, i) in byLength[b.count] {
            let equal = name.withUnsafeBytes { n in
                b.count == 0 || memcmpEqual(n.baseAddress!, b.baseAddress!, b.count)
            }
            if equal { return i }
        }
        return nil
    }
}

@inline(__always)
func memcmpEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Bool {
    var i = 0
    while i + 8 <= n {
        if a.loadUnaligned(fromByteOffset: i, as: UInt64.self) != b.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
            return false
        }
        i += 8
    }
    while i < n {
        if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
        i += 1
    }
    return true
}

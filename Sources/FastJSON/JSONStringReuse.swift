/// Reuses a `String` made for a slot when a later value in that slot has the same bytes.
/// Records from one phone repeat their device, receiver, kind, unit and source in every
/// sample, and cycle through a few types and units; each slot keeps its last few strings, so
/// reusing one costs a byte comparison instead of an allocation (and equal values then share
/// their storage, which makes comparing them later a pointer's comparison).
public struct JSONStringReuse {
    /// Strings kept per slot.
    static let ways = 4
    private var strings: [String]
    /// Per slot, the way its next new string replaces.
    private var next: [Int]

    public init(slots: Int) {
        strings = Array(repeating: "", count: slots * JSONStringReuse.ways)
        next = Array(repeating: 0, count: slots)
    }

    /// The string value of `ref` (nil when it is not a string), shared with one of the slot's
    /// recent values when equal.
    public mutating func string(_ ref: JSONRef, slot: Int) -> String? {
        ref.withStringBytes { b -> String in string(bytes: b, slot: slot) }
    }

    /// The string of these UTF-8 bytes, shared with one of the slot's recent values when equal.
    public mutating func string(bytes b: UnsafeRawBufferPointer, slot: Int) -> String {
        let first = slot * JSONStringReuse.ways
        for i in first..<(first + JSONStringReuse.ways) where strings[i].utf8.count == b.count {
            if b.count == 0 { return strings[i] }
            let same = strings[i].utf8.withContiguousStorageIfAvailable { kept in
                memcmpEqual(kept.baseAddress!, b.baseAddress!, b.count)
            }
            if same == true { return strings[i] }
        }
        let s = String(decoding: b, as: UTF8.self)
        strings[first + next[slot]] = s
        next[slot] = (next[slot] + 1) % JSONStringReuse.ways
        return s
    }
}

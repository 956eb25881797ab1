/// Reuses the `String` made for a slot when the next value in that slot has the same bytes.
/// Records from one phone repeat their device, receiver, kind, unit and source in every
/// sample; reusing the previous `String` costs a byte comparison instead of an allocation.
public struct JSONStringReuse {
    private var bytes: [[UInt8]]
    private var strings: [String]

    public init(slots: Int) {
        bytes = Array(repeating: [], count: slots)
        strings = Array(repeating: "", count: slots)
    }

    /// The string value of `ref` (nil when it is not a string), shared with the slot's last
    /// value when equal.
    public mutating func string(_ ref: JSONRef, slot: Int) -> String? {
        ref.withStringBytes { b -> String in
            if b.count == bytes[slot].count {
                let same = bytes[slot].withUnsafeBytes { last in
                    b.count == 0 || memcmpEqual(last.baseAddress!, b.baseAddress!, b.count)
                }
                if same { return strings[slot] }
            }
            let s = String(decoding: b, as: UTF8.self)
            bytes[slot] = Array(b)
            strings[slot] = s
            return s
        }
    }
}

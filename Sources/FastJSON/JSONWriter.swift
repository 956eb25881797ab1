import CSimdJSON

/// A fast, compact JSON writer appending UTF-8 to `bytes`.
///
/// Commas and colons are placed automatically from the nesting state, and misuse that would produce invalid
/// JSON stops the program with a clear message (a programming error, like an out-of-range index):
/// a value inside an object without `key(_:)` first, `key(_:)` outside an object or twice in a row,
/// an `end…` that does not match its `begin…`, or a second top-level value without `newline()` between
/// (use `newline()` to write NDJSON).
///
/// Strings are escaped per RFC 8259: `"` `\` and control characters below U+0020 (`\n \r \t \b \f`,
/// others `\u00XX`); other characters, including non-ASCII, are copied unchanged. Invalid UTF-8 given as
/// bytes (`string(utf8:)`, `key(utf8:)`) is never emitted: each maximal invalid subsequence becomes U+FFFD.
///
/// Numbers: `double(_:)` writes integral values within ±2^53 without a fraction (`412`), others as the
/// shortest text that reads back to the same `Double` (`312.4`, `1e-05`, `1.7976931348623157e+308`), and
/// NaN or infinity as `null`.
public struct JSONWriter {
    /// The JSON written so far.
    public var bytes: [UInt8]

    /// Kinds of the enclosing containers (`true` for object), outermost first, excluding the current one.
    @usableFromInline var stack: [Bool]
    /// Whether the innermost open container is an object (false at top level and in arrays).
    @usableFromInline var inObject: Bool
    @usableFromInline var state: State

    @usableFromInline enum State: UInt8, Sendable {
        /// Nothing written yet in the current container (or at top level).
        case empty
        /// A complete value was written: the next one needs a comma.
        case afterValue
        /// A key was written: a value must follow.
        case afterKey
    }

    public init(capacity: Int = 4096) {
        bytes = []
        bytes.reserveCapacity(capacity)
        stack = []
        stack.reserveCapacity(16)
        inObject = false
        state = .empty
    }

    /// Empties the writer, keeping its capacity, to write a new document.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        stack.removeAll(keepingCapacity: true)
        inObject = false
        state = .empty
    }

    /// Number of open objects and arrays.
    @inlinable public var depth: Int { stack.count }

    /// True when a complete top-level value has been written and no container is open.
    @inlinable public var isComplete: Bool { stack.isEmpty && state == .afterValue }

    // MARK: Structure

    @inlinable
    public mutating func beginObject() {
        beforeValue()
        stack.append(inObject)
        inObject = true
        state = .empty
        bytes.append(UInt8(ascii: "{"))
    }

    @inlinable
    public mutating func endObject() {
        if !inObject { JSONWriter.misuse("JSONWriter: endObject() without an open object") }
        if state == .afterKey { JSONWriter.misuse("JSONWriter: endObject() right after key(_:) (the member has no value)") }
        bytes.append(UInt8(ascii: "}"))
        inObject = stack.removeLast()
        state = .afterValue
    }

    @inlinable
    public mutating func beginArray() {
        beforeValue()
        stack.append(inObject)
        inObject = false
        state = .empty
        bytes.append(UInt8(ascii: "["))
    }

    @inlinable
    public mutating func endArray() {
        if inObject || stack.isEmpty { JSONWriter.misuse("JSONWriter: endArray() without an open array") }
        bytes.append(UInt8(ascii: "]"))
        inObject = stack.removeLast()
        state = .afterValue
    }

    /// Writes `\n`. At top level, after a complete value, it also allows the next top-level value (NDJSON).
    /// Elsewhere it is plain whitespace.
    @inlinable
    public mutating func newline() {
        bytes.append(0x0A)
        if stack.isEmpty && state == .afterValue { state = .empty }
    }

    // MARK: Keys

    @inlinable
    public mutating func key(_ s: String) {
        let comma = commaBeforeKey()
        appendQuoted(s, comma: comma, colon: true)
        state = .afterKey
    }

    @inlinable
    public mutating func key(_ s: StaticString) {
        let comma = commaBeforeKey()
        s.withUTF8Buffer { appendQuoted($0.baseAddress, $0.count, validate: false, comma: comma, colon: true) }
        state = .afterKey
    }

    /// A key from raw bytes; invalid UTF-8 is replaced with U+FFFD.
    @inlinable
    public mutating func key(utf8 bytes: UnsafeRawBufferPointer) {
        let comma = commaBeforeKey()
        appendQuoted(
            bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, validate: true,
            comma: comma, colon: true)
        state = .afterKey
    }

    /// A key from raw bytes; invalid UTF-8 is replaced with U+FFFD.
    @inlinable
    public mutating func key(utf8 bytes: [UInt8]) {
        bytes.withUnsafeBytes { key(utf8: $0) }
    }

    /// Checks that a key may come now; returns whether a comma must precede it.
    @inlinable @inline(__always)
    func commaBeforeKey() -> Bool {
        if !inObject { JSONWriter.misuse("JSONWriter: key(_:) outside an object") }
        if state == .afterKey { JSONWriter.misuse("JSONWriter: key(_:) twice in a row (the first member has no value)") }
        return state == .afterValue
    }

    // MARK: Values

    @inlinable
    public mutating func string(_ s: String) {
        let comma = commaBeforeValue()
        appendQuoted(s, comma: comma, colon: false)
        state = .afterValue
    }

    @inlinable
    public mutating func string(_ s: StaticString) {
        let comma = commaBeforeValue()
        s.withUTF8Buffer { appendQuoted($0.baseAddress, $0.count, validate: false, comma: comma, colon: false) }
        state = .afterValue
    }

    /// A string from raw bytes; invalid UTF-8 is replaced with U+FFFD (one per maximal invalid subsequence).
    @inlinable
    public mutating func string(utf8 bytes: UnsafeRawBufferPointer) {
        let comma = commaBeforeValue()
        appendQuoted(
            bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, validate: true,
            comma: comma, colon: false)
        state = .afterValue
    }

    /// A string from raw bytes; invalid UTF-8 is replaced with U+FFFD (one per maximal invalid subsequence).
    @inlinable
    public mutating func string(utf8 bytes: [UInt8]) {
        bytes.withUnsafeBytes { string(utf8: $0) }
    }

    @inlinable
    public mutating func int(_ v: Int) {
        beforeValue()
        appendInt64(Int64(v))
        state = .afterValue
    }

    @inlinable
    public mutating func int(_ v: Int64) {
        beforeValue()
        appendInt64(v)
        state = .afterValue
    }

    @inlinable
    public mutating func uint(_ v: UInt64) {
        beforeValue()
        appendUInt64(v)
        state = .afterValue
    }

    /// Integral values within ±2^53 without a fraction (`412`, `-0`), others as the shortest round-trip
    /// text (`312.4`, `1e-05`), NaN and infinities as `null`.
    @inlinable
    public mutating func double(_ v: Double) {
        beforeValue()
        appendDouble(v, keepFraction: false)
        state = .afterValue
    }

    @inlinable
    public mutating func bool(_ v: Bool) {
        beforeValue()
        if v {
            appendStatic("true")
        } else {
            appendStatic("false")
        }
        state = .afterValue
    }

    @inlinable
    public mutating func null() {
        beforeValue()
        appendStatic("null")
        state = .afterValue
    }

    /// Pre-serialized JSON, written as one value (commas are still handled). The bytes are not checked:
    /// they must be exactly one valid JSON value.
    @inlinable
    public mutating func raw(_ json: UnsafeRawBufferPointer) {
        if json.isEmpty { JSONWriter.misuse("JSONWriter: raw(_:) needs one JSON value, got no bytes") }
        beforeValue()
        bytes.append(contentsOf: json)
        state = .afterValue
    }

    /// Pre-serialized JSON, written as one value (commas are still handled). The bytes are not checked:
    /// they must be exactly one valid JSON value.
    @inlinable
    public mutating func raw(_ json: [UInt8]) {
        if json.isEmpty { JSONWriter.misuse("JSONWriter: raw(_:) needs one JSON value, got no bytes") }
        beforeValue()
        bytes.append(contentsOf: json)
        state = .afterValue
    }

    @inlinable @inline(__always)
    mutating func beforeValue() {
        if commaBeforeValue() { bytes.append(UInt8(ascii: ",")) }
    }

    /// Checks that a value may come now; returns whether a comma must precede it.
    @inlinable @inline(__always)
    func commaBeforeValue() -> Bool {
        if state == .afterKey { return false }
        if inObject { JSONWriter.misuse("JSONWriter: a value inside an object needs key(_:) first") }
        if state == .afterValue {
            if stack.isEmpty { JSONWriter.misuse("JSONWriter: a second top-level value needs newline() before it") }
            return true
        }
        return false
    }

    /// Stops the program on misuse that would produce invalid JSON. Unlike `precondition`, the message is
    /// also printed in optimized builds.
    @usableFromInline @inline(never)
    static func misuse(_ message: StaticString) -> Never {
        fatalError("\(message)")
    }

    // MARK: Low level

    @inlinable @inline(__always)
    mutating func appendStatic(_ s: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    @inlinable
    mutating func appendQuoted(_ s: String, comma: Bool, colon: Bool) {
        let done: Void? = s.utf8.withContiguousStorageIfAvailable {
            appendQuoted($0.baseAddress, $0.count, validate: false, comma: comma, colon: colon)
        }
        if done == nil {
            var copy = s
            copy.withUTF8 { appendQuoted($0.baseAddress, $0.count, validate: false, comma: comma, colon: colon) }
        }
    }

    /// Index of the first byte that needs escaping (or, with `validate`, is non-ASCII), or `n`.
    /// Scans 8 bytes at a time.
    @usableFromInline @inline(__always)
    static func firstSpecial(_ p: UnsafePointer<UInt8>, from start: Int, _ n: Int, validate: Bool) -> Int {
        let highMask: UInt64 = validate ? 0x8080_8080_8080_8080 : 0
        var i = start
        while i &+ 8 <= n {
            let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
            // Exact "is there such a byte" tests; the lowest flagged byte is always a true hit.
            let control = (w &- 0x2020_2020_2020_2020) & ~w & 0x8080_8080_8080_8080
            let q = w ^ 0x2222_2222_2222_2222
            let quote = (q &- 0x0101_0101_0101_0101) & ~q & 0x8080_8080_8080_8080
            let b = w ^ 0x5C5C_5C5C_5C5C_5C5C
            let backslash = (b &- 0x0101_0101_0101_0101) & ~b & 0x8080_8080_8080_8080
            let flagged = control | quote | backslash | (w & highMask)
            if flagged != 0 { return i &+ (flagged.trailingZeroBitCount >> 3) }
            i &+= 8
        }
        while i < n {
            let c = p[i]
            if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || (validate && c >= 0x80) { return i }
            i &+= 1
        }
        return n
    }

    /// Appends `[,]"…"[:]` with the bytes escaped. With `validate`, invalid UTF-8 becomes U+FFFD; without it
    /// the bytes must already be valid UTF-8 (Swift strings, simdjson output).
    ///
    /// Short strings that need no escaping (the common case) are assembled on the stack and appended in one
    /// call; otherwise clean runs are copied in bulk between escapes.
    @usableFromInline
    mutating func appendQuoted(_ start: UnsafePointer<UInt8>?, _ n: Int, validate: Bool, comma: Bool, colon: Bool) {
        guard let p = start, n > 0 else {
            appendFramed(nil, 0, comma: comma, colon: colon)
            return
        }
        let first = JSONWriter.firstSpecial(p, from: 0, n, validate: validate)
        if first == n && n <= JSONWriter.shortString {
            appendFramed(p, n, comma: comma, colon: colon)
            return
        }
        if comma { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        var i = first
        var run = 0 // start of the clean run not yet copied
        while i < n {
            let c = p[i]
            if c < 0x80 {
                if i > run { bytes.append(contentsOf: UnsafeBufferPointer(start: p + run, count: i &- run)) }
                appendEscape(c)
                i &+= 1
                run = i
            } else {
                // Only reached with `validate`.
                let length = JSONWriter.utf8SequenceLength(p + i, n &- i)
                if length > 0 {
                    i &+= length
                } else {
                    if i > run { bytes.append(contentsOf: UnsafeBufferPointer(start: p + run, count: i &- run)) }
                    bytes.append(0xEF)
                    bytes.append(0xBF)
                    bytes.append(0xBD)
                    i &-= length
                    run = i
                }
            }
            i = JSONWriter.firstSpecial(p, from: i, n, validate: validate)
        }
        if n > run { bytes.append(contentsOf: UnsafeBufferPointer(start: p + run, count: n &- run)) }
        if colon {
            appendStatic("\":")
        } else {
            bytes.append(UInt8(ascii: "\""))
        }
    }

    @usableFromInline static var shortString: Int { 124 }

    /// Appends `[,]"` + n clean bytes + `"[:]` with a single append (n <= shortString).
    @usableFromInline @inline(__always)
    mutating func appendFramed(_ p: UnsafePointer<UInt8>?, _ n: Int, comma: Bool, colon: Bool) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: JSONWriter.shortString &+ 4) { buffer in
            let out = buffer.baseAddress!
            var k = 0
            if comma {
                out[0] = UInt8(ascii: ",")
                k = 1
            }
            out[k] = UInt8(ascii: "\"")
            k &+= 1
            if let p, n > 0 {
                (out + k).update(from: p, count: n)
                k &+= n
            }
            out[k] = UInt8(ascii: "\"")
            k &+= 1
            if colon {
                out[k] = UInt8(ascii: ":")
                k &+= 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(start: out, count: k))
        }
    }

    @usableFromInline
    mutating func appendEscape(_ c: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch c {
        case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        default:
            let hex: StaticString = "0123456789abcdef"
            bytes.append(UInt8(ascii: "u"))
            bytes.append(UInt8(ascii: "0"))
            bytes.append(UInt8(ascii: "0"))
            bytes.append(hex.utf8Start[Int(c >> 4)])
            bytes.append(hex.utf8Start[Int(c & 0x0F)])
        }
    }

    /// Length of the well-formed UTF-8 sequence starting with a non-ASCII byte at `p` (2...4), or minus the
    /// length of its maximal invalid subpart (-1...-3), the unit replaced by one U+FFFD (Unicode 15, 3.9).
    @usableFromInline
    static func utf8SequenceLength(_ p: UnsafePointer<UInt8>, _ available: Int) -> Int {
        let b0 = p[0]
        if b0 < 0xC2 { return -1 } // continuation byte, or overlong lead C0/C1
        if b0 < 0xE0 {
            return available >= 2 && p[1] & 0xC0 == 0x80 ? 2 : -1
        }
        if b0 < 0xF0 {
            guard available >= 2 else { return -1 }
            let low: UInt8 = b0 == 0xE0 ? 0xA0 : 0x80 // no overlongs
            let high: UInt8 = b0 == 0xED ? 0x9F : 0xBF // no surrogates
            guard p[1] >= low && p[1] <= high else { return -1 }
            guard available >= 3 && p[2] & 0xC0 == 0x80 else { return -2 }
            return 3
        }
        if b0 < 0xF5 {
            guard available >= 2 else { return -1 }
            let low: UInt8 = b0 == 0xF0 ? 0x90 : 0x80 // no overlongs
            let high: UInt8 = b0 == 0xF4 ? 0x8F : 0xBF // nothing above U+10FFFF
            guard p[1] >= low && p[1] <= high else { return -1 }
            guard available >= 3 && p[2] & 0xC0 == 0x80 else { return -2 }
            guard available >= 4 && p[3] & 0xC0 == 0x80 else { return -3 }
            return 4
        }
        return -1
    }

    @usableFromInline
    mutating func appendInt64(_ v: Int64) {
        if v < 0 { bytes.append(UInt8(ascii: "-")) }
        appendUInt64(v.magnitude)
    }

    @usableFromInline
    mutating func appendUInt64(_ v: UInt64) {
        if v < 10 {
            bytes.append(0x30 &+ UInt8(truncatingIfNeeded: v))
            return
        }
        let pairs: StaticString = """
            00010203040506070809101112131415161718192021222324252627282930313233343536373839\
            40414243444546474849505152535455565758596061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899
            """
        let digits = pairs.utf8Start
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            let out = buffer.baseAddress!
            var position = 20
            var x = v
            while x >= 100 {
                let r = Int(truncatingIfNeeded: x % 100) &* 2
                x /= 100
                position &-= 2
                out[position] = digits[r]
                out[position &+ 1] = digits[r &+ 1]
            }
            if x >= 10 {
                let r = Int(truncatingIfNeeded: x) &* 2
                position &-= 2
                out[position] = digits[r]
                out[position &+ 1] = digits[r &+ 1]
            } else {
                position &-= 1
                out[position] = 0x30 &+ UInt8(truncatingIfNeeded: x)
            }
            bytes.append(contentsOf: UnsafeBufferPointer(start: out + position, count: 20 &- position))
        }
    }

    /// `keepFraction` writes integral values as `412.0` (used to re-serialize parsed doubles as doubles).
    @usableFromInline
    mutating func appendDouble(_ v: Double, keepFraction: Bool) {
        guard v.isFinite else {
            appendStatic("null")
            return
        }
        if v.magnitude <= 9_007_199_254_740_992, Double(Int64(v)) == v {
            if v == 0 && v.sign == .minus {
                appendStatic("-0")
            } else {
                appendInt64(Int64(v))
            }
            if keepFraction { appendStatic(".0") }
            return
        }
        var text = v.description // shortest round-trip digits: "312.4", "1e-05", "1.7976931348623157e+308"
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    // MARK: Re-serializing parsed documents

    /// Writes node `i` and its subtree; returns the index after the subtree.
    @usableFromInline @discardableResult
    mutating func writeNode(_ nodes: UnsafePointer<csj_node>, _ i: Int) -> Int {
        let n = nodes + i
        switch n.pointee.kind {
        case JSONRef.Kind.object.rawValue:
            beginObject()
            var k = i &+ 1
            for _ in 0..<Int(n.pointee.count) {
                let key = nodes + k
                let comma = commaBeforeKey()
                appendQuoted(
                    UnsafeRawPointer(key.pointee.v.str)?.assumingMemoryBound(to: UInt8.self),
                    Int(key.pointee.count), validate: false, comma: comma, colon: true)
                state = .afterKey
                k = writeNode(nodes, k &+ 1)
            }
            endObject()
        case JSONRef.Kind.array.rawValue:
            beginArray()
            var k = i &+ 1
            for _ in 0..<Int(n.pointee.count) { k = writeNode(nodes, k) }
            endArray()
        case JSONRef.Kind.string.rawValue:
            let comma = commaBeforeValue()
            appendQuoted(
                UnsafeRawPointer(n.pointee.v.str)?.assumingMemoryBound(to: UInt8.self),
                Int(n.pointee.count), validate: false, comma: comma, colon: false)
            state = .afterValue
        case JSONRef.Kind.int.rawValue:
            int(n.pointee.v.i)
        case JSONRef.Kind.uint.rawValue:
            uint(n.pointee.v.u)
        case JSONRef.Kind.double.rawValue:
            beforeValue()
            appendDouble(n.pointee.v.d, keepFraction: true)
            state = .afterValue
        case JSONRef.Kind.bool.rawValue:
            bool(n.pointee.v.u != 0)
        default:
            null()
        }
        return Int(n.pointee.next)
    }
}

extension JSONWriter: Sendable {}

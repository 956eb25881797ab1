import CSimdJSON

/// A cheap view of one value in a ``JSONDocument``: a plain value (pointers plus a node index), so copying
/// it costs no reference counting.
///
/// Valid until the next `parse` on the document's parser, and only while that parser exists (a ref does
/// not keep its parser alive; the ``JSONDocument`` does). Using a stale ref stops the program with a clear
/// message instead of reading another document's memory; `isValid` tells without stopping.
/// Accessors for the wrong kind return `nil` (or an empty sequence).
public struct JSONRef {
    /// The kind of a JSON value. Integers that fit in `Int64` are `.int`; only integers above
    /// `Int64.max` are `.uint`; numbers with a fraction or an exponent are `.double`.
    public enum Kind: UInt8, Sendable, CaseIterable {
        case object = 0, array = 1, string = 2, int = 3, uint = 4, double = 5, bool = 6, null = 7
    }

    /// Where a document's nodes are and how to tell they are still current. Plain values: copying refs
    /// costs no reference counting.
    @usableFromInline
    struct Base {
        @usableFromInline let nodes: UnsafePointer<csj_node>
        /// The parser's generation cell (never freed) and the generation of this document.
        @usableFromInline let cell: UnsafeMutablePointer<UInt64>
        @usableFromInline let generation: UInt64

        @inlinable init(nodes: UnsafePointer<csj_node>, cell: UnsafeMutablePointer<UInt64>, generation: UInt64) {
            self.nodes = nodes
            self.cell = cell
            self.generation = generation
        }

        @inlinable var isValid: Bool { cell.pointee == generation }

        /// Printed in optimized builds too (unlike a `precondition` message).
        @usableFromInline @inline(never)
        static func staleFailure() -> Never {
            fatalError("FastJSON: a JSONRef was used after its parser parsed another document or was deallocated")
        }

        @inlinable @inline(__always)
        func check() {
            if cell.pointee != generation { Base.staleFailure() }
        }
    }

    @usableFromInline let base: Base
    @usableFromInline let index: Int

    @inlinable
    init(base: Base, index: Int) {
        self.base = base
        self.index = index
    }

    /// The node, after checking that the document is still current.
    @inlinable
    var node: UnsafePointer<csj_node> {
        @inline(__always) get {
            base.check()
            return base.nodes + index
        }
    }

    /// False once the parser has parsed another document or has been deallocated.
    @inlinable public var isValid: Bool { base.isValid }

    @inlinable public var kind: Kind {
        // Kinds written by the C shim are always 0...7.
        Kind(rawValue: node.pointee.kind) ?? .null
    }

    @inlinable public var isNull: Bool { node.pointee.kind == Kind.null.rawValue }

    // MARK: Scalars

    /// The string value (a new `String`), or nil if this is not a string.
    @inlinable public var string: String? {
        let n = node
        guard n.pointee.kind == Kind.string.rawValue else { return nil }
        return String(
            decoding: UnsafeRawBufferPointer(start: n.pointee.v.str, count: Int(n.pointee.count)),
            as: UTF8.self)
    }

    /// Calls `body` with the string's unescaped UTF-8 bytes (no allocation), or returns nil if this is not
    /// a string. The bytes belong to the parser: do not keep the pointer.
    @inlinable
    public func withStringBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R? {
        let n = node
        guard n.pointee.kind == Kind.string.rawValue else { return nil }
        return try body(UnsafeRawBufferPointer(start: n.pointee.v.str, count: Int(n.pointee.count)))
    }

    /// The number as a `Double` (from any number kind; large integers round to the nearest double).
    @inlinable public var double: Double? {
        let n = node
        switch n.pointee.kind {
        case Kind.double.rawValue: return n.pointee.v.d
        case Kind.int.rawValue: return Double(n.pointee.v.i)
        case Kind.uint.rawValue: return Double(n.pointee.v.u)
        default: return nil
        }
    }

    /// The number as an `Int64`: from integer kinds when in range, and from a double with an exact
    /// integral value in range (`412.0` gives 412; `412.5` and `1e300` give nil).
    @inlinable public var int64: Int64? {
        let n = node
        switch n.pointee.kind {
        case Kind.int.rawValue: return n.pointee.v.i
        case Kind.uint.rawValue: return Int64(exactly: n.pointee.v.u)
        case Kind.double.rawValue: return fastJSONExactInt64(n.pointee.v.d)
        default: return nil
        }
    }

    /// The number as an `Int` (same rules as ``int64``).
    @inlinable public var int: Int? { int64.map { Int($0) } }

    /// The number as a `UInt64`: from non-negative integers and exact non-negative integral doubles.
    @inlinable public var uint64: UInt64? {
        let n = node
        switch n.pointee.kind {
        case Kind.int.rawValue: return UInt64(exactly: n.pointee.v.i)
        case Kind.uint.rawValue: return n.pointee.v.u
        case Kind.double.rawValue: return fastJSONExactUInt64(n.pointee.v.d)
        default: return nil
        }
    }

    @inlinable public var bool: Bool? {
        let n = node
        guard n.pointee.kind == Kind.bool.rawValue else { return nil }
        return n.pointee.v.u != 0
    }

    // MARK: Containers

    /// Members of an object, elements of an array; 0 for other kinds.
    @inlinable public var count: Int {
        let n = node
        switch n.pointee.kind {
        case Kind.object.rawValue, Kind.array.rawValue: return Int(n.pointee.count)
        default: return 0
        }
    }

    /// The value of the first member named `key`, or nil (also when this is not an object).
    /// Scans the members in order, comparing bytes; allocates nothing.
    @inlinable public subscript(key: String) -> JSONRef? {
        if let found = key.utf8.withContiguousStorageIfAvailable({ member(named: UnsafeRawBufferPointer($0)) }) {
            return found
        }
        var key = key
        return key.withUTF8 { member(named: UnsafeRawBufferPointer($0)) }
    }

    /// The value of the first member whose key has exactly these UTF-8 bytes, or nil.
    @inlinable public func member(named name: UnsafeRawBufferPointer) -> JSONRef? {
        let n = node
        guard n.pointee.kind == Kind.object.rawValue else { return nil }
        let nodes = base.nodes
        let length = name.count
        var k = index + 1
        for _ in 0..<Int(n.pointee.count) {
            let key = nodes + k
            if Int(key.pointee.count) == length
                && (length == 0 || fastJSONBytesEqual(UnsafeRawPointer(key.pointee.v.str), name.baseAddress!, length))
            {
                return JSONRef(base: base, index: k + 1)
            }
            k = Int(nodes[k + 1].next)
        }
        return nil
    }

    /// The element at `position` of an array (walks `position` elements), or nil.
    @inlinable public subscript(position: Int) -> JSONRef? {
        let n = node
        guard n.pointee.kind == Kind.array.rawValue, position >= 0, position < Int(n.pointee.count) else {
            return nil
        }
        var i = index + 1
        for _ in 0..<position { i = Int(base.nodes[i].next) }
        return JSONRef(base: base, index: i)
    }

    /// The members of an object in document order (empty for other kinds).
    @inlinable public var members: Members {
        let n = node
        let count = n.pointee.kind == Kind.object.rawValue ? Int(n.pointee.count) : 0
        return Members(base: base, first: index + 1, count: count)
    }

    /// The elements of an array in order (empty for other kinds).
    @inlinable public var elements: Elements {
        let n = node
        let count = n.pointee.kind == Kind.array.rawValue ? Int(n.pointee.count) : 0
        return Elements(base: base, first: index + 1, count: count)
    }

    /// Object members as `(key, value)` pairs, in document order.
    public struct Members: Sequence {
        @usableFromInline let base: Base
        @usableFromInline let first: Int
        public let count: Int

        @inlinable init(base: Base, first: Int, count: Int) {
            self.base = base
            self.first = first
            self.count = count
        }

        @inlinable public var underestimatedCount: Int { count }

        @inlinable public func makeIterator() -> Iterator {
            Iterator(base: base, position: first, remaining: count)
        }

        public struct Iterator: IteratorProtocol {
            @usableFromInline let base: Base
            @usableFromInline var position: Int
            @usableFromInline var remaining: Int

            @inlinable init(base: Base, position: Int, remaining: Int) {
                self.base = base
                self.position = position
                self.remaining = remaining
            }

            @inlinable public mutating func next() -> (key: JSONKey, value: JSONRef)? {
                guard remaining > 0 else { return nil }
                base.check()
                remaining -= 1
                let key = position
                position = Int(base.nodes[key + 1].next)
                return (JSONKey(ref: JSONRef(base: base, index: key)), JSONRef(base: base, index: key + 1))
            }
        }
    }

    /// Array elements, in order.
    public struct Elements: Sequence {
        @usableFromInline let base: Base
        @usableFromInline let first: Int
        public let count: Int

        @inlinable init(base: Base, first: Int, count: Int) {
            self.base = base
            self.first = first
            self.count = count
        }

        @inlinable public var underestimatedCount: Int { count }

        @inlinable public func makeIterator() -> Iterator {
            Iterator(base: base, position: first, remaining: count)
        }

        public struct Iterator: IteratorProtocol {
            @usableFromInline let base: Base
            @usableFromInline var position: Int
            @usableFromInline var remaining: Int

            @inlinable init(base: Base, position: Int, remaining: Int) {
                self.base = base
                self.position = position
                self.remaining = remaining
            }

            @inlinable public mutating func next() -> JSONRef? {
                guard remaining > 0 else { return nil }
                base.check()
                remaining -= 1
                let element = position
                position = Int(base.nodes[element].next)
                return JSONRef(base: base, index: element)
            }
        }
    }

    // MARK: Writing

    /// Re-serializes this value and everything under it, compactly, into `w` (as one value: inside an
    /// object, call `w.key(_:)` first). Strings, integers (including `UInt64` above `Int64.max`) and
    /// doubles keep their exact values; a double stays a double (`1.0` is written `1.0`).
    public func write(to w: inout JSONWriter) {
        base.check()
        w.writeNode(base.nodes, index)
    }
}

extension JSONRef: CustomStringConvertible {
    /// The value as compact JSON text.
    public var description: String {
        var w = JSONWriter(capacity: 64)
        write(to: &w)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}

@available(*, unavailable, message: "refs belong to their parser's thread")
extension JSONRef: Sendable {}

/// An object member's key. Compares to `String` and `StaticString` without allocating:
/// `key == "uuid"`, or `switch key { case "uuid": … }`.
public struct JSONKey {
    @usableFromInline let ref: JSONRef

    @inlinable init(ref: JSONRef) { self.ref = ref }

    /// The key as a new `String`.
    @inlinable public var string: String { ref.string ?? "" }

    /// Length in UTF-8 bytes.
    @inlinable public var utf8Count: Int { Int(ref.node.pointee.count) }

    /// Calls `body` with the key's unescaped UTF-8 bytes (no allocation); do not keep the pointer.
    @inlinable
    public func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let n = ref.node
        return try body(UnsafeRawBufferPointer(start: n.pointee.v.str, count: Int(n.pointee.count)))
    }

    @inlinable func equals(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let n = ref.node
        let length = Int(n.pointee.count)
        return length == bytes.count
            && (length == 0 || fastJSONBytesEqual(UnsafeRawPointer(n.pointee.v.str), bytes.baseAddress!, length))
    }

    @inlinable func equals(_ s: String) -> Bool {
        // Lengths first: `utf8.count` is O(1) for native strings, and most keys differ in length.
        guard s.utf8.count == Int(ref.node.pointee.count) else { return false }
        if let result = s.utf8.withContiguousStorageIfAvailable({ equals(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var s = s
        return s.withUTF8 { equals(UnsafeRawBufferPointer($0)) }
    }

    @inlinable public static func == (lhs: JSONKey, rhs: String) -> Bool { lhs.equals(rhs) }
    @inlinable public static func == (lhs: String, rhs: JSONKey) -> Bool { rhs.equals(lhs) }
    @inlinable public static func != (lhs: JSONKey, rhs: String) -> Bool { !lhs.equals(rhs) }
    @inlinable public static func != (lhs: String, rhs: JSONKey) -> Bool { !rhs.equals(lhs) }

    @inlinable public static func == (lhs: JSONKey, rhs: StaticString) -> Bool {
        rhs.withUTF8Buffer { lhs.equals(UnsafeRawBufferPointer($0)) }
    }
    @inlinable public static func != (lhs: JSONKey, rhs: StaticString) -> Bool { !(lhs == rhs) }

    /// Lets a `switch` over a key use string literal patterns.
    @inlinable public static func ~= (pattern: String, value: JSONKey) -> Bool { value.equals(pattern) }
}

extension JSONKey: CustomStringConvertible {
    public var description: String { string }
}

@available(*, unavailable, message: "keys belong to their parser's thread")
extension JSONKey: Sendable {}

/// Byte equality for short keys (8 bytes at a time).
@inlinable @inline(__always)
func fastJSONBytesEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ n: Int) -> Bool {
    var i = 0
    while i &+ 8 <= n {
        if a.loadUnaligned(fromByteOffset: i, as: UInt64.self) != b.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
            return false
        }
        i &+= 8
    }
    while i < n {
        if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
        i &+= 1
    }
    return true
}

/// `Int64(exactly:)` without libm (the generic stdlib path calls `trunc` & co. in debug builds, and this
/// module does not link libm): nil unless `d` is integral and in range.
@inlinable @inline(__always)
func fastJSONExactInt64(_ d: Double) -> Int64? {
    // -2^63 is exact; 2^63 is the first value out of range. NaN fails both comparisons.
    guard d >= -9_223_372_036_854_775_808.0 && d < 9_223_372_036_854_775_808.0 else { return nil }
    let i = Int64(d) // truncates toward zero
    return Double(i) == d ? i : nil
}

/// `UInt64(exactly:)` without libm.
@inlinable @inline(__always)
func fastJSONExactUInt64(_ d: Double) -> UInt64? {
    guard d >= 0 && d < 18_446_744_073_709_551_616.0 else { return nil }
    let u = UInt64(d)
    return Double(u) == d ? u : nil
}

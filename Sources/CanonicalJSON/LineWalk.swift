import Glibc
import HealthgateCore

/// The members of one canonical line, walked without a parser: where each `"key":value`
/// begins and ends, and which of the record's fields it holds. What lets a `Record` read a field
/// from its member alone, and write a changed record's line with only the changed members
/// written anew.
///
/// It takes the line as `appendNDJSON` writes it — one object, no white space, members in the
/// order of `CanonicalRecord.Field`, none twice but the phone's own (`fields`) — and says
/// `failed` for anything else: such a line is read by the parser. Values are skipped by
/// their brackets and strings (escapes honoured), not checked: the journal's checksum vouches
/// for the bytes, the parser for their JSON when a field is read from them.
struct LineWalk {
    /// One member: `start` is its `{` (the first) or the `,` before it, `end` the `,` or `}`
    /// after it, so `start..<end` is all of it as the writer writes it.
    struct Member {
        var field: CanonicalRecord.Field
        var start: Int
        var valueStart: Int
        var end: Int
        /// Whether the value holds a backslash (a string's escape).
        var escaped: Bool
    }

    let line: UnsafeRawBufferPointer
    /// Where the next member's `{` or `,` is (the line's closing `}` once the walk is done).
    private(set) var position = 0
    private(set) var failed = false
    /// Whether a string skipped since this was last cleared held an escape.
    private var escapes = false
    /// The field of the last member read (its `rawValue`; -1 before the first).
    private var last = -1
    /// `LineWalk.keys`, taken once a line (not once a member: a lazy global's check each time).
    private let keys: [Key]

    /// `line` without its line feed.
    init(_ line: UnsafeRawBufferPointer) {
        self.line = line
        keys = LineWalk.keys
    }

    /// The next member; nil at the end of the object (the walk done: `position` is its `}`)
    /// or when the line is not as the writer writes it (`failed`).
    mutating func next() -> Member? {
        guard let (found, valueStart) = key() else { return nil }
        var field = found
        escapes = false
        guard let valueEnd = skipValue(valueStart) else { return fail() }
        // Labels are an object of strings; anything else under that name is one of the
        // phone's own fields (as `CanonicalCodec.decode` reads it).
        if field == .tags && !isObjectOfStrings(valueStart..<valueEnd) { field = .fields }
        guard field.rawValue > last || (field == .fields && last == field.rawValue) else { return fail() }
        last = field.rawValue
        let member = Member(field: field, start: position, valueStart: valueStart, end: valueEnd, escaped: escapes)
        position = valueEnd
        return member
    }

    /// The next member's field and where its value begins; nil at the end of the object (or
    /// `failed`).
    private mutating func key() -> (field: CanonicalRecord.Field, valueStart: Int)? {
        let n = line.count
        guard !failed, position < n else { return nil }
        let separator = line[position]
        if position == 0 {
            guard separator == 0x7B else { return fail() } // {
            if n == 2 && line[1] == 0x7D {
                position = 1
                return nil
            }
        } else if separator == 0x7D {
            return position == n - 1 ? nil : fail()
        } else {
            guard separator == 0x2C else { return fail() }
        }
        let keyStart = position + 1
        if let (expected, after) = expectedKey(at: keyStart) {
            // The key the writer writes next (or soon after), as its bytes: not read as a string.
            return (expected, after)
        }
        guard keyStart < n, line[keyStart] == 0x22, let keyEnd = skipString(keyStart),
            keyEnd < n, line[keyEnd] == 0x3A
        else { return fail() }
        return (CanonicalRecord.Field(key: UnsafeRawBufferPointer(rebasing: line[(keyStart + 1)..<(keyEnd - 1)])) ?? .fields, keyEnd + 1)
    }

    /// The canonical field whose key, quoted and followed by its colon, begins at `k`, among
    /// the fields after the last one read (the writer's order), and where its value begins; nil
    /// for any other key (the phone's own, one out of order, one with an escape: `next` reads
    /// those as strings). Two words compared under a mask a field tried.
    @inline(__always) private func expectedKey(at k: Int) -> (CanonicalRecord.Field, Int)? {
        guard k + 16 <= line.count, let base = line.baseAddress else { return nil }
        let w0 = (base + k).loadUnaligned(as: UInt64.self), w1 = (base + k + 8).loadUnaligned(as: UInt64.self)
        return keys.withUnsafeBufferPointer { keys in
            var f = last + 1
            while f < keys.count {
                let e = keys[f]
                if w0 & e.mask0 == e.word0 && w1 & e.mask1 == e.word1 && e.length > 0 { return (e.field, k + e.length) }
                f += 1
            }
            return nil
        }
    }

    typealias Key = (word0: UInt64, mask0: UInt64, word1: UInt64, mask1: UInt64, length: Int, field: CanonicalRecord.Field)

    /// Each field's key as the writer writes it — `"name":` — as two little-endian words and
    /// the masks of its bytes in them (a field with no key of its own, `fields`, has length 0).
    static let keys: [Key] =
        CanonicalRecord.Field.allCases.map { f in
            guard f != .fields else { return (0, 0, 0, 0, 0, f) }
            let text = Array("\"\(f.key)\":".utf8)
            precondition(text.count <= 16, "a canonical key longer than two words")
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            for (i, b) in text.enumerated() {
                let shift = UInt64(i % 8 * 8)
                if i < 8 {
                    words.0 |= UInt64(b) << shift
                    words.1 |= 0xFF << shift
                } else {
                    words.2 |= UInt64(b) << shift
                    words.3 |= 0xFF << shift
                }
            }
            return (words.0, words.1, words.2, words.3, text.count, f)
        }

    private mutating func fail<T>() -> T? {
        failed = true
        return nil
    }

    /// The index after the string whose opening quote is at `i`: eight bytes at a time to the
    /// next quote or backslash (most strings are short and have neither inside), an escape
    /// stepped over.
    private mutating func skipString(_ i: Int) -> Int? {
        var at = i + 1
        while true {
            at = LineWalk.quoteOrBackslash(in: line, from: at)
            guard at < line.count else { return nil }
            if line[at] == 0x22 { return at + 1 }
            escapes = true
            at += 2
        }
    }

    /// Where the first quote or backslash at or after `i` is in `line` (its count when there
    /// is none): eight bytes at a time, then byte by byte.
    @inline(__always)
    static func quoteOrBackslash(in line: UnsafeRawBufferPointer, from i: Int) -> Int {
        guard let base = line.baseAddress else { return line.count }
        let n = line.count
        var at = i
        while at + 8 <= n {
            let word = (base + at).loadUnaligned(as: UInt64.self)
            let hits = bytesEqual(word, 0x22) | bytesEqual(word, 0x5C)
            if hits != 0 { return at + hits.trailingZeroBitCount / 8 }
            at += 8
        }
        while at < n && line[at] != 0x22 && line[at] != 0x5C { at += 1 }
        return at
    }

    /// The high bit of each byte of `word` that is `byte` (and, past the first such byte,
    /// perhaps of others: only the lowest one set is exact, which is all that is read).
    @inline(__always) static func bytesEqual(_ word: UInt64, _ byte: UInt8) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let x = word ^ (ones &* UInt64(byte))
        return (x &- ones) & ~x & highs
    }

    /// The index after the value that begins at `i`: a string, an object or array (by its
    /// brackets, strings inside skipped whole), or a number or literal (up to the `,` or `}`).
    private mutating func skipValue(_ i: Int) -> Int? {
        let n = line.count
        guard i < n else { return nil }
        switch line[i] {
        case 0x22:
            return skipString(i)
        case 0x7B, 0x5B:
            var depth = 0
            var at = i
            while at < n {
                switch line[at] {
                case 0x22:
                    guard let after = skipString(at) else { return nil }
                    at = after
                    continue
                case 0x7B, 0x5B: depth += 1
                case 0x7D, 0x5D:
                    depth -= 1
                    if depth == 0 { return at + 1 }
                default: break
                }
                at += 1
            }
            return nil
        default:
            var at = i
            while at < n && line[at] != 0x2C && line[at] != 0x7D { at += 1 }
            return at > i ? at : nil
        }
    }

    /// Whether the value at `range` is `{}` or `{"name":"text",…}`.
    private mutating func isObjectOfStrings(_ range: Range<Int>) -> Bool {
        guard line[range.lowerBound] == 0x7B else { return false }
        var at = range.lowerBound + 1
        if line[at] == 0x7D { return at + 1 == range.upperBound }
        while at < range.upperBound {
            guard line[at] == 0x22, let keyEnd = skipString(at), keyEnd + 1 < range.upperBound, line[keyEnd] == 0x3A,
                line[keyEnd + 1] == 0x22, let valueEnd = skipString(keyEnd + 1), valueEnd < range.upperBound
            else { return false }
            if line[valueEnd] == 0x7D { return valueEnd + 1 == range.upperBound }
            guard line[valueEnd] == 0x2C else { return false }
            at = valueEnd + 1
        }
        return false
    }
}

extension CanonicalRecord.Field {
    /// The field's key in a canonical line ("" for `fields`: the phone's own, each by its name).
    public var key: StaticString {
        switch self {
        case .op: "op"
        case .kind: "kind"
        case .device: "device"
        case .receiver: "receiver"
        case .uuid: "uuid"
        case .type: "type"
        case .part: "part"
        case .parts: "parts"
        case .start: "start"
        case .end: "end"
        case .utcOffset: "utc_offset"
        case .timeZone: "timezone"
        case .value: "value"
        case .unit: "unit"
        case .code: "code"
        case .activity: "activity"
        case .durationS: "duration_s"
        case .energyKcal: "energy_kcal"
        case .distanceM: "distance_m"
        case .fields: ""
        case .source: "source"
        case .tags: "tags"
        case .metadata: "metadata"
        case .extra: "extra"
        }
    }

    /// The field whose canonical key is `key` (nil for any other name: one of the phone's own).
    @inline(__always) public init?(key: UnsafeRawBufferPointer) {
        guard let base = key.baseAddress, !key.isEmpty else { return nil }
        // By length and first letters, then the whole name (a phone's own field may share those).
        let first = key[0], second = key.count > 1 ? key[1] : 0
        let guess: CanonicalRecord.Field?
        switch (key.count, first) {
        case (2, 0x6F): guess = .op
        case (3, 0x65): guess = .end
        case (4, 0x74): guess = second == 0x79 ? .type : .tags
        case (4, 0x6B): guess = .kind
        case (4, 0x75): guess = second == 0x75 ? .uuid : .unit
        case (4, 0x70): guess = .part
        case (4, 0x63): guess = .code
        case (5, 0x73): guess = .start
        case (5, 0x76): guess = .value
        case (5, 0x70): guess = .parts
        case (5, 0x65): guess = .extra
        case (6, 0x64): guess = .device
        case (6, 0x73): guess = .source
        case (8, 0x72): guess = .receiver
        case (8, 0x61): guess = .activity
        case (8, 0x6D): guess = .metadata
        case (8, 0x74): guess = .timeZone
        case (10, 0x75): guess = .utcOffset
        case (10, 0x64): guess = second == 0x75 ? .durationS : .distanceM
        case (11, 0x65): guess = .energyKcal
        default: guess = nil
        }
        guard let field = guess else { return nil }
        let bytes = field.key.utf8Start
        for i in 0..<key.count where base.load(fromByteOffset: i, as: UInt8.self) != bytes[i] { return nil }
        self = field
    }
}

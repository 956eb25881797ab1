import Glibc
import HealthgateCore

/// One member's value of a canonical line read into its field, as the writer writes it (no
/// parser): a string, an integer, a number, a time, an offset, the source or the labels object
/// of strings, or the JSON of `metadata`. The caller gives only values with no escape in them
/// but `metadata`'s (the walk tells: `LineWalk.Member.escaped`). False for anything else
/// (`extra`): the caller reads the line with the parser then.
enum LineRead {
    static func member(_ f: CanonicalRecord.Field, _ v: UnsafeRawBufferPointer, into r: inout CanonicalRecord) -> Bool {
        switch f {
        case .op:
            if equal(v, #""upsert""#) { r.op = .upsert } else if equal(v, #""delete""#) { r.op = .delete } else { return false }
        case .kind, .device, .receiver, .uuid, .type, .unit, .activity, .timeZone:
            guard let s = string(v) else { return false }
            switch f {
            case .timeZone: r.timeZone = s
            case .kind: r.kind = s
            case .device: r.device = s
            case .receiver: r.receiver = s
            case .uuid: r.uuid = s
            case .type: r.type = s
            case .unit: r.unit = s
            default: r.activity = s
            }
        case .part, .parts, .code:
            guard let i = integer(v) else { return false }
            switch f {
            case .part: r.part = i
            case .parts: r.parts = i
            default: r.code = i
            }
        case .start, .end:
            guard let s = text(v), let (t, _) = Timestamp.parseRFC3339(s) else { return false }
            if f == .start { r.start = t } else { r.end = t }
        case .utcOffset:
            guard let s = text(v), let seconds = Timestamp.parseOffset(s) else { return false }
            r.utcOffset = seconds
        case .value:
            if let s = string(v) {
                r.value = .string(s)
            } else {
                guard v.first != 0x22, let d = number(v) else { return false }
                r.value = .number(d)
            }
        case .durationS, .energyKcal, .distanceM:
            guard let d = number(v) else { return false }
            switch f {
            case .durationS: r.durationS = d
            case .energyKcal: r.energyKcal = d
            default: r.distanceM = d
            }
        case .source:
            var app: String?, device: String?
            guard
                objectOfStrings(
                    v,
                    { name, text in
                        if LineRead.equal(name, "app"), app == nil {
                            app = String(decoding: text, as: UTF8.self)
                        } else if LineRead.equal(name, "device"), device == nil {
                            device = String(decoding: text, as: UTF8.self)
                        } else {
                            return false
                        }
                        return true
                    })
            else { return false }
            r.source = RecordSource(app: app, device: device)
        case .tags:
            var tags: [RecordTag] = []
            guard
                objectOfStrings(
                    v,
                    { name, text in
                        tags.append(RecordTag(String(decoding: name, as: UTF8.self), String(decoding: text, as: UTF8.self)))
                        return true
                    })
            else { return false }
            r.tags = tags
        case .metadata:
            // JSON the writer wrote, from JSON a parser read or a writer wrote (the line's
            // checksum vouches for the bytes).
            r.metadata = RawJSON(encoded: Array(v))
        case .fields, .extra:
            return false
        }
        return true
    }

    /// Whether `bytes` are the text `literal`.
    @inline(__always) static func equal(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
        bytes.count == literal.utf8CodeUnitCount && (bytes.isEmpty || memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0)
    }

    /// A JSON string's text (one with no escape); nil for any other value.
    @inline(__always) static func text(_ v: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let n = v.count
        guard n >= 2, v[0] == 0x22, v[n - 1] == 0x22 else { return nil }
        return UnsafeRawBufferPointer(rebasing: v[1..<(n - 1)])
    }

    @inline(__always) static func string(_ v: UnsafeRawBufferPointer) -> String? {
        text(v).map { String(decoding: $0, as: UTF8.self) }
    }

    /// An integer as JSON writes one (digits, a minus sign before), within Int's range.
    static func integer(_ v: UnsafeRawBufferPointer) -> Int? {
        guard !v.isEmpty else { return nil }
        let negative = v[0] == 0x2D
        let digits = UnsafeRawBufferPointer(rebasing: v[(negative ? 1 : 0)...])
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var magnitude: UInt64 = 0
        for d in digits {
            guard d >= 0x30 && d <= 0x39 else { return nil }
            magnitude = magnitude * 10 + UInt64(d - 0x30)
        }
        if negative { return magnitude <= UInt64(Int.max) + 1 ? Int(truncatingIfNeeded: 0 &- magnitude) : nil }
        return magnitude <= UInt64(Int.max) ? Int(magnitude) : nil
    }

    /// A JSON number, read exactly: up to 15 digits with a fraction and no exponent by one
    /// correctly rounded division by an exact power of ten; anything else by strtod (which
    /// rounds correctly too), on a copy ending in NUL.
    static func number(_ v: UnsafeRawBufferPointer) -> Double? {
        guard let base = v.baseAddress, !v.isEmpty else { return nil }
        let negative = v[0] == 0x2D
        var i = negative ? 1 : 0
        var mantissa: UInt64 = 0, digits = 0, fraction = 0, dot = false
        while i < v.count {
            let c = v[i]
            if c >= 0x30 && c <= 0x39 {
                mantissa = mantissa &* 10 &+ UInt64(c - 0x30)
                digits += 1
                if dot { fraction += 1 }
            } else if c == 0x2E && !dot && digits > 0 {
                dot = true
            } else {
                break
            }
            i += 1
        }
        if i == v.count && digits > 0 && digits <= 15 && (!dot || fraction > 0) {
            let exact = Double(mantissa) / powersOfTen[fraction]
            return negative ? -exact : exact
        }
        guard v[0] == 0x2D || (v[0] >= 0x30 && v[0] <= 0x39) else { return nil }
        for c in v where !((c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x65 || c == 0x45 || c == 0x2B || c == 0x2D) {
            return nil
        }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: v.count + 1) { copy -> Double? in
            guard let start = copy.baseAddress else { return nil }
            UnsafeMutableRawPointer(start).copyMemory(from: base, byteCount: v.count)
            start[v.count] = 0
            var end: UnsafeMutablePointer<CChar>?
            let d = strtod(start, &end)
            guard let end, end == start + v.count, d.isFinite else { return nil }
            return d
        }
    }

    /// 10^0 … 10^15, each exact in a double.
    static let powersOfTen: [Double] = (0...15).map { k in (0..<k).reduce(1.0) { r, _ in r * 10 } }

    /// Calls `member` with each name and text of `{"name":"text",…}` (with no escape in it);
    /// false when the value is not such an object or `member` says so.
    static func objectOfStrings(
        _ v: UnsafeRawBufferPointer,
        _ member: (_ name: UnsafeRawBufferPointer, _ text: UnsafeRawBufferPointer) -> Bool
    ) -> Bool {
        let n = v.count
        guard n >= 2, v[0] == 0x7B, v[n - 1] == 0x7D, let base = v.baseAddress else { return false }
        if n == 2 { return true }
        var i = 1
        func string() -> UnsafeRawBufferPointer? {
            guard i < n, v[i] == 0x22, let quote = memchr(base + i + 1, 0x22, n - i - 1) else { return nil }
            let e = UnsafeRawPointer(quote) - base
            defer { i = e + 1 }
            return UnsafeRawBufferPointer(rebasing: v[(i + 1)..<e])
        }
        while i < n - 1 {
            guard let name = string(), i < n, v[i] == 0x3A else { return false }
            i += 1
            guard let text = string(), member(name, text), i < n else { return false }
            if v[i] == 0x7D { return i == n - 1 }
            guard v[i] == 0x2C else { return false }
            i += 1
        }
        return false
    }
}

extension CanonicalRecord {
    /// Sets field `f` to `other`'s.
    mutating func take(_ f: Field, from other: CanonicalRecord) {
        switch f {
        case .op: op = other.op
        case .kind: kind = other.kind
        case .device: device = other.device
        case .receiver: receiver = other.receiver
        case .uuid: uuid = other.uuid
        case .type: type = other.type
        case .part: part = other.part
        case .parts: parts = other.parts
        case .start: start = other.start
        case .end: end = other.end
        case .utcOffset: utcOffset = other.utcOffset
        case .timeZone: timeZone = other.timeZone
        case .value: value = other.value
        case .unit: unit = other.unit
        case .code: code = other.code
        case .activity: activity = other.activity
        case .durationS: durationS = other.durationS
        case .energyKcal: energyKcal = other.energyKcal
        case .distanceM: distanceM = other.distanceM
        case .fields: fields = other.fields
        case .source: source = other.source
        case .tags: tags = other.tags
        case .metadata: metadata = other.metadata
        case .extra: extra = other.extra
        }
    }
}

/// A point in time as Unix seconds plus nanoseconds, always UTC.
///
/// Parsed from and formatted as RFC 3339 by hand: Foundation's ISO 8601 parsers are far
/// slower, and a 1 MB body holds some 10,000 dates.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var seconds: Int64
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool {
        a.seconds != b.seconds ? a.seconds < b.seconds : a.nanoseconds < b.nanoseconds
    }

    /// Nanoseconds since the Unix epoch (line protocol's default precision).
    public var unixNanoseconds: Int64 { seconds &* 1_000_000_000 &+ Int64(nanoseconds) }

    public var description: String { rfc3339() }

    /// `2026-10-14T07:01:00Z`, with a fraction only when there is one (trailing zeros cut).
    public func rfc3339() -> String {
        String(unsafeUninitializedCapacity: 32) { formatRFC3339(into: UnsafeMutableRawBufferPointer($0)) }
    }

    /// The date part, `2026-10-14`, in UTC.
    public func utcDate() -> String {
        let (y, m, d) = Timestamp.civil(fromDays: Timestamp.floorDiv(seconds, 86_400))
        return String(unsafeUninitializedCapacity: 10) { b in
            let out = UnsafeMutableRawBufferPointer(b)
            Timestamp.writeDigits(y, 4, to: out, at: 0); out[4] = 0x2D
            Timestamp.writeDigits(m, 2, to: out, at: 5); out[7] = 0x2D
            Timestamp.writeDigits(d, 2, to: out, at: 8)
            return 10
        }
    }

    /// `rfc3339()` appended to `out`.
    public func appendRFC3339(to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(byteCount: 32, alignment: 1) { buffer in
            let n = formatRFC3339(into: buffer)
            out.append(contentsOf: buffer[..<n])
        }
    }

    /// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `t`, `z` and a space for `T`
    /// are accepted). Returns the UTC instant and the offset the text carried, in seconds
    /// (nil for `Z`). Nil when the text is not such a time or a field is out of range.
    public static func parseRFC3339(_ s: UnsafeRawBufferPointer) -> (Timestamp, offsetSeconds: Int?)? {
        var none = RecentDay()
        return parseRFC3339(s, recent: &none)
    }

    /// The date of the last time parsed (`YYYY-MM-DD`, as text) and its day number: the times
    /// of one body mostly share a few days, read again from the text only when it changes.
    public struct RecentDay: Sendable {
        var text: (UInt64, UInt16) = (0, 0)
        var days = 0
        var known = false
        public init() {}

        @inline(__always) static func text(_ s: UnsafeRawBufferPointer) -> (UInt64, UInt16) {
            (s.loadUnaligned(as: UInt64.self), s.loadUnaligned(fromByteOffset: 8, as: UInt16.self))
        }
    }

    /// `parseRFC3339(_:)`, the date's day number taken from `recent` when the text's date is
    /// the last one's.
    public static func parseRFC3339(_ s: UnsafeRawBufferPointer, recent: inout RecentDay) -> (Timestamp, offsetSeconds: Int?)? {
        var i = 0
        let end = s.count
        @inline(__always) func num(_ n: Int) -> Int? {
            guard end - i >= n else { return nil }
            var v = 0
            for k in 0..<n {
                let c = s[i + k] &- 0x30
                guard c <= 9 else { return nil }
                v = v * 10 + Int(c)
            }
            i += n
            return v
        }
        @inline(__always) func lit(_ c: UInt8) -> Bool {
            guard i < end, s[i] == c else { return false }
            i += 1
            return true
        }
        let days: Int
        if end >= 10 && recent.known && RecentDay.text(s) == recent.text {
            days = recent.days
            i = 10
        } else {
            guard let year = num(4), lit(0x2D), let month = num(2), lit(0x2D), let day = num(2) else { return nil }
            guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
            days = daysFromCivil(year: year, month: month, day: day)
            recent.text = RecentDay.text(s)
            recent.days = days
            recent.known = true
        }
        guard i < end, s[i] == 0x54 || s[i] == 0x74 || s[i] == 0x20 else { return nil }
        i += 1
        guard let hour = num(2), lit(0x3A), let minute = num(2), lit(0x3A), let second = num(2) else { return nil }
        guard hour <= 23, minute <= 59, second <= 60 else { return nil }
        var nanos = 0
        if i < end, s[i] == 0x2E {
            i += 1
            var digits = 0
            while i < end, s[i] &- 0x30 <= 9 {
                if digits < 9 { nanos = nanos * 10 + Int(s[i] - 0x30) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 9 { for _ in digits..<9 { nanos *= 10 } }
        }
        guard i < end else { return nil }
        var offset: Int? = nil
        switch s[i] {
        case 0x5A, 0x7A:
            i += 1
        case 0x2B, 0x2D:
            let sign = s[i] == 0x2D ? -1 : 1
            i += 1
            guard let oh = num(2), lit(0x3A), let om = num(2), oh <= 23, om <= 59 else { return nil }
            offset = sign * (oh * 3600 + om * 60)
        default:
            return nil
        }
        guard i == end else { return nil }
        // A leap second (:60) is folded into the next second, as POSIX time does.
        let local = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return (Timestamp(seconds: local - Int64(offset ?? 0), nanoseconds: Int32(nanos)), offset)
    }

    public static func parseRFC3339(_ s: String) -> (Timestamp, offsetSeconds: Int?)? {
        var s = s
        return s.withUTF8 { parseRFC3339(UnsafeRawBufferPointer($0)) }
    }

    /// Formats into `out` (at least 32 bytes) and returns the length written.
    public func formatRFC3339(into out: UnsafeMutableRawBufferPointer) -> Int {
        let days = Timestamp.floorDiv(seconds, 86_400)
        let secOfDay = Int(seconds - days * 86_400)
        let (y, m, d) = Timestamp.civil(fromDays: days)
        var i = 0
        @inline(__always) func digits(_ v: Int, _ width: Int) {
            Timestamp.writeDigits(v, width, to: out, at: i)
            i += width
        }
        @inline(__always) func byte(_ b: UInt8) {
            out[i] = b
            i += 1
        }
        digits(y, 4); byte(0x2D); digits(m, 2); byte(0x2D); digits(d, 2); byte(0x54)
        digits(secOfDay / 3600, 2); byte(0x3A); digits(secOfDay / 60 % 60, 2); byte(0x3A); digits(secOfDay % 60, 2)
        if nanoseconds > 0 {
            var frac = Int(nanoseconds)
            var width = 9
            while frac % 10 == 0 { frac /= 10; width -= 1 }
            byte(0x2E)
            digits(frac, width)
        }
        byte(0x5A)
        return i
    }

    /// `+02:00` / `-05:30` for an offset in seconds.
    public static func formatOffset(_ seconds: Int) -> String {
        String(unsafeUninitializedCapacity: 6) { formatOffset(seconds, into: UnsafeMutableRawBufferPointer($0)) }
    }

    /// `formatOffset(_:)` written into `out` (at least 6 bytes); returns the length written (6).
    public static func formatOffset(_ seconds: Int, into out: UnsafeMutableRawBufferPointer) -> Int {
        let a = seconds.magnitude
        out[0] = seconds < 0 ? 0x2D : 0x2B
        writeDigits(Int(truncatingIfNeeded: a / 3600), 2, to: out, at: 1)
        out[3] = 0x3A
        writeDigits(Int(truncatingIfNeeded: a / 60 % 60), 2, to: out, at: 4)
        return 6
    }

    /// Parses `+02:00`, `-0530`, `Z`; nil otherwise.
    public static func parseOffset(_ s: String) -> Int? {
        var s = s
        return s.withUTF8 { parseOffset(UnsafeRawBufferPointer($0)) }
    }

    /// `parseOffset` of UTF-8 bytes (no array, no string: it runs for every record decoded).
    public static func parseOffset(_ b: UnsafeRawBufferPointer) -> Int? {
        if b.count == 1 && b[0] == 0x5A { return 0 }
        guard b.count == 6 || b.count == 5, b[0] == 0x2B || b[0] == 0x2D else { return nil }
        if b.count == 6 && b[3] != 0x3A { return nil }
        let (d0, d1, d2, d3) = b.count == 6 ? (b[1], b[2], b[4], b[5]) : (b[1], b[2], b[3], b[4])
        guard d0 &- 0x30 <= 9, d1 &- 0x30 <= 9, d2 &- 0x30 <= 9, d3 &- 0x30 <= 9 else { return nil }
        let h = Int(d0 - 0x30) * 10 + Int(d1 - 0x30)
        let m = Int(d2 - 0x30) * 10 + Int(d3 - 0x30)
        guard h <= 23, m <= 59 else { return nil }
        return (b[0] == 0x2D ? -1 : 1) * (h * 3600 + m * 60)
    }

    // MARK: calendar arithmetic (proleptic Gregorian, Howard Hinnant's days-from-civil algorithm)

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int, Int, Int) {
        let z = Int(z0) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    /// The last `width` decimal digits of `v` (0 when negative), zero-padded, at `out[i...]`.
    @inline(__always) static func writeDigits(_ v: Int, _ width: Int, to out: UnsafeMutableRawBufferPointer, at i: Int) {
        assert(i + width <= out.count)
        ByteWriter.writeDigits(
            UInt64(max(v, 0)), width: width,
            endingAt: out.baseAddress!.assumingMemoryBound(to: UInt8.self) + i + width)
    }
}

/// A length of time written with units: `250ms`, `5s`, `1.5s`, `2m`, `1h`, `1d`, or a
/// combination such as `1h30m`. Also `ns` and `us` (or `µs`).
///
/// A bare number is refused, because `timeout: 30` could mean seconds or milliseconds.
public struct ConfigDuration: Sendable, Hashable, Comparable, CustomStringConvertible, Decodable {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    /// Parses the written form.
    public init(parsing text: String) throws(ConfigValueError) {
        nanoseconds = try Self.parse(text)
    }

    public init(from decoder: any Decoder) throws {
        self = try UnitValueDecoding.decode(
            from: decoder, expected: "a duration such as 5s, 250ms or 2m", parse: ConfigDuration.init(parsing:))
    }

    public var seconds: Double { Double(nanoseconds) / 1e9 }

    /// The same length as a standard library `Duration`, e.g. for `Task.sleep(for:)`.
    public var duration: Duration { .nanoseconds(nanoseconds) }

    public static func < (lhs: ConfigDuration, rhs: ConfigDuration) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    /// The shortest form that parses back to the same value: `250ms`, `1.5s`, `1h30m`, `1d`.
    public var description: String {
        let sign = nanoseconds < 0 ? "-" : ""
        let total = nanoseconds.magnitude
        if total == 0 { return "0s" }
        if total < 1_000 { return "\(sign)\(total)ns" }
        if total < 1_000_000 { return sign + Self.decimal(total, unit: 1_000, digits: 3) + "us" }
        if total < 1_000_000_000 { return sign + Self.decimal(total, unit: 1_000_000, digits: 6) + "ms" }
        var text = sign
        var rest = total
        for (suffix, size) in [("d", Self.day), ("h", Self.hour), ("m", Self.minute)] {
            let count = rest / UInt64(size)
            if count > 0 { text += "\(count)\(suffix)" }
            rest %= UInt64(size)
        }
        if rest > 0 {
            text += Self.decimal(rest, unit: 1_000_000_000, digits: 9) + "s"
        }
        return text
    }

    // MARK: Parsing

    private static let second: Int64 = 1_000_000_000
    private static let minute: Int64 = 60 * second
    private static let hour: Int64 = 60 * minute
    private static let day: Int64 = 24 * hour
    private static let units: [Substring: Int64] = [
        "ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000,
        "s": second, "m": minute, "h": hour, "d": day
    ]
    private static let forms = "250ms, 5s, 1.5s, 2m, 1h, 1d or combinations such as 1h30m"

    private static func parse(_ text: String) throws(ConfigValueError) -> Int64 {
        let quoted = text.quotedForMessage
        if text.hasPrefix("-") {
            throw ConfigValueError("a duration cannot be negative, found \(quoted)")
        }
        if UnitValueDecoding.splitDecimal(Substring(text)) != nil {
            throw ConfigValueError("\(quoted) has no unit; add a unit: 5s, 250ms, 2m")
        }
        var rest = Substring(text)
        var total: Int64 = 0
        guard !rest.isEmpty else {
            throw ConfigValueError("expected a duration such as \(forms), found an empty value")
        }
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCIIDigit || $0 == "." }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { !$0.isASCIIDigit && $0 != "." }
            rest = rest.dropFirst(unit.count)
            guard let (whole, fraction) = UnitValueDecoding.splitDecimal(number), let size = units[unit] else {
                if !number.isEmpty && unit.isEmpty {
                    throw ConfigValueError("\(number) in \(quoted) has no unit; add a unit: 5s, 250ms, 2m")
                }
                throw ConfigValueError("invalid duration \(quoted); write a number and a unit: \(forms)")
            }
            guard let part = amount(whole: whole, fraction: fraction, unit: size) else {
                throw ConfigValueError("duration \(quoted) is too long")
            }
            let (sum, overflow) = total.addingReportingOverflow(part)
            guard !overflow else { throw ConfigValueError("duration \(quoted) is too long") }
            total = sum
        }
        return total
    }

    /// `whole.fraction × unit` nanoseconds, rounded to the nearest nanosecond; `nil` on overflow.
    private static func amount(whole: Substring, fraction: Substring, unit: Int64) -> Int64? {
        guard let wholeValue = whole.isEmpty ? 0 : Int64(whole) else { return nil }
        let (wholeNanoseconds, overflow) = wholeValue.multipliedReportingOverflow(by: unit)
        guard !overflow else { return nil }
        guard !fraction.isEmpty, let fractionValue = Double("0." + fraction) else { return wholeNanoseconds }
        // A fraction of at most a day is below 8.64e13 ns, where a Double is exact
        // to well under a nanosecond.
        let (sum, sumOverflow) = wholeNanoseconds.addingReportingOverflow(Int64((fractionValue * Double(unit)).rounded()))
        return sumOverflow ? nil : sum
    }

    /// `value / unit` with up to `digits` decimals, trailing zeros removed: `1.5`, `250`.
    private static func decimal(_ value: UInt64, unit: UInt64, digits: Int) -> String {
        let whole = value / unit
        let remainder = value % unit
        guard remainder > 0 else { return "\(whole)" }
        var fraction = String(remainder)
        fraction = String(repeating: "0", count: digits - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(whole).\(fraction)"
    }
}

/// An amount of bytes written with an optional unit: `512`, `100KB` (also `kB` or
/// `K`, ×1000), `100KiB` (×1024), `MB`/`MiB`, `GB`/`GiB`, `TB`/`TiB`. Units are not
/// case-sensitive, a space may separate number and unit, and decimals are allowed when
/// they come to whole bytes (`1.5KiB` is 1536).
public struct ByteSize: Sendable, Hashable, Comparable, CustomStringConvertible, Decodable {
    public var bytes: Int64

    public init(bytes: Int64) {
        self.bytes = bytes
    }

    /// Parses the written form.
    public init(parsing text: String) throws(ConfigValueError) {
        bytes = try Self.parse(text)
    }

    public init(from decoder: any Decoder) throws {
        self = try UnitValueDecoding.decode(
            from: decoder, expected: "a size such as 512, 100KB or 10MiB", parse: ByteSize.init(parsing:))
    }

    public static func < (lhs: ByteSize, rhs: ByteSize) -> Bool {
        lhs.bytes < rhs.bytes
    }

    /// The largest unit that divides the size exactly: `1MB`, `1MiB`, `1536`.
    public var description: String {
        for (suffix, size) in Self.displayUnits where bytes != 0 && bytes % size == 0 {
            return "\(bytes / size)\(suffix)"
        }
        return "\(bytes)"
    }

    // MARK: Parsing

    private static let kilo: Int64 = 1_000
    private static let kibi: Int64 = 1_024
    private static let units: [String: Int64] = [
        "": 1, "b": 1,
        "k": kilo, "kb": kilo, "kib": kibi,
        "m": kilo * kilo, "mb": kilo * kilo, "mib": kibi * kibi,
        "g": kilo * kilo * kilo, "gb": kilo * kilo * kilo, "gib": kibi * kibi * kibi,
        "t": kilo * kilo * kilo * kilo, "tb": kilo * kilo * kilo * kilo, "tib": kibi * kibi * kibi * kibi
    ]
    private static let displayUnits: [(String, Int64)] = [
        ("TiB", kibi * kibi * kibi * kibi), ("TB", kilo * kilo * kilo * kilo),
        ("GiB", kibi * kibi * kibi), ("GB", kilo * kilo * kilo),
        ("MiB", kibi * kibi), ("MB", kilo * kilo),
        ("KiB", kibi), ("KB", kilo)
    ]
    private static let forms = "512, 100KB (or kB, K: ×1000), 100KiB (×1024), 10MB, 10MiB, 1GB, 1GiB"

    private static func parse(_ text: String) throws(ConfigValueError) -> Int64 {
        let quoted = text.quotedForMessage
        if text.hasPrefix("-") {
            throw ConfigValueError("a size cannot be negative, found \(quoted)")
        }
        let number = text.prefix { $0.isASCIIDigit || $0 == "." }
        let unit = text.dropFirst(number.count).drop { $0 == " " }
        guard let (whole, fraction) = UnitValueDecoding.splitDecimal(number),
            let size = units[unit.lowercased()]
        else {
            throw ConfigValueError("invalid size \(quoted); write a number of bytes with an optional unit: \(forms)")
        }
        // Exact decimal arithmetic: whole × size + fraction × size / 10^digits.
        // At most 6 significant decimals keeps fraction × size below 10^6 × 2^40 ≈ 1.1e18,
        // inside Int64, and is more precision than any size needs.
        let fractionDigits = fraction.reversed().drop { $0 == "0" }.count
        guard fractionDigits <= 6 else {
            throw ConfigValueError("size \(quoted) has too many decimals; write it in a smaller unit")
        }
        guard let wholeValue = whole.isEmpty ? 0 : Int64(whole) else {
            throw ConfigValueError("size \(quoted) is too large")
        }
        let (wholeBytes, overflow) = wholeValue.multipliedReportingOverflow(by: size)
        guard !overflow else { throw ConfigValueError("size \(quoted) is too large") }
        guard fractionDigits > 0 else { return wholeBytes }

        let fractionValue = Int64(fraction.prefix(fractionDigits)) ?? 0
        var scale: Int64 = 1
        for _ in 0..<fractionDigits { scale *= 10 }
        let scaled = fractionValue * size
        guard scaled % scale == 0 else {
            throw ConfigValueError("size \(quoted) is not a whole number of bytes")
        }
        let (total, totalOverflow) = wholeBytes.addingReportingOverflow(scaled / scale)
        guard !totalOverflow else { throw ConfigValueError("size \(quoted) is too large") }
        return total
    }
}

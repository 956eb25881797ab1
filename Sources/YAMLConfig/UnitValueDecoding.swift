/// Shared `init(from:)` plumbing for the scalar value types with units
/// (`ConfigDuration`, `ByteSize`): read the text, parse it, and report failures as
/// `DecodingError`s at the value's coding path, which YAMLDecoder locates in the file.
enum UnitValueDecoding {
    static func decode<Value>(
        from decoder: any Decoder, expected: String, parse: (String) throws(ConfigValueError) -> Value
    ) throws -> Value {
        let container = try decoder.singleValueContainer()
        let text: String
        do {
            text = try container.decode(String.self)
        } catch {
            let found = YAMLDecoder.node(of: decoder).map { ", found \($0.summary)" } ?? ""
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected \(expected)\(found)")
        }
        do {
            return try parse(text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    /// Splits `"1.25"` into whole and fraction digits; `nil` unless the text is ASCII
    /// digits with at most one `.` and at least one digit.
    static func splitDecimal(_ text: Substring) -> (whole: Substring, fraction: Substring)? {
        let whole = text.prefix(while: \.isASCIIDigit)
        var rest = text.dropFirst(whole.count)
        var fraction = Substring()
        if rest.first == "." {
            rest = rest.dropFirst()
            fraction = rest.prefix(while: \.isASCIIDigit)
            rest = rest.dropFirst(fraction.count)
        }
        guard rest.isEmpty, !whole.isEmpty || !fraction.isEmpty else { return nil }
        return (whole, fraction)
    }
}

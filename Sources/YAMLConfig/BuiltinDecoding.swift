/// Decoding of the types YAMLDecoder reads straight from a node, dispatched on
/// `T.self` so that `String`, `Int`, … get the strict scalar rules whichever
/// container they are decoded through, and `YAMLNode` is handed over untouched.
extension DecodingContext {
    /// The decoded value when `T` is a builtin type; `nil` when `T` must decode itself.
    func decodeBuiltin<T>(_ type: T.Type, node: YAMLNode, path: String, codingPath: [any CodingKey]) throws -> T? {
        let reader = ScalarReader(context: self, node: node, path: path, codingPath: codingPath)
        if T.self == YAMLNode.self { return node as? T }
        if T.self == String.self { return try reader.string() as? T }
        if T.self == Bool.self { return try reader.bool() as? T }
        if T.self == Double.self { return try reader.floatingPoint(Double.self) as? T }
        if T.self == Float.self { return try reader.floatingPoint(Float.self) as? T }
        if let integerType = T.self as? any FixedWidthInteger.Type {
            return try reader.integer(integerType) as? T
        }
        return nil
    }
}

/// Reads one scalar node as a builtin type, with messages meant for the person
/// editing the file.
private struct ScalarReader {
    let context: DecodingContext
    let node: YAMLNode
    let path: String
    let codingPath: [any CodingKey]

    private static let yamlBooleanLookalikes: Set<String> = ["yes", "no", "y", "n", "on", "off"]

    func string() throws -> String {
        let scalar = try nonNullScalar(String.self, expected: "a string")
        return scalar.value
    }

    func bool() throws -> Bool {
        let scalar = try nonNullScalar(Bool.self, expected: "true or false")
        let lowered = scalar.value.lowercased()
        if scalar.isQuoted {
            let hint = lowered == "true" || lowered == "false" ? "; remove the quotes" : ""
            throw mismatch(Bool.self, "expected true or false, found \(node.summary)\(hint)")
        }
        switch scalar.value {
        case "true": return true
        case "false": return false
        default: break
        }
        if lowered == "true" || lowered == "false" {
            throw mismatch(Bool.self, "expected true or false, found \(node.summary); write \(lowered) in lower case")
        }
        if Self.yamlBooleanLookalikes.contains(lowered) {
            throw mismatch(Bool.self, "\(node.summary) is not accepted as a boolean; write true or false")
        }
        throw mismatch(Bool.self, "expected true or false, found \(node.summary)")
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        let scalar = try nonNullScalar(I.self, expected: "a number")
        let text = scalar.value
        if scalar.isQuoted {
            let hint = NumberSyntax.isInteger(text) || NumberSyntax.isDecimal(text) ? "; remove the quotes" : ""
            throw mismatch(I.self, "expected a number, found \(node.summary)\(hint)")
        }
        if let value = NumberSyntax.integer(text, as: I.self) {
            return value
        }
        if NumberSyntax.isInteger(text) {
            throw mismatch(I.self, "\(text) is out of range (allowed: \(I.min) to \(I.max))")
        }
        if NumberSyntax.isDecimal(text) {
            throw mismatch(I.self, "expected a whole number, found \(text)")
        }
        throw mismatch(I.self, "expected a number, found \(node.summary)")
    }

    func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(_ type: F.Type) throws -> F {
        let scalar = try nonNullScalar(F.self, expected: "a number")
        let text = scalar.value
        if scalar.isQuoted {
            let hint = NumberSyntax.isDecimal(text) ? "; remove the quotes" : ""
            throw mismatch(F.self, "expected a number, found \(node.summary)\(hint)")
        }
        if let special = NumberSyntax.specialFloat(text) {
            return F(special)
        }
        guard NumberSyntax.isDecimal(text), let value = F(text) else {
            throw mismatch(F.self, "expected a number, found \(node.summary)")
        }
        if value.isInfinite {
            throw mismatch(F.self, "\(text) is out of range for a \(F.self)")
        }
        return value
    }

    /// The scalar, or a problem for a mapping, a list or a null.
    private func nonNullScalar(_ type: Any.Type, expected: String) throws -> YAMLScalar {
        guard case .scalar(let scalar) = node else {
            throw mismatch(type, "expected \(expected), found \(node.summary)")
        }
        if scalar.isNull {
            var message = "expected \(expected), found \(node.summary)"
            if !scalar.value.isEmpty && type == String.self {
                message += "; write \"\(scalar.value)\" in quotes to mean the text"
            }
            throw context.error(.valueNotFound(type), message, at: node.location, path: path, codingPath: codingPath)
        }
        return scalar
    }

    private func mismatch(_ type: Any.Type, _ message: String) -> DecodingError {
        context.error(.typeMismatch(type), message, at: node.location, path: path, codingPath: codingPath)
    }
}

/// The number forms YAMLDecoder accepts (YAML 1.2 core schema, without the exotic ones).
enum NumberSyntax {
    /// `[-+]?` then decimal digits, `0x` hex digits or `0o` octal digits.
    static func isInteger(_ text: String) -> Bool {
        splitInteger(text) != nil
    }

    static func integer<I: FixedWidthInteger>(_ text: String, as type: I.Type) -> I? {
        guard let (negative, digits, radix) = splitInteger(text) else { return nil }
        // Parse with the sign attached so that I.min itself is in range.
        return I((negative ? "-" : "") + digits, radix: radix)
    }

    /// `[-+]? ( digits [. digits?] | . digits ) ( [eE] [-+]? digits )?`
    static func isDecimal(_ text: String) -> Bool {
        var rest = Substring(text)
        if rest.first == "-" || rest.first == "+" { rest = rest.dropFirst() }
        let whole = rest.prefix(while: \.isASCIIDigit)
        rest = rest.dropFirst(whole.count)
        var fraction = Substring()
        if rest.first == "." {
            rest = rest.dropFirst()
            fraction = rest.prefix(while: \.isASCIIDigit)
            rest = rest.dropFirst(fraction.count)
        }
        guard !whole.isEmpty || !fraction.isEmpty else { return false }
        if rest.first == "e" || rest.first == "E" {
            rest = rest.dropFirst()
            if rest.first == "-" || rest.first == "+" { rest = rest.dropFirst() }
            let exponent = rest.prefix(while: \.isASCIIDigit)
            guard !exponent.isEmpty else { return false }
            rest = rest.dropFirst(exponent.count)
        }
        return rest.isEmpty
    }

    /// `.inf`, `-.inf`, `.nan` and their capitalised spellings.
    static func specialFloat(_ text: String) -> Double? {
        switch text {
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .infinity
        case "-.inf", "-.Inf", "-.INF": return -.infinity
        case ".nan", ".NaN", ".NAN": return .nan
        default: return nil
        }
    }

    private static func splitInteger(_ text: String) -> (negative: Bool, digits: Substring, radix: Int)? {
        var rest = Substring(text)
        var negative = false
        if rest.first == "-" || rest.first == "+" {
            negative = rest.first == "-"
            rest = rest.dropFirst()
        }
        var radix = 10
        if rest.hasPrefix("0x") {
            radix = 16
            rest = rest.dropFirst(2)
        } else if rest.hasPrefix("0o") {
            radix = 8
            rest = rest.dropFirst(2)
        }
        let valid =
            !rest.isEmpty
            && rest.allSatisfy { character in
                guard character.isASCII, let digit = character.hexDigitValue else { return false }
                return digit < radix
            }
        return valid ? (negative, rest, radix) : nil
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

/// Substitutes environment variables into scalar values of a parsed tree.
///
/// Runs after parsing, on values only (never keys), so a variable's text is never
/// read as YAML: `${X}` with X = "a: b" gives the string "a: b", not a mapping.
/// Supported forms:
/// - `${NAME}`: the variable's value; a problem when it is unset (set but empty is fine).
/// - `${NAME:-default}`: the default when the variable is unset or empty.
/// - `$$`: a literal `$`.
/// A `$` followed by anything else is kept as it is.
struct EnvironmentInterpolator {
    let environment: [String: String]

    private static let dollar = UInt8(ascii: "$")
    private static let openBrace = UInt8(ascii: "{")
    private static let closeBrace = UInt8(ascii: "}")

    func apply(to node: YAMLNode, path: String, problems: inout [ConfigProblem]) -> YAMLNode {
        switch node {
        case .scalar(var scalar):
            if scalar.value.utf8.contains(Self.dollar) {
                scalar.value = interpolate(scalar.value, location: scalar.location, path: path, problems: &problems)
            }
            return .scalar(scalar)
        case .sequence(let items, let location):
            let interpolated = items.enumerated().map { index, item in
                apply(to: item, path: ConfigPath.join(path, index: index), problems: &problems)
            }
            return .sequence(interpolated, location)
        case .mapping(let entries, let location):
            let interpolated = entries.map { entry in
                var entry = entry
                entry.value = apply(to: entry.value, path: ConfigPath.join(path, key: entry.key), problems: &problems)
                return entry
            }
            return .mapping(interpolated, location)
        }
    }

    /// Works on UTF-8 bytes: `$`, `{` and `}` are ASCII and never occur inside a
    /// multi-byte sequence, so byte-level scanning cannot split a character.
    func interpolate(_ text: String, location: SourceLocation, path: String, problems: inout [ConfigProblem]) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == Self.dollar, index + 1 < bytes.count else {
                output.append(byte)
                index += 1
                continue
            }
            switch bytes[index + 1] {
            case Self.dollar:
                output.append(Self.dollar)
                index += 2
            case Self.openBrace:
                guard let close = bytes[(index + 2)...].firstIndex(of: Self.closeBrace) else {
                    problems.append(
                        ConfigProblem(
                            location: location, path: path,
                            message: "unterminated \"${\" in \(text.quotedForMessage): close it with \"}\", or write $$ for a literal $"))
                    output.append(contentsOf: bytes[index...])
                    index = bytes.count
                    continue
                }
                let inner = String(decoding: bytes[(index + 2)..<close], as: UTF8.self)
                if let replacement = resolve(inner, location: location, path: path, problems: &problems) {
                    output.append(contentsOf: replacement.utf8)
                }
                index = close + 1
            default:
                output.append(byte)
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The text for `${inner}`, or `nil` after recording a problem.
    private func resolve(_ inner: String, location: SourceLocation, path: String, problems: inout [ConfigProblem]) -> String? {
        let name = String(inner.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
        let rest = inner.dropFirst(name.count)
        let validName = name.first.map { !$0.isNumber } ?? false
        guard validName, rest.isEmpty || rest.hasPrefix(":-") else {
            problems.append(
                ConfigProblem(
                    location: location, path: path,
                    message:
                        "cannot read \("${\(inner)}".quotedForMessage): write ${NAME} or ${NAME:-default}, where NAME is letters, digits and _ and does not start with a digit; write $$ for a literal $"
                ))
            return nil
        }
        let defaultValue = rest.isEmpty ? nil : rest.dropFirst(2)
        if let defaultValue, defaultValue.contains("${") {
            problems.append(
                ConfigProblem(
                    location: location, path: path,
                    message: "the default in \("${\(inner)}".quotedForMessage) contains \"${\"; nested variables are not supported"))
            return nil
        }
        let value = environment[name]
        if let defaultValue {
            if let value, !value.isEmpty { return value }
            // `$$` is a literal `$` in a default as everywhere else.
            var out: [UInt8] = []
            var previousWasDollar = false
            for b in defaultValue.utf8 {
                if b == Self.dollar && previousWasDollar { previousWasDollar = false; continue }
                previousWasDollar = b == Self.dollar
                out.append(b)
            }
            return String(decoding: out, as: UTF8.self)
        }
        guard let value else {
            problems.append(
                ConfigProblem(
                    location: location, path: path,
                    message: "environment variable \(name) is not set; set it, or give a default with ${\(name):-value}",
                    unsetVariable: name))
            return nil
        }
        return value
    }
}

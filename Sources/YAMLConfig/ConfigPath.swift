/// Builds the dotted key paths used in `ConfigProblem.path`.
///
/// Keys are joined with dots (`sinks.influx.batch`) and sequence indices are
/// bracketed (`routes[0]`). A key that would make the path ambiguous (empty, or
/// containing `.`, `[`, `]`, `"` or whitespace) is written as `["my.key"]`.
public enum ConfigPath {
    /// The path of the value stored under `key` in the mapping at `base`.
    public static func join(_ base: String, key: String) -> String {
        let needsBrackets =
            key.isEmpty
            || key.contains { c in
                c == "." || c == "[" || c == "]" || c == "\"" || c.isWhitespace
            }
        if needsBrackets {
            let escaped = key.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"")
            return "\(base)[\"\(escaped)\"]"
        }
        return base.isEmpty ? key : "\(base).\(key)"
    }

    /// The path of element `index` of the sequence at `base`.
    public static func join(_ base: String, index: Int) -> String {
        "\(base)[\(index)]"
    }
}

extension String {
    /// The string in double quotes for a message, with control characters escaped
    /// and long values shortened so that one problem stays on one line.
    var quotedForMessage: String {
        var body = ""
        for scalar in unicodeScalars {
            switch scalar {
            case "\n": body += "\\n"
            case "\r": body += "\\r"
            case "\t": body += "\\t"
            case "\"": body += "\\\""
            case "\\": body += "\\\\"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    body += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    body.unicodeScalars.append(scalar)
                }
            }
        }
        if body.count > 60 { body = String(body.prefix(57)) + "…" }
        return "\"\(body)\""
    }
}

import CSimdJSON

/// Why a body could not be parsed, in plain language (for logs and 400 responses).
///
/// `message` is meant for people, e.g. `not valid JSON: unclosed string`, `nesting deeper than 64 levels`,
/// `empty body`, `not UTF-8`. `code` is simdjson's error code, for programs that branch on the cause.
public struct JSONError: Error, Equatable, Sendable, CustomStringConvertible {
    /// simdjson's `error_code` value (stable across simdjson 3.x).
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The document is larger than simdjson can handle (4 GiB).
        public static let tooLarge = Code(rawValue: Int32(CSJ_ERR_CAPACITY))
        /// Bad structure: truncated input, trailing content, a missing or extra comma, colon, bracket or key.
        public static let badStructure = Code(rawValue: Int32(CSJ_ERR_TAPE))
        /// Objects and arrays nested deeper than the parser's `maxDepth`.
        public static let tooDeep = Code(rawValue: Int32(CSJ_ERR_DEPTH))
        /// A bad escape sequence in a string (including lone surrogates such as `\ud800`).
        public static let badString = Code(rawValue: Int32(CSJ_ERR_STRING))
        public static let badTrue = Code(rawValue: Int32(CSJ_ERR_T_ATOM))
        public static let badFalse = Code(rawValue: Int32(CSJ_ERR_F_ATOM))
        public static let badNull = Code(rawValue: Int32(CSJ_ERR_N_ATOM))
        public static let notUTF8 = Code(rawValue: Int32(CSJ_ERR_UTF8))
        /// No JSON value at all: zero bytes, or whitespace only.
        public static let empty = Code(rawValue: Int32(CSJ_ERR_EMPTY))
        /// A raw control character (below U+0020) inside a string.
        public static let unescapedControl = Code(rawValue: Int32(CSJ_ERR_UNESCAPED_CHARS))
        public static let unclosedString = Code(rawValue: Int32(CSJ_ERR_UNCLOSED_STRING))
    }

    public let code: Code
    public let message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    /// Builds the error for a failed parse; `input` is only read to tell truncation from trailing content.
    init(simdjsonCode raw: Int32, maxDepth: Int, input: UnsafeRawBufferPointer) {
        let code = Code(rawValue: raw)
        let message: String
        switch raw {
        case Int32(CSJ_ERR_EMPTY): message = "empty body"
        case Int32(CSJ_ERR_UTF8): message = "not UTF-8"
        case Int32(CSJ_ERR_DEPTH): message = "nesting deeper than \(maxDepth) levels"
        case Int32(CSJ_ERR_CAPACITY): message = "body too large to parse (over 4 GiB)"
        case Int32(CSJ_ERR_MEMALLOC): message = "out of memory while parsing JSON"
        case Int32(CSJ_ERR_TAPE): message = "not valid JSON: " + StructureDiagnosis.describe(input)
        case Int32(CSJ_ERR_INCOMPLETE_ARRAY_OR_OBJECT): message = "not valid JSON: unexpected end of input"
        case Int32(CSJ_ERR_TRAILING_CONTENT): message = "not valid JSON: unexpected content after the value"
        case Int32(CSJ_ERR_STRING): message = "not valid JSON: bad escape sequence in a string"
        case Int32(CSJ_ERR_T_ATOM): message = "not valid JSON: unknown word (expected true)"
        case Int32(CSJ_ERR_F_ATOM): message = "not valid JSON: unknown word (expected false)"
        case Int32(CSJ_ERR_N_ATOM): message = "not valid JSON: unknown word (expected null)"
        case Int32(CSJ_ERR_NUMBER), Int32(CSJ_ERR_NUMBER_OUT_OF_RANGE):
            message = "not valid JSON: malformed number, or a number out of range"
        case Int32(CSJ_ERR_UNESCAPED_CHARS): message = "not valid JSON: unescaped control character in a string"
        case Int32(CSJ_ERR_UNCLOSED_STRING): message = "not valid JSON: unclosed string"
        default: message = "not valid JSON (" + String(cString: csj_error_message(raw)) + ")"
        }
        self.init(code: code, message: message)
    }
}

/// simdjson reports every structural problem as one code (TAPE_ERROR). On that (cold) path a
/// simple scan of the input tells the common cases apart, for a clearer message.
enum StructureDiagnosis {
    static func describe(_ input: UnsafeRawBufferPointer) -> String {
        let b = input
        let n = b.count
        var i = 0
        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 }
        while i < n && isSpace(b[i]) { i += 1 }
        if i == n { return "unexpected end of input" }
        // Skip the first value, tracking brackets outside strings.
        var depth = 0
        var inString = false
        var escaped = false
        var endOfValue = -1
        let first = b[i]
        let startsValue =
            first == UInt8(ascii: "-") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9"))
            || first == UInt8(ascii: "t") || first == UInt8(ascii: "f") || first == UInt8(ascii: "n")
            || first == UInt8(ascii: "{") || first == UInt8(ascii: "[") || first == UInt8(ascii: "\"")
        if !startsValue {
            return first >= 0x21 && first < 0x7F
                ? "a value cannot start with '\(Character(UnicodeScalar(first)))'"
                : "a value cannot start with byte 0x" + String(first, radix: 16)
        }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") || first == UInt8(ascii: "\"") {
            scan: while i < n {
                let c = b[i]
                if inString {
                    if escaped {
                        escaped = false
                    } else if c == UInt8(ascii: "\\") {
                        escaped = true
                    } else if c == UInt8(ascii: "\"") {
                        inString = false
                        if depth == 0 { endOfValue = i + 1; break scan }
                    }
                } else {
                    switch c {
                    case UInt8(ascii: "\""): inString = true
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 { endOfValue = i + 1; break scan }
                        if depth < 0 { return "unmatched closing bracket" }
                    default: break
                    }
                }
                i += 1
            }
            if endOfValue < 0 { return inString ? "unclosed string" : "unexpected end of input (missing closing bracket)" }
        } else {
            // A scalar: runs to the next whitespace or structural character.
            while i < n && !isSpace(b[i]) && b[i] != UInt8(ascii: ",") && b[i] != UInt8(ascii: "{")
                && b[i] != UInt8(ascii: "[") && b[i] != UInt8(ascii: "}") && b[i] != UInt8(ascii: "]")
                && b[i] != UInt8(ascii: ":") && b[i] != UInt8(ascii: "\"")
            {
                i += 1
            }
            endOfValue = i
        }
        var j = endOfValue
        while j < n && isSpace(b[j]) { j += 1 }
        if j < n { return "unexpected content after the value" }
        return "misplaced or missing comma, colon, bracket or key"
    }
}

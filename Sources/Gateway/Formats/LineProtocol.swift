import HealthgateCore
import CanonicalJSON
/// InfluxDB line protocol, read with the rules of InfluxDB's own parser:
/// `measurement[,tag=value…] field=value[,…] [timestamp]`.
/// - Escapes: measurement `\,` `\ `; tag keys, tag values and field keys `\,` `\=` `\ `; string
///   field values `\"` `\\` (and `\n` `\r` `\t`). A backslash before anything else is literal.
/// - Field values: floats (`1`, `-1.5`, `1e5`, `.5`), integers `12i`, unsigned `12u`, booleans
///   (`t`, `T`, `true`, `True`, `TRUE`, `f`, …), and double-quoted strings (which may hold raw line
///   breaks). Bare words are errors.
/// - `#` at the start of a line is a comment; blank lines are skipped; CRLF is accepted.
enum LineProtocol {
    enum FieldValue: Equatable, Sendable {
        case float(Double)
        case int(Int64)
        case uint(UInt64)
        case bool(Bool)
        case string(String)

        var number: Double? {
            switch self {
            case .float(let d): return d
            case .int(let i): return Double(i)
            case .uint(let u): return Double(u)
            default: return nil
            }
        }
    }

    struct Point: Equatable, Sendable {
        var measurement: String
        var tags: [(key: String, value: String)]
        var fields: [(key: String, value: FieldValue)]
        /// As written, in the request's precision; nil when the line has none.
        var timestamp: Int64?
        /// The line as it came (for quarantine).
        var text: String
        var line: Int

        static func == (a: Point, b: Point) -> Bool {
            a.measurement == b.measurement && a.tags.elementsEqual(b.tags, by: { $0 == $1 })
                && a.fields.elementsEqual(b.fields, by: { $0 == $1 }) && a.timestamp == b.timestamp
        }

        func tag(_ key: String) -> String? { tags.first { $0.key == key }?.value }
        func field(_ key: String) -> FieldValue? { fields.first { $0.key == key }?.value }
    }

    struct Failure: Error, Equatable, CustomStringConvertible {
        var line: Int
        var message: String
        var text: String
        var description: String { "line \(line): \(message)" }
    }

    /// Each line of a body as a point or a failure, in order, without holding them all: a big
    /// body costs one point at a time.
    static func forEachLine(_ body: [UInt8], _ each: (Result<Point, Failure>) -> Void) {
        var i = 0
        var lineNumber = 0
        while i < body.count {
            lineNumber += 1
            // A line ends at a LF that is not inside a quoted string field.
            let start = i
            var inString = false
            var seenSpaces = 0
            var j = i
            while j < body.count {
                let c = body[j]
                if c == 0x5C && j + 1 < body.count { j += 2; continue }
                if c == 0x22 && seenSpaces >= 1 { inString.toggle() }
                if c == 0x20 && !inString { seenSpaces += 1 }
                if c == 0x0A && !inString { break }
                j += 1
            }
            var end = j
            if end > start && body[end - 1] == 0x0D { end -= 1 }
            let line = Array(body[start..<end])
            let extraLines = line.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
            i = j + 1
            let trimmed = line.drop(while: { $0 == 0x20 || $0 == 0x09 })
            if trimmed.isEmpty || trimmed.first == 0x23 {
                lineNumber += extraLines
                continue
            }
            do {
                each(.success(try parseLine(Array(trimmed), number: lineNumber)))
            } catch {
                each(.failure(error))
            }
            lineNumber += extraLines
        }
    }

    static func parseLine(_ b: [UInt8], number: Int) throws(Failure) -> Point {
        // InfluxDB refuses a line that is not UTF-8 too; stored, it would hold U+FFFD instead of
        // what was sent. (One pass: the check gives the text.)
        guard let text = String(validating: b, as: UTF8.self) else {
            throw Failure(line: number, message: "the line is not valid UTF-8", text: String(decoding: b, as: UTF8.self))
        }
        func fail(_ m: String) -> Failure { Failure(line: number, message: m, text: text) }
        var i = 0
        let n = b.count

        /// Reads up to an unescaped stop byte, unescaping `escapable` bytes.
        func token(stops: Set<UInt8>, escapable: Set<UInt8>) -> (String, UInt8?) {
            var out: [UInt8] = []
            while i < n {
                let c = b[i]
                if c == 0x5C && i + 1 < n && escapable.contains(b[i + 1]) {
                    out.append(b[i + 1])
                    i += 2
                    continue
                }
                if stops.contains(c) { return (String(decoding: out, as: UTF8.self), c) }
                out.append(c)
                i += 1
            }
            return (String(decoding: out, as: UTF8.self), nil)
        }
        func checkPrintable(_ s: String, _ what: String) throws(Failure) {
            if s.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { throw fail("\(what) holds a control character") }
        }

        let (measurement, afterMeasurement) = token(stops: [0x2C, 0x20], escapable: [0x2C, 0x20])
        if measurement.isEmpty { throw fail("the measurement is empty") }
        try checkPrintable(measurement, "the measurement")
        var tags: [(key: String, value: String)] = []
        var stop = afterMeasurement
        while stop == 0x2C {
            i += 1
            if i < n && (b[i] == 0x20 || b[i] == 0x09) { throw fail("expected a tag key after a comma, got white space") }
            let (key, s1) = token(stops: [0x3D, 0x2C, 0x20], escapable: [0x2C, 0x3D, 0x20])
            guard s1 == 0x3D, !key.isEmpty else { throw fail("a tag needs key=value") }
            i += 1
            let (value, s2) = token(stops: [0x2C, 0x20], escapable: [0x2C, 0x3D, 0x20])
            if value.isEmpty { throw fail("tag \(QuarantinedRecord.name(key)) has an empty value") }
            try checkPrintable(key, "a tag key")
            try checkPrintable(value, "a tag value")
            tags.append((key, value))
            stop = s2
        }
        guard stop == 0x20 else { throw fail("no fields (a line needs at least one field=value)") }
        while i < n && b[i] == 0x20 { i += 1 }
        var fields: [(key: String, value: FieldValue)] = []
        while true {
            let (key, s) = token(stops: [0x3D, 0x2C, 0x20], escapable: [0x2C, 0x3D, 0x20])
            guard s == 0x3D, !key.isEmpty else {
                throw fail(fields.isEmpty ? "no fields (a line needs at least one field=value)" : "a field needs key=value")
            }
            try checkPrintable(key, "a field key")
            i += 1
            guard i < n else { throw fail("field \(QuarantinedRecord.name(key)) has no value") }
            let value: FieldValue
            if b[i] == 0x22 {
                i += 1
                var out: [UInt8] = []
                var closed = false
                while i < n {
                    let c = b[i]
                    if c == 0x5C && i + 1 < n {
                        switch b[i + 1] {
                        case 0x22: out.append(0x22); i += 2; continue
                        case 0x5C: out.append(0x5C); i += 2; continue
                        case 0x6E: out.append(0x0A); i += 2; continue
                        case 0x72: out.append(0x0D); i += 2; continue
                        case 0x74: out.append(0x09); i += 2; continue
                        default: break
                        }
                    }
                    if c == 0x22 { closed = true; i += 1; break }
                    out.append(c)
                    i += 1
                }
                if !closed { throw fail("field \(QuarantinedRecord.name(key)): a string value is never closed") }
                value = .string(String(decoding: out, as: UTF8.self))
            } else {
                let start = i
                while i < n && b[i] != 0x2C && b[i] != 0x20 { i += 1 }
                let raw = String(decoding: b[start..<i], as: UTF8.self)
                guard let v = scalar(raw) else {
                    throw fail(
                        "field \(QuarantinedRecord.name(key)): \(QuarantinedRecord.describe(raw)) is not a number, a boolean or a quoted string"
                    )
                }
                value = v
            }
            fields.append((key, value))
            if i < n && b[i] == 0x2C { i += 1; continue }
            break
        }
        while i < n && b[i] == 0x20 { i += 1 }
        var timestamp: Int64?
        if i < n {
            let start = i
            while i < n && b[i] != 0x20 { i += 1 }
            let raw = String(decoding: b[start..<i], as: UTF8.self)
            guard let t = Int64(raw) else { throw fail("the timestamp is not an integer (\(QuarantinedRecord.describe(raw)))") }
            timestamp = t
            while i < n && b[i] == 0x20 { i += 1 }
            if i < n { throw fail("unexpected text after the timestamp") }
        }
        return Point(measurement: measurement, tags: tags, fields: fields, timestamp: timestamp, text: text, line: number)
    }

    static func scalar(_ s: String) -> FieldValue? {
        switch s {
        case "t", "T", "true", "True", "TRUE": return .bool(true)
        case "f", "F", "false", "False", "FALSE": return .bool(false)
        default: break
        }
        if s.hasSuffix("i"), let v = Int64(s.dropLast()) { return .int(v) }
        if s.hasSuffix("u"), !s.hasPrefix("-"), let v = UInt64(s.dropLast()) { return .uint(v) }
        // Floats as InfluxDB reads them; no NaN or infinity, no hex.
        let allowed = s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x2B || $0 == 0x65 || $0 == 0x45 }
        guard allowed, let d = Double(s), d.isFinite else { return nil }
        return .float(d)
    }
}

/// RFC 4180 CSV: fields separated by commas, records by CRLF (a bare LF is accepted too),
/// fields with a comma, a quote or a line break in double quotes, a quote inside one doubled.
struct CSVReader {
    struct Row {
        /// 1-based line where the row starts.
        var line: Int
        var fields: [String]
        /// A field held bytes that are not UTF-8 (they read as U+FFFD in `fields`).
        var invalidUTF8 = false
    }

    struct Failure: Error, Equatable, CustomStringConvertible {
        var line: Int
        var message: String
        var description: String { "line \(line): \(message)" }
    }

    /// Every row of `bytes`; throws on a quote that is never closed or text after a closing quote.
    static func rows(_ bytes: [UInt8]) throws(Failure) -> [Row] {
        var rows: [Row] = []
        var fields: [String] = []
        var field: [UInt8] = []
        var line = 1
        var rowLine = 1
        var i = 0
        let n = bytes.count
        var quoted = false
        var afterQuote = false
        var rowHasContent = false
        var rowInvalid = false

        func endField() {
            if let s = String(validating: field, as: UTF8.self) {
                fields.append(s)
            } else {
                fields.append(String(decoding: field, as: UTF8.self))
                rowInvalid = true
            }
            field.removeAll(keepingCapacity: true)
            afterQuote = false
        }
        func endRow() {
            endField()
            // A line with nothing on it (the end of the body) is not a row.
            if rowHasContent || fields.count > 1 { rows.append(Row(line: rowLine, fields: fields, invalidUTF8: rowInvalid)) }
            fields.removeAll(keepingCapacity: true)
            rowHasContent = false
            rowInvalid = false
        }

        while i < n {
            let c = bytes[i]
            if quoted {
                if c == 0x22 {
                    if i + 1 < n && bytes[i + 1] == 0x22 {
                        field.append(0x22)
                        i += 2
                        continue
                    }
                    quoted = false
                    afterQuote = true
                } else {
                    if c == 0x0A { line += 1 }
                    field.append(c)
                }
                i += 1
                continue
            }
            switch c {
            case 0x2C:
                endField()
                rowHasContent = true
            case 0x0D where i + 1 < n && bytes[i + 1] == 0x0A:
                endRow()
                i += 1
                line += 1
                rowLine = line
            case 0x0A:
                endRow()
                line += 1
                rowLine = line
            case 0x22 where field.isEmpty && !afterQuote:
                quoted = true
                rowHasContent = true
            default:
                if afterQuote {
                    throw Failure(line: line, message: "text after a closing quote (a quote inside a quoted field is written \"\")")
                }
                if c == 0x22 {
                    throw Failure(line: line, message: "a quote inside an unquoted field (quote the field and double the quote)")
                }
                field.append(c)
                rowHasContent = true
            }
            i += 1
        }
        if quoted { throw Failure(line: rowLine, message: "a quoted field is never closed") }
        if !field.isEmpty || !fields.isEmpty || rowHasContent { endRow() }
        return rows
    }
}

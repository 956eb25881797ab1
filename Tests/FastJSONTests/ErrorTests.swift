import FastJSON
import Testing

@Suite("JSONParser: errors")
struct ErrorTests {
    let parser = JSONParser()

    func error(_ text: String) -> JSONError? {
        error(Array(text.utf8))
    }

    func error(_ bytes: [UInt8]) -> JSONError? {
        do throws(JSONError) {
            _ = try parser.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func emptyInput() {
        #expect(error("")?.message == "empty body")
        #expect(error("")?.code == .empty)
        #expect(error("   \n\t ")?.message == "empty body")
        let e = UnsafeRawBufferPointer(start: nil, count: 0)
        #expect(throws: JSONError(code: .empty, message: "empty body")) { try parser.parse(e) }
    }

    @Test(arguments: [
        #"{"a":1"#, #"{"a":"#, #"[1,2"#, #"["#, #"{"a":[1,{"b":2}"#, #"{"#
    ])
    func truncatedInput(text: String) {
        let e = error(text)
        #expect(e?.code == .badStructure)
        #expect(e?.message.hasPrefix("not valid JSON: unexpected end of input") == true, "\(e?.message ?? "no error")")
    }

    @Test func truncatedInsideAString() {
        #expect(error(#"{"a":"bc"#)?.message == "not valid JSON: unclosed string")
        #expect(error(#""abc"#)?.code == .unclosedString)
    }

    @Test(arguments: [#"{} x"#, #"[1] [2]"#, #"{"a":1}}"#, #"1 2"#, #""s" "t""#, #"nullx"#])
    func trailingGarbage(text: String) {
        let e = error(text)
        #expect(e != nil)
        #expect(e?.message.hasPrefix("not valid JSON") == true)
        if text != "nullx" { // simdjson reports `nullx` as a bad literal
            #expect(e?.message == "not valid JSON: unexpected content after the value", "\(text)")
        }
    }

    @Test func structuralMistakes() {
        for text in [#"[1,]"#, #"{"a" 1}"#, #"{"a":1,}"#, #"[1 2]"#, #"{1:2}"#, #"[1}"#] {
            let e = error(text)
            #expect(e?.code == .badStructure, "\(text)")
            #expect(e?.message == "not valid JSON: misplaced or missing comma, colon, bracket or key", "\(text)")
        }
        #expect(error("]")?.message.hasPrefix("not valid JSON") == true)
    }

    @Test func invalidUTF8() {
        let cases: [[UInt8]] = [
            [0x22, 0xFF, 0x22], // invalid byte
            [0x22, 0xC3, 0x22], // truncated 2-byte sequence
            [0x22, 0xC0, 0xAF, 0x22], // overlong
            [0x22, 0xED, 0xA0, 0x80, 0x22], // UTF-16 surrogate
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], // above U+10FFFF
            Array(#"{"key":"ok","#.utf8) + [0x22, 0x80, 0x22, 0x3A, 0x31, 0x7D] // in a key
        ]
        for bytes in cases {
            let e = error(bytes)
            #expect(e?.message == "not UTF-8", "\(bytes)")
            #expect(e?.code == .notUTF8)
        }
    }

    @Test func nestingDeeperThanTheLimit() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(try parser.parse(ok).root.kind == .array)
        let objects = String(repeating: #"{"a":"#, count: 64) + "1" + String(repeating: "}", count: 64)
        #expect(try parser.parse(objects).root.kind == .object)

        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(error(tooDeep)?.message == "nesting deeper than 64 levels")
        #expect(error(tooDeep)?.code == .tooDeep)
        let tooDeepWithValue = String(repeating: "[", count: 65) + "1" + String(repeating: "]", count: 65)
        #expect(error(tooDeepWithValue)?.code == .tooDeep)
        let objectsTooDeep = String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65)
        #expect(error(objectsTooDeep)?.message == "nesting deeper than 64 levels")

        let shallow = JSONParser(maxDepth: 2)
        #expect(try shallow.parse("[[1]]").root[0]?[0]?.int64 == 1)
        #expect(throws: JSONError(code: .tooDeep, message: "nesting deeper than 2 levels")) {
            try shallow.parse("[[[]]]")
        }
        #expect(throws: JSONError.self) { try shallow.parse(#"{"a":{"b":{}}}"#) }
    }

    @Test func nestingBombGivesAnErrorNotACrash() throws {
        // Unclosed: simdjson sees the missing brackets before the depth.
        let open = String(repeating: "[", count: 100_000)
        #expect(error(open)?.message == "not valid JSON: unexpected end of input (missing closing bracket)")
        let balanced = open + String(repeating: "]", count: 100_000)
        #expect(error(balanced)?.message == "nesting deeper than 64 levels")
        let objects = String(repeating: #"{"a":"#, count: 100_000)
        #expect(error(objects)?.code == .badStructure)
        let objectsClosed = objects + "1" + String(repeating: "}", count: 100_000)
        #expect(error(objectsClosed)?.code == .tooDeep)
        // Even a parser configured for the deepest supported nesting handles it.
        let deep = JSONParser(maxDepth: JSONParser.maxSupportedDepth)
        #expect(throws: JSONError(code: .tooDeep, message: "nesting deeper than 1024 levels")) { try deep.parse(balanced) }
        let deepest = String(repeating: "[", count: 1024) + String(repeating: "]", count: 1024)
        #expect(try deep.parse(deepest).root.kind == .array)
        // The parser is still usable afterwards.
        #expect(try parser.parse("[1]").root[0]?.int64 == 1)
    }

    @Test func badScalars() {
        #expect(error("tru")?.code == .badTrue)
        #expect(error("[fals]")?.code == .badFalse)
        #expect(error("nul")?.code == .badNull)
        #expect(error("nul")?.message == "not valid JSON: unknown word (expected null)")
        for text in ["01", "-", "1.", "1e", "1e400", "18446744073709551616", "-9223372036854775809", "0x10"] {
            #expect(error(text)?.message == "not valid JSON: malformed number, or a number out of range", "\(text)")
        }
        #expect(error(#"["\x"]"#)?.message == "not valid JSON: bad escape sequence in a string")
        #expect(error(#"["\ud800"]"#)?.code == .badString) // lone surrogate
        #expect(error("[\"a\u{01}b\"]")?.message == "not valid JSON: unescaped control character in a string")
        #expect(error("[\"a\nb\"]")?.code == .unescapedControl)
        #expect(error(".5")?.message == "not valid JSON: a value cannot start with '.'")
        #expect(error("[+1]")?.message.hasPrefix("not valid JSON") == true)
        #expect(error("hello")?.message.hasPrefix("not valid JSON") == true)
    }

    @Test func errorValue() {
        let e = error("")!
        #expect(e.description == "empty body")
        #expect("\(e)" == "empty body")
        #expect(e == JSONError(code: .empty, message: "empty body"))
        #expect(e != JSONError(code: .notUTF8, message: "not UTF-8"))
        let any: any Error = e
        #expect(any is JSONError)
    }

    @Test func parserRecoversAfterErrors() throws {
        for i in 0..<200 {
            if i % 2 == 0 {
                #expect(error(#"{"broken":"#) != nil)
            } else {
                #expect(try parser.parse(#"{"n":\#(i)}"#).root["n"]?.int64 == Int64(i))
            }
        }
    }
}

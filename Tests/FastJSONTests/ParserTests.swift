import FastJSON
import Testing

@Suite("JSONParser: reading values")
struct ParserReadingTests {
    let parser = JSONParser()

    @Test func scalarRoots() throws {
        #expect(try parser.parse("42").root.int64 == 42)
        #expect(try parser.parse("42").root.kind == .int)
        #expect(try parser.parse("-7").root.int64 == -7)
        #expect(try parser.parse("2.5").root.double == 2.5)
        #expect(try parser.parse("2.5").root.kind == .double)
        #expect(try parser.parse("\"hi\"").root.string == "hi")
        #expect(try parser.parse("true").root.bool == true)
        #expect(try parser.parse("false").root.bool == false)
        #expect(try parser.parse("null").root.isNull)
        #expect(try parser.parse("null").root.kind == .null)
        #expect(try parser.parse("  \n\t 1 \r\n ").root.int64 == 1)
    }

    @Test func nestedObjectsAndArrays() throws {
        let doc = try parser.parse(#"{"a":{"b":{"c":[1,[2,[3,{"d":"deep"}]]]}},"e":[],"f":{}}"#)
        let root = doc.root
        #expect(root.kind == .object)
        #expect(root.count == 3)
        let c = root["a"]?["b"]?["c"]
        #expect(c?.kind == .array)
        #expect(c?.count == 2)
        #expect(c?[0]?.int64 == 1)
        #expect(c?[1]?[1]?[1]?["d"]?.string == "deep")
        #expect(root["e"]?.kind == .array)
        #expect(root["e"]?.count == 0)
        #expect(root["f"]?.kind == .object)
        #expect(root["f"]?.count == 0)
        #expect(root["f"]?.members.map { $0.key.string } == [])
        #expect(doc.nodeCount == 19)
    }

    @Test func unicodeAndEscapedStrings() throws {
        let doc = try parser.parse(#"["héllo wörld", "日本語", "😀 emoji", "\n\t\r\b\f\"\\\/", "\u00e9\u65e5\ud83d\ude00", "a\u0000b", ""]"#)
        let s = doc.root.elements.map { $0.string }
        #expect(s[0] == "héllo wörld")
        #expect(s[1] == "日本語")
        #expect(s[2] == "😀 emoji")
        #expect(s[3] == "\n\t\r\u{08}\u{0C}\"\\/")
        #expect(s[4] == "é日😀")
        #expect(s[5] == "a\u{0}b")
        #expect(s[6] == "")
        // Byte access without a String.
        let count = doc.root[5]?.withStringBytes { $0.count }
        #expect(count == 3)
        let bytes = doc.root[4]?.withStringBytes { Array($0) }
        #expect(bytes == Array("é日😀".utf8))
        #expect(doc.root[0]?.withStringBytes { $0.count } != nil)
        #expect(doc.root.withStringBytes { $0.count } == nil) // not a string
    }

    @Test func integersAtTheLimits() throws {
        let doc = try parser.parse(
            "[9223372036854775807, -9223372036854775808, 18446744073709551615, 9223372036854775808, 0, -0, 9007199254740993]")
        let e = Array(doc.root.elements)
        #expect(e[0].kind == .int)
        #expect(e[0].int64 == Int64.max)
        #expect(e[1].int64 == Int64.min)
        #expect(e[2].kind == .uint)
        #expect(e[2].uint64 == UInt64.max)
        #expect(e[2].int64 == nil) // does not fit
        #expect(e[2].double == 18446744073709551615.0)
        #expect(e[3].kind == .uint)
        #expect(e[3].uint64 == 9_223_372_036_854_775_808)
        #expect(e[4].int64 == 0)
        #expect(e[5].int64 == 0)
        #expect(e[6].int64 == 9_007_199_254_740_993) // exact, not rounded through Double
        #expect(e[1].uint64 == nil)
        #expect(e[0].int == Int.max)
    }

    @Test func negativeNumbersAndExponents() throws {
        let doc = try parser.parse("[-1, -0.5, 1e5, 1E-3, -2.5e+10, 6.02214076e23, 412.0, 412.5, -1e300, 5e-324, 1.7976931348623157e308]")
        let e = Array(doc.root.elements)
        #expect(e[0].int64 == -1)
        #expect(e[0].double == -1)
        #expect(e[1].double == -0.5)
        #expect(e[1].int64 == nil)
        #expect(e[2].kind == .double)
        #expect(e[2].double == 100_000)
        #expect(e[2].int64 == 100_000) // exact integral double
        #expect(e[3].double == 0.001)
        #expect(e[4].double == -2.5e10)
        #expect(e[4].int64 == -25_000_000_000)
        #expect(e[5].double == 6.02214076e23)
        #expect(e[5].int64 == nil) // beyond Int64
        #expect(e[6].int64 == 412)
        #expect(e[7].int64 == nil)
        #expect(e[8].double == -1e300)
        #expect(e[9].double == .leastNonzeroMagnitude)
        #expect(e[10].double == .greatestFiniteMagnitude)
    }

    @Test func wrongKindAccessorsReturnNil() throws {
        let doc = try parser.parse(#"{"s":"x","n":1,"b":true,"z":null,"a":[1],"o":{}}"#)
        let r = doc.root
        #expect(r["s"]?.int64 == nil)
        #expect(r["s"]?.double == nil)
        #expect(r["n"]?.string == nil)
        #expect(r["n"]?.bool == nil)
        #expect(r["b"]?.int64 == nil)
        #expect(r["z"]?.isNull == true)
        #expect(r["s"]?.isNull == false)
        #expect(r["a"]?["x"] == nil) // key lookup on an array
        #expect(r["o"]?[0] == nil) // index on an object
        #expect(r["a"]?[1] == nil) // out of range
        #expect(r["a"]?[-1] == nil)
        #expect(r["s"]?.count == 0)
        #expect(Array(r["s"]!.elements).isEmpty)
        #expect(Array(r["a"]!.members).isEmpty)
    }

    @Test func keyLookup() throws {
        let doc = try parser.parse(
            #"{"uuid":"u1","type":"steps","":"empty key","dup":1,"dup":2,"k\"q":"quoted","é":"accent","longer_key_than_eight":"x"}"#)
        let r = doc.root
        #expect(r["uuid"]?.string == "u1")
        #expect(r["type"]?.string == "steps")
        #expect(r[""]?.string == "empty key")
        #expect(r["dup"]?.int64 == 1) // the first of duplicate keys
        #expect(r["k\"q"]?.string == "quoted") // keys are compared unescaped
        #expect(r["é"]?.string == "accent")
        #expect(r["longer_key_than_eight"]?.string == "x")
        #expect(r["longer_key_than_eighT"] == nil)
        #expect(r["missing"] == nil)
        #expect(r["uuid "] == nil)
        #expect(r["uui"] == nil)
        let key = "ty" + "pe" // a non-literal String
        #expect(r[key]?.string == "steps")
        let name = Array("uuid".utf8)
        #expect(name.withUnsafeBytes { r.member(named: $0)?.string } == "u1")
    }

    @Test func membersInOrder() throws {
        let doc = try parser.parse(#"{"z":1,"a":2,"m":{"x":true},"b":[3],"a2":null}"#)
        let members = Array(doc.root.members)
        #expect(members.map { $0.key.string } == ["z", "a", "m", "b", "a2"])
        #expect(members[0].value.int64 == 1)
        #expect(members[2].value["x"]?.bool == true)
        #expect(members[3].value[0]?.int64 == 3)
        #expect(members[4].value.isNull)
        #expect(doc.root.members.count == 5)

        // Keys compare to String and StaticString without allocating, and work in a switch.
        let k = members[1].key
        #expect(k == "a")
        #expect("a" == k)
        #expect(k != "b")
        let s: StaticString = "a"
        #expect(k == s)
        #expect(k != ("z" as StaticString))
        #expect(k.utf8Count == 1)
        #expect(k.withBytes { Array($0) } == [UInt8(ascii: "a")])
        var seen: [String] = []
        for (key, _) in doc.root.members {
            switch key {
            case "z": seen.append("Z")
            case "m": seen.append("M")
            default: seen.append("-")
            }
        }
        #expect(seen == ["Z", "-", "M", "-", "-"])
    }

    @Test func elementsInOrder() throws {
        let doc = try parser.parse(#"[1, "two", [3, 4], {"five": 5}, null, 6.5]"#)
        let e = Array(doc.root.elements)
        #expect(e.count == 6)
        #expect(e.map { $0.kind } == [.int, .string, .array, .object, .null, .double])
        #expect(e[2].elements.compactMap { $0.int64 } == [3, 4])
        #expect(doc.root.elements.count == 6)
        #expect(doc.root[5]?.double == 6.5)
    }

    @Test func descriptionIsCompactJSON() throws {
        let doc = try parser.parse(#" { "a" : [ 1 , 2.5 , "x\n" ] , "b" : { } } "#)
        #expect(doc.root.description == #"{"a":[1,2.5,"x\n"],"b":{}}"#)
        #expect("\(doc.root["a"]!)" == #"[1,2.5,"x\n"]"#)
    }

    @Test func bytesAndRawBufferInputs() throws {
        let bytes = Array(#"{"k":[1,2,3]}"#.utf8)
        #expect(try parser.parse(bytes).root["k"]?.count == 3)
        let n = try bytes.withUnsafeBytes { raw throws(JSONError) in try parser.parse(raw).root["k"]?[2]?.int64 }
        #expect(n == 3)
        // A slice of a larger buffer: the parser must not read past the end it was given.
        let padded = Array(#"[1,2]GARBAGE"#.utf8)
        let m = try padded.withUnsafeBytes { raw throws(JSONError) in
            try parser.parse(UnsafeRawBufferPointer(rebasing: raw[0..<5])).root.count
        }
        #expect(m == 2)
    }

    /// A request body is parsed where it lies when the server left `padding` bytes of room after
    /// it (`parse(paddedIfRoom:)`): whatever those bytes hold — here what would close an open
    /// string, end a number or complete a document — the outcome is the padded copy's.
    @Test(arguments: [
        #"{"a":"abc"#, #"{"a":"abc"}"#, #"[1,2"#, #"12"#, #"-1.5e"#, #"{"k":tru"#, #"nul"#,
        #"{"s":"\u00e9\n","n":[1,2.5,-3],"o":{}}"#, #""x\"#, " ", #"{"a":1}x"#
    ])
    func inPlaceWithAnyPadding(_ text: String) throws {
        let reference = JSONParser()
        let copied = Result { () throws(JSONError) in try reference.parse(Array(text.utf8)).root.description }
        for fill in [#"""#, "}", "]", "0", "e", "\\", " ", "\u{0}", "\u{FF}"] {
            var body = Array(text.utf8)
            body.reserveCapacity(body.count + JSONParser.padding)
            let n = body.count
            body += Array(repeating: Array(fill.utf8)[0], count: JSONParser.padding)
            body.removeLast(JSONParser.padding) // the capacity stays, and holds the fill
            #expect(body.count == n && body.capacity - n >= JSONParser.padding)
            let parser = JSONParser()
            let inPlace = Result { () throws(JSONError) in try parser.parse(paddedIfRoom: body).root.description }
            switch (copied, inPlace) {
            case (.success(let a), .success(let b)): #expect(a == b, "fill \(fill.debugDescription)")
            case (.failure(let a), .failure(let b)): #expect(a == b, "fill \(fill.debugDescription)")
            default: Issue.record("\(text.debugDescription) with fill \(fill.debugDescription): \(copied) vs \(inPlace)")
            }
        }
        // Without the room, a padded copy is parsed, to the same outcome.
        let tight = Array(text.utf8)
        if tight.capacity - tight.count < JSONParser.padding {
            let r = Result { () throws(JSONError) in try reference.parse(paddedIfRoom: tight).root.description }
            #expect("\(r)" == "\(copied)")
        }
    }

    @Test func largeDocument() throws {
        var text = "["
        for i in 0..<20_000 {
            if i > 0 { text += "," }
            text += #"{"i":\#(i),"s":"value \#(i)","d":\#(i).5}"#
        }
        text += "]"
        let doc = try parser.parse(text)
        #expect(doc.root.count == 20_000)
        var sum = 0
        var ok = true
        for (i, e) in doc.root.elements.enumerated() {
            sum += Int(e["i"]!.int64!)
            ok = ok && e["s"]?.string == "value \(i)" && e["d"]?.double == Double(i) + 0.5
        }
        #expect(ok)
        #expect(sum == 20_000 * 19_999 / 2)
    }

    @Test func implementationName() {
        #expect(!JSONParser.implementationName.isEmpty)
    }
}

@Suite("JSONParser: duplicate keys")
struct DuplicateKeyTests {
    /// Objects of up to 16 members compare a key with the ones before only when their length,
    /// first and last bytes collide (a bit of 64): keys alike in those, and duplicates anywhere
    /// among many distinct keys, must still be found, and distinct keys never reported.
    @Test(
        arguments: [
            (#"{"a":1,"b":2}"#, nil),
            (#"{"a":1,"a":2}"#, "a"),
            (#"{"":1,"":2}"#, ""),
            (#"{"":1,"x":2}"#, nil),
            (#"{"abc":1,"axc":2,"ayc":3,"abc":4}"#, "abc"), // same length, first and last bytes
            (#"{"ab":1,"ba":2,"abab":3}"#, nil),
            (#"{"s":{"k":1,"k":2}}"#, "k"),
            (#"[{"k":1},{"k":2},{"q":1,"r":2,"q":3}]"#, "q"),
            (
                #"{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,"kb":11,"kc":12,"kd":13,"ke":14,"k0":15}"#,
                "k0"
            ),
            (
                #"{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,"kb":11,"kc":12,"kd":13,"ke":14,"kf":15}"#,
                nil
            ),
            (#"{"é":1,"e\u0301":2,"é":3}"#, "é")
        ] as [(String, String?)])
    func duplicatesAreFoundAndOnlyThey(_ json: String, _ duplicate: String?) throws {
        let doc = try JSONParser().parse(json)
        #expect(doc.duplicateKey == duplicate)
    }

    /// Every pair of 300 distinct short keys in 16-member objects: none reported; each made a
    /// duplicate of an earlier one in its object: found.
    @Test func manyKeysSharingSigns() throws {
        let keys = (0..<300).map { "k\($0 % 10)\($0 / 10)" + ($0 % 3 == 0 ? "" : "z") }
        let parser = JSONParser()
        for start in stride(from: 0, to: 300 - 16, by: 7) {
            let group = Array(keys[start..<(start + 16)])
            let distinct = "{" + group.enumerated().map { "\"\($0.element)\":\($0.offset)" }.joined(separator: ",") + "}"
            #expect(try parser.parse(distinct).duplicateKey == nil)
            var twice = group
            twice[15] = group[start % 15]
            let dup = "{" + twice.enumerated().map { "\"\($0.element)\":\($0.offset)" }.joined(separator: ",") + "}"
            #expect(try parser.parse(dup).duplicateKey == group[start % 15])
        }
    }
}

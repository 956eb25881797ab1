import Testing
import YAMLConfig

@Suite("Parsing YAML")
struct ParserTests {
    @Test("mappings keep their order and every node its location")
    func orderAndLocations() throws {
        let node = try parseYAML("b: 1\na:\n  - x\n  - {k: v}\n", file: "f.yaml", environment: [:])
        let entries = try #require(node.entries)
        #expect(entries.map(\.key) == ["b", "a"])
        #expect(entries[1].keyLocation == YAMLConfig.SourceLocation(file: "f.yaml", line: 2, column: 1))
        let items = try #require(node["a"]?.elements)
        #expect(items[0].location == YAMLConfig.SourceLocation(file: "f.yaml", line: 3, column: 5))
        #expect(items[1]["k"]?.location == YAMLConfig.SourceLocation(file: "f.yaml", line: 4, column: 9))
    }

    @Test("scalar styles: quoted, plain, null")
    func scalarStyles() throws {
        let node = try parseYAML("a: 'x'\nb: x\nc: ~\nd:\ne: \"\"\nf: !!str 5\ng: |\n  text\n", file: "t", environment: [:])
        #expect(node["a"]?.scalar?.isQuoted == true)
        #expect(node["b"]?.scalar?.isQuoted == false)
        #expect(node["c"]?.isNull == true)
        #expect(node["d"]?.isNull == true)
        #expect(node["e"]?.isNull == false)
        #expect(node["f"]?.scalar?.isQuoted == true)
        #expect(node["g"]?.scalar?.value == "text\n")
        #expect(node["g"]?.scalar?.isQuoted == true)
    }

    @Test("an empty document is an empty mapping", arguments: ["", "# only a comment\n", "---\n", "~\n"])
    func emptyDocument(text: String) throws {
        #expect(try parseYAML(text, file: "t", environment: [:]).entries == [])
    }

    @Test("a second document is a problem")
    func twoDocuments() {
        #expect(
            parsingProblems("a: 1\n---\nb: 2\n") == [
                "test.yaml:2:1: a config file holds a single YAML document; a second one starts here (remove the \"---\" line and merge the two)"
            ])
    }

    @Test("duplicate keys are problems naming both lines")
    func duplicateKeys() {
        #expect(
            parsingProblems("sinks:\n  a: {kind: file}\n  b: {kind: x, kind: y}\n  a: {}\n") == [
                "test.yaml:3:16: sinks.b: duplicate key \"kind\" on line 3; it was first defined on line 3",
                "test.yaml:4:3: sinks: duplicate key \"a\" on line 4; it was first defined on line 2"
            ])
    }

    @Test("a syntax error carries libyaml's message and position")
    func syntaxError() {
        #expect(
            parsingProblems("a: 1\nb: [1, 2\nc: 3\n") == [
                "test.yaml:3:2: b: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence that starts at line 2, column 4)"
            ])
        #expect(
            parsingProblems("a: b: c\n") == [
                "test.yaml:1:5: a \": \" where no key can start: a value with \": \" in it needs quotes, or the line is indented too far "
                    + "(YAML syntax error: mapping values are not allowed in this context)"
            ])
    }

    /// Issue 47: the mistakes people make, in plain words with the line.
    @Test("tabs and indentation are said plainly")
    func tabsAndIndentation() {
        #expect(
            parsingProblems("a:\n\t- x\n") == [
                "test.yaml:2:1: a: a tab: YAML indents with spaces only; put spaces where the tab is (YAML syntax error: found character "
                    + "that cannot start any token (while scanning for the next token that starts at line 2, column 1))"
            ])
        let indent = parsingProblems("receivers:\n  a:\n    kind: hae\n   path: /x\n")
        #expect(
            indent.count == 1 && indent[0].hasPrefix("test.yaml:4:4: ")
                && indent[0].contains("line 4 is not indented like the lines before it"),
            "\(indent)")
    }

    @Test("problems found before a syntax error are kept")
    func problemsBeforeSyntaxError() {
        #expect(
            parsingProblems("a: 1\na: 2\nb: [\n") == [
                "test.yaml:2:1: duplicate key \"a\" on line 2; it was first defined on line 1",
                "test.yaml:4:1: b: YAML syntax error: did not find expected node content (while parsing a flow node that starts at line 4, column 1)"
            ])
    }

    @Test("problems of different kinds are all reported in one pass")
    func allProblemsAtOnce() {
        #expect(
            parsingProblems("token: ${TOKEN}\nport: 1\nport: 2\nsink: *missing\n") == [
                "test.yaml:1:8: token: environment variable TOKEN is not set; set it, or give a default with ${TOKEN:-value}",
                "test.yaml:3:1: duplicate key \"port\" on line 3; it was first defined on line 2",
                "test.yaml:4:7: sink: unknown alias *missing: define the anchor &missing earlier in the file"
            ])
    }

    @Test("columns count characters, not bytes, and unreadable text is located")
    func columnsAndReaderErrors() {
        #expect(
            parsingProblems("città: ${NOPE}\n") == [
                "test.yaml:1:8: città: environment variable NOPE is not set; set it, or give a default with ${NOPE:-value}"
            ])
        #expect(
            parsingProblems("a: 1\nb: é\u{7}\n") == [
                "test.yaml:2:5: cannot read the text: control characters are not allowed (character code 7)"
            ])
    }

    @Test("aliases are replaced by a copy of the anchored node")
    func aliases() throws {
        struct Batch: Decodable, Equatable { var size: Int; var wait: ConfigDuration }
        struct Root: Decodable, Equatable { var defaults: Batch; var a: Batch; var b: Batch; var names: [String] }
        let root = try decode(
            Root.self,
            """
            defaults: &batch {size: 10, wait: 1s}
            a: *batch
            b: *batch
            names: [&n x, *n, y]
            """)
        let batch = Batch(size: 10, wait: ConfigDuration(nanoseconds: 1_000_000_000))
        #expect(root == Root(defaults: batch, a: batch, b: batch, names: ["x", "x", "y"]))
    }

    @Test("an aliased copy is checked where it is used")
    func aliasedCopyChecked() {
        struct Batch: Decodable { var size: Int }
        struct Root: Decodable { var a: Batch; var b: Batch }
        #expect(
            decodingProblems(Root.self, "a: &x {size: 1, extra: 2}\nb: *x\n") == [
                "test.yaml:1:17: a: unknown key \"extra\"; valid keys are: size",
                "test.yaml:1:17: b: unknown key \"extra\"; valid keys are: size"
            ])
    }

    @Test("unknown aliases, merge keys, complex keys and tags are refused")
    func refusedConstructs() {
        #expect(
            parsingProblems("a: *nope\nbase: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n? [k]\n: v\nd: !!int 5\n") == [
                "test.yaml:1:4: a: unknown alias *nope: define the anchor &nope earlier in the file",
                "test.yaml:4:3: c: merge keys (<<) are not supported; write the keys out, or use an alias (*name) for the whole mapping",
                "test.yaml:6:3: a key must be a single value, not a list",
                "test.yaml:8:4: d: YAML tags such as !!int are not supported (only !!str); remove the tag"
            ])
    }

    @Test("aliases that expand exponentially are refused")
    func billionLaughs() {
        var yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...9 {
            let refs = Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ")
            yaml += "a\(level): &a\(level) [\(refs)]\n"
        }
        let found = parsingProblems(yaml)
        #expect(found.count == 1)
        #expect(found.first?.contains("aliases expand to more than 100000 values") == true)
    }

    @Test("problem descriptions: one per line, with location and path when known")
    func descriptions() {
        let located = ConfigProblem(
            location: YAMLConfig.SourceLocation(file: "healthgate.yaml", line: 14, column: 5),
            path: "sinks.influx", message: "unknown key \"bukcet\" — did you mean \"bucket\"?")
        #expect(located.description == "healthgate.yaml:14:5: sinks.influx: unknown key \"bukcet\" — did you mean \"bucket\"?")
        let bare = ConfigProblem(location: nil, path: "", message: "no receivers")
        #expect(bare.description == "no receivers")
        #expect(ConfigProblems(problems: [located, bare]).description == located.description + "\nno receivers")
    }

    @Test("paths bracket keys that contain dots")
    func paths() {
        #expect(ConfigPath.join("", key: "sinks") == "sinks")
        #expect(ConfigPath.join("sinks", key: "influx") == "sinks.influx")
        #expect(ConfigPath.join("labels", key: "app.kubernetes.io/name") == "labels[\"app.kubernetes.io/name\"]")
        #expect(ConfigPath.join("routes", index: 2) == "routes[2]")
    }
}

import Testing
import YAMLConfig

@Suite("Scalars, type mismatches and missing keys")
struct ScalarDecodingTests {
    struct Settings: Decodable, Equatable {
        var name: String
        var port: Int
        var enabled: Bool
        var ratio: Double
        var retries: UInt8?
        var tags: [String]?
    }

    @Test("plain scalars decode as the field's type")
    func plainScalars() throws {
        let settings = try decode(
            Settings.self,
            """
            name: 1234
            port: 8080
            enabled: false
            ratio: 2.5e-1
            retries: 255
            tags: [a, "b"]
            """)
        #expect(settings == Settings(name: "1234", port: 8080, enabled: false, ratio: 0.25, retries: 255, tags: ["a", "b"]))
    }

    @Test("a missing required key is located at its mapping")
    func missingKey() {
        struct Sink: Decodable { var kind: String; var path: String }
        struct Root: Decodable { var sink: Sink }
        #expect(
            decodingProblems(Root.self, "sink:\n  path: /tmp/x\n") == [
                "test.yaml:2:3: sink: missing required key \"kind\""
            ])
    }

    @Test(
        "type mismatches name what was expected and what was found",
        arguments: [
            ("port: abc", "test.yaml:2:7: port: expected a number, found \"abc\""),
            ("port: 1.5", "test.yaml:2:7: port: expected a whole number, found 1.5"),
            ("port: [1]", "test.yaml:2:7: port: expected a number, found a list"),
            ("port:", "test.yaml:2:6: port: expected a number, found an empty value"),
            ("ratio: fast", "test.yaml:4:8: ratio: expected a number, found \"fast\""),
            ("name: {first: a}", "test.yaml:1:7: name: expected a string, found a mapping"),
            ("name: null", "test.yaml:1:7: name: expected a string, found null; write \"null\" in quotes to mean the text"),
            ("retries: 300", "test.yaml:5:10: retries: 300 is out of range (allowed: 0 to 255)"),
            ("retries: -1", "test.yaml:5:10: retries: -1 is out of range (allowed: 0 to 255)"),
            ("tags: web", "test.yaml:6:7: tags: expected a list, found \"web\"; write [web] for a list with one item")
        ])
    func mismatch(replacement: String, expected: String) {
        let key = String(replacement.prefix { $0 != ":" })
        #expect(decodingProblems(Settings.self, settingsYAML(replacing: key, with: replacement)) == [expected])
    }

    @Test("a quoted number is a string, not an Int")
    func quotedNumberIsNotAnInt() {
        #expect(
            decodingProblems(Settings.self, settingsYAML(replacing: "port", with: "port: \"8080\"")) == [
                "test.yaml:2:7: port: expected a number, found the quoted string \"8080\"; remove the quotes"
            ])
    }

    @Test("yes/no/on/off are refused with a hint to write true or false", arguments: ["yes", "no", "on", "off", "Yes", "OFF"])
    func yamlOneBooleansRefused(word: String) {
        #expect(
            decodingProblems(Settings.self, settingsYAML(replacing: "enabled", with: "enabled: \(word)")) == [
                "test.yaml:3:10: enabled: \"\(word)\" is not accepted as a boolean; write true or false"
            ])
    }

    @Test("other boolean spellings are refused")
    func otherBooleans() {
        #expect(
            decodingProblems(Settings.self, settingsYAML(replacing: "enabled", with: "enabled: True")) == [
                "test.yaml:3:10: enabled: expected true or false, found \"True\"; write true in lower case"
            ])
        #expect(
            decodingProblems(Settings.self, settingsYAML(replacing: "enabled", with: "enabled: 'false'")) == [
                "test.yaml:3:10: enabled: expected true or false, found the quoted string \"false\"; remove the quotes"
            ])
    }

    @Test("all integer widths are range-checked; hex and octal are accepted")
    func integerWidths() throws {
        #expect(try decode([Int8].self, "[-128, 127]") == [-128, 127])
        #expect(try decode([UInt16].self, "[0, 65535, 0xff, 0o17]") == [0, 65535, 255, 15])
        #expect(try decode([Int64].self, "[-9223372036854775808]") == [Int64.min])
        #expect(
            decodingProblems([Int8].self, "[1, 128]") == [
                "test.yaml:1:5: [1]: 128 is out of range (allowed: -128 to 127)"
            ])
    }

    @Test("floats accept YAML's special values and refuse overflow")
    func floats() throws {
        let values = try decode([Double].self, "[1, -2.5, .5, 1e3, .inf, -.inf]")
        #expect(values == [1, -2.5, 0.5, 1000, .infinity, -.infinity])
        #expect(try decode(Double.self, ".nan").isNaN)
        #expect(decodingProblems(Float.self, "1e39") == ["test.yaml:1:1: 1e39 is out of range for a Float"])
    }

    @Test("null and missing values decode as nil for optionals")
    func nulls() throws {
        struct Optionals: Decodable, Equatable { var a: String?; var b: Int?; var c: [Int?]; var d: Bool? }
        let value = try decode(Optionals.self, "a: ~\nb:\nc: [1, null, ~]\n")
        #expect(value == Optionals(a: nil, b: nil, c: [1, nil, nil], d: nil))
        #expect(try decode(Optionals.self, "a: \"~\"\nc: []\n").a == "~")
    }

    @Test("an invalid enum value lists the valid ones when none is close")
    func enumValues() {
        #expect(
            decodingProblems(LogLevel.self, "loud") == [
                "test.yaml:1:1: invalid value \"loud\"; expected one of: debug, info, warning, error"
            ])
        #expect(
            decodingProblems(LogLevel.self, "warn") == [
                "test.yaml:1:1: invalid value \"warn\" — did you mean \"warning\"?"
            ])
    }

    @Test("the document must be a mapping for a struct")
    func rootMustBeMapping() {
        #expect(
            decodingProblems(Settings.self, "- a\n- b\n") == [
                "test.yaml:1:1: expected a mapping (key: value pairs), found a list"
            ])
    }

    private func settingsYAML(replacing key: String, with line: String) -> String {
        let lines = [
            "name: gate", "port: 8080", "enabled: true", "ratio: 0.5", "retries: 3", "tags: [a]"
        ]
        return lines.map { $0.hasPrefix(key + ":") ? line : $0 }.joined(separator: "\n")
    }
}

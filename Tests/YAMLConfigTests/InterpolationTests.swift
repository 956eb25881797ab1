import Testing
import YAMLConfig

@Suite("Environment interpolation")
struct InterpolationTests {
    @Test("${VAR} is replaced in plain and quoted values")
    func substitution() throws {
        let node = try parseYAML(
            """
            a: ${HOST}
            b: "http://${HOST}:${PORT}/x"
            c: 'user-${USER_NAME}'
            """, file: "test.yaml", environment: ["HOST": "db.local", "PORT": "5432", "USER_NAME": "ann"])
        #expect(node["a"]?.scalar?.value == "db.local")
        #expect(node["b"]?.scalar?.value == "http://db.local:5432/x")
        #expect(node["c"]?.scalar?.value == "user-ann")
    }

    @Test("$$ in a default is a literal $") func dollarsInDefaults() throws {
        #expect(try parseYAML("p: ${PW:-a$$b}\n", file: "t", environment: [:])["p"]?.scalar?.value == "a$b")
        #expect(try parseYAML("p: ${PW:-$$$$}\n", file: "t", environment: [:])["p"]?.scalar?.value == "$$")
    }

    @Test("${VAR:-default} uses the default when the variable is unset or empty")
    func defaults() throws {
        let yaml = "level: ${LEVEL:-info}\nempty_default: ${LEVEL:-}\n"
        #expect(try parseYAML(yaml, file: "t", environment: [:])["level"]?.scalar?.value == "info")
        #expect(try parseYAML(yaml, file: "t", environment: ["LEVEL": ""])["level"]?.scalar?.value == "info")
        #expect(try parseYAML(yaml, file: "t", environment: ["LEVEL": "debug"])["level"]?.scalar?.value == "debug")
        #expect(try parseYAML(yaml, file: "t", environment: [:])["empty_default"]?.scalar?.value == "")
    }

    @Test("a set but empty ${VAR} without a default is the empty string")
    func emptyIsSet() throws {
        #expect(try parseYAML("a: \"${X}\"", file: "t", environment: ["X": ""])["a"]?.scalar?.value == "")
    }

    @Test("$$ is a literal $, and a lone $ stays as it is")
    func dollars() throws {
        let node = try parseYAML("price: $$5 or ${A}$$\nother: cost $3 and $HOME\n", file: "t", environment: ["A": "x"])
        #expect(node["price"]?.scalar?.value == "$5 or x$")
        #expect(node["other"]?.scalar?.value == "cost $3 and $HOME")
    }

    @Test("unset variables are problems naming each variable, at the value's location")
    func unsetVariables() {
        #expect(
            parsingProblems("token: ${TOKEN}\nlist:\n  - \"Bearer ${OTHER}\"\n") == [
                "test.yaml:1:8: token: environment variable TOKEN is not set; set it, or give a default with ${TOKEN:-value}",
                "test.yaml:3:5: list[0]: environment variable OTHER is not set; set it, or give a default with ${OTHER:-value}"
            ])
    }

    @Test("malformed references are problems")
    func malformed() {
        #expect(
            parsingProblems("a: ${1X}\nb: ${X-y}\nc: ${OPEN\n") == [
                "test.yaml:1:4: a: cannot read \"${1X}\": write ${NAME} or ${NAME:-default}, where NAME is letters, digits and _ and does not start with a digit; write $$ for a literal $",
                "test.yaml:2:4: b: cannot read \"${X-y}\": write ${NAME} or ${NAME:-default}, where NAME is letters, digits and _ and does not start with a digit; write $$ for a literal $",
                "test.yaml:3:4: c: unterminated \"${\" in \"${OPEN\": close it with \"}\", or write $$ for a literal $"
            ])
    }

    @Test("a value containing ': ' or newlines stays one plain string")
    func noStructureInjection() throws {
        struct Root: Decodable { var name: String; var port: Int }
        let env = ["NAME": "evil: true\nport: 1\n- item", "PORT": "8080"]
        let root = try decode(Root.self, "name: ${NAME}\nport: ${PORT}\n", environment: env)
        #expect(root.name == "evil: true\nport: 1\n- item")
        // A plain value still reads as a number after substitution.
        #expect(root.port == 8080)
    }

    @Test("a variable cannot make a value null, and keys are never interpolated")
    func keysAndNulls() throws {
        let node = try parseYAML("${KEY}: ${NULLISH}\n", file: "t", environment: ["KEY": "k", "NULLISH": "~"])
        let entry = try #require(node.entries?.first)
        #expect(entry.key == "${KEY}")
        #expect(
            entry.value.scalar
                == YAMLScalar(
                    value: "~", location: YAMLConfig.SourceLocation(file: "t", line: 1, column: 9), isQuoted: false, isNull: false))
    }
}

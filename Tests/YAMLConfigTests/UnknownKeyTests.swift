import Testing
import YAMLConfig

@Suite("Unknown keys")
struct UnknownKeyTests {
    struct InfluxSink: Decodable {
        var kind: String
        var url: String
        var bucket: String?
        var token: String?
    }

    struct Sinks: Decodable {
        var sinks: [String: InfluxSink]
    }

    @Test("a misspelt optional key is reported with the intended key, at the typo's line and column")
    func typoWithSuggestion() {
        let yaml = """
            sinks:
              influx:
                kind: influx
                url: http://localhost:8086
                bukcet: health
            """
        #expect(
            decodingProblems(Sinks.self, yaml) == [
                "test.yaml:5:5: sinks.influx: unknown key \"bukcet\" — did you mean \"bucket\"?"
            ])
    }

    @Test("every unknown key in the tree is reported, not only the first")
    func severalUnknownKeys() {
        let yaml = """
            sinks:
              a:
                kind: influx
                url: http://a
                tokne: x
                colour: red
              b:
                kind: influx
                url: http://b
                buckets: y
            """
        #expect(
            decodingProblems(Sinks.self, yaml) == [
                "test.yaml:5:5: sinks.a: unknown key \"tokne\" — did you mean \"token\"?",
                "test.yaml:6:5: sinks.a: unknown key \"colour\"; valid keys are: kind, url, bucket, token",
                "test.yaml:10:5: sinks.b: unknown key \"buckets\" — did you mean \"bucket\"?"
            ])
    }

    @Test("a key that is already present is not suggested again")
    func presentKeysAreNotSuggested() {
        let yaml = """
            kind: influx
            url: http://a
            urls: http://b
            """
        #expect(
            decodingProblems(InfluxSink.self, yaml) == [
                "test.yaml:3:1: unknown key \"urls\"; valid keys are: kind, url, bucket, token"
            ])
    }

    @Test("a misspelt required key is named in the missing-key problem")
    func typoOfRequiredKey() {
        struct Required: Decodable { var bucket: String }
        let yaml = """
            bukcet: health
            """
        #expect(
            decodingProblems(Required.self, yaml) == [
                "test.yaml:1:1: missing required key \"bucket\" (is \"bukcet\" a typo?)"
            ])
    }

    @Test("dictionary keys are never unknown")
    func dictionaryKeysAreFree() throws {
        let labels = try decode([String: Int].self, "zebra: 1\napple: 2\n")
        #expect(labels == ["zebra": 1, "apple": 2])
    }

    @Test("keys read by two containers on one mapping (a kind discriminator) are merged")
    func discriminatorAndPayloadShareKeys() throws {
        enum Shape: Decodable, Equatable {
            case circle(Circle)
            case square(Square)

            enum Kind: String, Decodable { case circle, square }
            enum KindKey: String, CodingKey { case kind }

            init(from decoder: any Decoder) throws {
                let kind = try decoder.container(keyedBy: KindKey.self).decode(Kind.self, forKey: .kind)
                switch kind {
                case .circle: self = .circle(try Circle(from: decoder))
                case .square: self = .square(try Square(from: decoder))
                }
            }
        }
        struct Circle: Decodable, Equatable { var radius: Double }
        struct Square: Decodable, Equatable { var side: Double }

        #expect(try decode(Shape.self, "kind: circle\nradius: 2.5\n") == .circle(Circle(radius: 2.5)))
        #expect(
            decodingProblems(Shape.self, "kind: square\nside: 1\nradius: 2\n") == [
                "test.yaml:3:1: unknown key \"radius\"; valid keys are: kind, side"
            ])
    }
}

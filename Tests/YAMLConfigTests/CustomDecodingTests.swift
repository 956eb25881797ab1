import Testing
import YAMLConfig

@Suite("Custom init(from:) implementations")
struct CustomDecodingTests {
    /// Validates its port in a custom initializer.
    struct Listener: Decodable {
        var host: String
        var port: Int

        enum CodingKeys: String, CodingKey { case host, port }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            host = try container.decode(String.self, forKey: .host)
            port = try container.decode(Int.self, forKey: .port)
            guard (1...65535).contains(port) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .port, in: container, debugDescription: "port must be between 1 and 65535")
            }
        }
    }

    struct NotAnAddress: Error, CustomStringConvertible {
        var text: String
        var description: String { "\"\(text)\" is not a host:port address" }
    }

    /// Parses "host:port" from a string and throws its own error type.
    struct Address: Decodable {
        var host: String
        var port: Int

        init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            let parts = text.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1]) else { throw NotAnAddress(text: text) }
            host = String(parts[0])
            self.port = port
        }
    }

    struct Server: Decodable {
        var listener: Listener
        var upstreams: [Address]
    }

    @Test("a DecodingError for a key is located at that key's value")
    func decodingErrorForKey() {
        #expect(
            decodingProblems(Server.self, "listener: {host: a, port: 70000}\nupstreams: []\n") == [
                "test.yaml:1:27: listener.port: port must be between 1 and 65535"
            ])
    }

    @Test("any other error is located at the node being decoded, with its description")
    func customError() {
        #expect(
            decodingProblems(Server.self, "listener: {host: a, port: 80}\nupstreams:\n  - db:5432\n  - cache\n") == [
                "test.yaml:4:5: upstreams[1]: \"cache\" is not a host:port address"
            ])
    }

    @Test("ConfigValueError messages pass through unchanged")
    func configValueError() {
        struct Even: Decodable {
            init(from decoder: any Decoder) throws {
                let value = try decoder.singleValueContainer().decode(Int.self)
                if value % 2 != 0 { throw ConfigValueError("\(value) is odd; use an even number") }
            }
        }
        #expect(decodingProblems([String: Even].self, "a: 2\nb: 3\n") == ["test.yaml:2:4: b: 3 is odd; use an even number"])
    }

    @Test("errors from the decoder keep their location through a custom initializer")
    func innerErrorsKeepLocation() {
        #expect(
            decodingProblems(Server.self, "listener: {host: a, port: eighty}\nupstreams: []\n") == [
                "test.yaml:1:27: listener.port: expected a number, found \"eighty\""
            ])
    }

    @Test("superDecoder, nested containers and unkeyed containers work")
    func containerVariety() throws {
        struct Point: Decodable, Equatable {
            var x: Int
            var y: Int
            var label: String?
            enum Keys: String, CodingKey { case coordinates, meta }
            enum MetaKeys: String, CodingKey { case label }

            init(x: Int, y: Int, label: String?) {
                (self.x, self.y, self.label) = (x, y, label)
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: Keys.self)
                var coordinates = try container.nestedUnkeyedContainer(forKey: .coordinates)
                x = try coordinates.decode(Int.self)
                y = try coordinates.decode(Int.self)
                let meta = try container.superDecoder(forKey: .meta)
                if try meta.singleValueContainer().decodeNil() {
                    label = nil
                } else {
                    label = try meta.container(keyedBy: MetaKeys.self).decodeIfPresent(String.self, forKey: .label)
                }
            }
        }
        #expect(try decode(Point.self, "coordinates: [1, 2]\nmeta: {label: home}\n") == Point(x: 1, y: 2, label: "home"))
        #expect(try decode(Point.self, "coordinates: [3, 4]\n") == Point(x: 3, y: 4, label: nil))
        #expect(
            decodingProblems(Point.self, "coordinates: [1]\n") == [
                "test.yaml:1:14: coordinates: expected another item; the list has only 1"
            ])
        #expect(
            decodingProblems(Point.self, "coordinates: [1, 2]\nmeta: {lable: x}\n") == [
                "test.yaml:2:8: meta: unknown key \"lable\" — did you mean \"label\"?"
            ])
    }
}

import Testing
import YAMLConfig

/// The integrator's pattern: decode the top level with the components as raw
/// `YAMLNode`s, then decode each component on its own, gathering every problem.
@Suite("Staged decoding through YAMLNode")
struct StagedDecodingTests {
    struct TopLevel: Decodable {
        var listen: String
        var receivers: YAMLNode
        var routes: YAMLNode
        var sinks: YAMLNode
    }

    let yaml = """
        listen: :8080
        receivers:
          phone:
            kind: syncky
            path: /p
            auth: {type: bearer, token: t}
            max_body: 1 gigabyte
        routes:
          - {name: live, from: [phone], to: [archive]}
          - {name: slow, from: [phone], to: [archive], transfroms: []}
        sinks:
          archive: {kind: file, path: a.ndjson, batch: {max_items: lots, max_wait: 1s}}
          influx: {kind: influx, url: "http://x", bukcet: b}
        """

    @Test("problems from every component are collected, with full paths")
    func collectsProblemsFromAllComponents() throws {
        let root = try parseYAML(yaml, file: "healthgate.yaml", environment: [:])
        let decoder = YAMLDecoder()
        var problems: [ConfigProblem] = []
        func collect<T>(_ decode: () throws(ConfigProblems) -> T) -> T? {
            do throws(ConfigProblems) { return try decode() } catch {
                problems += error.problems
                return nil
            }
        }
        func entries<T: Decodable>(_ type: T.Type, _ node: YAMLNode, _ path: String) -> [(key: String, value: T)] {
            node.entries!.compactMap { e in
                collect { () throws(ConfigProblems) in try decoder.decode(T.self, from: e.value, path: "\(path).\(e.key)") }.map {
                    (e.key, $0)
                }
            }
        }

        // Nothing inside the YAMLNode fields is checked at this stage.
        let top = try decoder.decode(TopLevel.self, from: root)

        let receivers = entries(Receiver.self, top.receivers, "receivers")
        let routes = top.routes.elements!.enumerated().compactMap { i, node in
            collect { () throws(ConfigProblems) in try decoder.decode(Route.self, from: node, path: "routes[\(i)]") }
        }
        let sinks = entries(Sink.self, top.sinks, "sinks")

        #expect(receivers.isEmpty)
        #expect(routes.map(\.name) == ["live"])
        #expect(sinks.map(\.key) == [])
        #expect(
            problems.map(\.description) == [
                "healthgate.yaml:7:15: receivers.phone.max_body: invalid size \"1 gigabyte\"; write a number of bytes with an optional unit: 512, 100KB (or kB, K: ×1000), 100KiB (×1024), 10MB, 10MiB, 1GB, 1GiB",
                "healthgate.yaml:10:48: routes[1]: unknown key \"transfroms\" — did you mean \"transforms\"?",
                "healthgate.yaml:12:60: sinks.archive.batch.max_items: expected a number, found \"lots\"",
                "healthgate.yaml:13:43: sinks.influx: unknown key \"bukcet\" — did you mean \"bucket\"?"
            ])
    }

    @Test("a [String: YAMLNode] field also leaves its subtrees alone")
    func dictionaryOfNodes() throws {
        struct Loose: Decodable { var sinks: [String: YAMLNode] }
        let root = try parseYAML(yaml, file: "healthgate.yaml", environment: [:])
        struct Partial: Decodable { var sinks: [String: YAMLNode]; var listen: String; var receivers: YAMLNode; var routes: YAMLNode }
        let partial = try YAMLDecoder().decode(Partial.self, from: root)
        #expect(partial.sinks["influx"]?["bukcet"]?.scalar?.value == "b")
        // Without asking for the other top-level keys, they are unknown.
        #expect(problems { () throws(ConfigProblems) in try YAMLDecoder().decode(Loose.self, from: root) }.count == 3)
    }

    @Test("the path argument prefixes every problem, and a non-mapping component is reported")
    func pathPrefixAndWrongShape() throws {
        let node = try parseYAML("sinks: [a, b]\n", file: "h.yaml", environment: [:])
        #expect(
            problems { () throws(ConfigProblems) in try YAMLDecoder().decode([String: Sink].self, from: node["sinks"]!, path: "sinks") }
                == ["h.yaml:1:8: sinks: expected a mapping (key: value pairs), found a list"])

        let sink = try parseYAML("kind: file\npath: 5\n", file: "h.yaml", environment: [:])
        #expect(try YAMLDecoder().decode(Sink.self, from: sink, path: "sinks.archive").path == "5")
        #expect(
            problems { () throws(ConfigProblems) in
                try YAMLDecoder().decode(Batch.self, from: sink, path: "sinks.archive.batch")
            } == ["h.yaml:1:1: sinks.archive.batch: missing required key \"max_items\""])
    }
}

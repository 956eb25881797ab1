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

        // Nothing inside the YAMLNode fields is checked at this stage.
        let top = try #require(decoder.decode(TopLevel.self, from: root, collectingInto: &problems))
        #expect(problems.isEmpty)

        let receivers = decoder.decodeEntries(Receiver.self, from: top.receivers, path: "receivers", collectingInto: &problems)
        let routes = decoder.decodeElements(Route.self, from: top.routes, path: "routes", collectingInto: &problems)
        let sinks = decoder.decodeEntries(Sink.self, from: top.sinks, path: "sinks", collectingInto: &problems)

        #expect(receivers.isEmpty)
        #expect(routes.map(\.name) == ["live"])
        #expect(sinks.map(\.key) == [])
        #expect(problems.map(\.description) == [
            "healthgate.yaml:7:15: receivers.phone.max_body: invalid size \"1 gigabyte\"; write a number of bytes with an optional unit: 512, 100KB (or kB, K: ×1000), 100KiB (×1024), 10MB, 10MiB, 1GB, 1GiB",
            "healthgate.yaml:10:48: routes[1]: unknown key \"transfroms\" — did you mean \"transforms\"?",
            "healthgate.yaml:12:60: sinks.archive.batch.max_items: expected a number, found \"lots\"",
            "healthgate.yaml:13:43: sinks.influx: unknown key \"bukcet\" — did you mean \"bucket\"?",
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
        var collected: [ConfigProblem] = []
        _ = YAMLDecoder().decodeEntries(Sink.self, from: node["sinks"]!, path: "sinks", collectingInto: &collected)
        #expect(collected.map(\.description) == ["h.yaml:1:8: sinks: expected a mapping (key: value pairs), found a list"])

        let sink = try parseYAML("kind: file\npath: 5\n", file: "h.yaml", environment: [:])
        #expect(YAMLDecoder().decode(Sink.self, from: sink, path: "sinks.archive", collectingInto: &collected)?.path == "5")
        #expect(problems { () throws(ConfigProblems) in
            try YAMLDecoder().decode(Batch.self, from: sink, path: "sinks.archive.batch")
        } == ["h.yaml:1:1: sinks.archive.batch: missing required key \"max_items\""])
    }
}

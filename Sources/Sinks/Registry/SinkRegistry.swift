import SinkFile
import SinkHTTP
import SinkHomeAssistant
import SinkInfluxDB
import SinkKit
import SinkMQTT
import SinkPostgres
import YAMLConfig

/// Every sink kind, by its `kind:` in the config. A new sink is one folder (its own target,
/// linking only the C library it needs) and one line here.
public enum SinkRegistry {
    public typealias Builder =
        @Sendable (_ name: String, _ node: YAMLNode, _ path: String, _ context: SinkBuildContext)
        throws(ConfigProblems) -> BuiltSink

    public static let builders: [(kind: String, build: Builder)] = [
        ("file", FileSink.build),
        ("homeassistant", HomeAssistantSink.build),
        ("http", HTTPSink.build),
        ("influxdb", InfluxDBSink.build),
        ("mqtt", MQTTSink.build),
        ("postgres", PostgresSink.build)
    ]

    public static var kinds: [String] { builders.map(\.kind) }

    public static func builder(kind: String) -> Builder? {
        builders.first { $0.kind == kind }?.build
    }
}

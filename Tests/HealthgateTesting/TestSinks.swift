import HealthgateCore
import SinkKit

extension BuiltSink {
    /// A test double that is its own `Sendable` observer (it locks), opened as it is.
    public static func testing(_ sink: some Sink & Sendable, common: SinkCommonConfig = SinkCommonConfig()) -> BuiltSink {
        BuiltSink(kind: "test", common: common, summary: "test sink") { _ in sink }
    }

    /// A real sink, made on the drainer's thread when it opens.
    public static func testing(
        common: SinkCommonConfig = SinkCommonConfig(),
        _ make: @escaping @Sendable (SinkContext) -> any Sink
    ) -> BuiltSink {
        BuiltSink(kind: "test", common: common, summary: "test sink") { context in make(context) }
    }
}

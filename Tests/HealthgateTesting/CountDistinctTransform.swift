import CanonicalJSON
import HealthgateCore
import Transforms
import YAMLConfig

/// A stateful test transform: counts the distinct records `(device, uuid)` it has seen per
/// type, and on each new one emits a derived record with a stable key (`device: "count"`,
/// `uuid: "count-<type>"`, `value: <count>`), so the last one downstream holds the count. Its
/// state (the keys seen) is committed with the sink's cursor: after a SIGKILL at any moment
/// the count downstream equals the distinct records sent — a record lost from the state
/// would count low, one counted twice high. Registered in `healthgate-testserve` as
/// `count_distinct`.
public struct CountDistinctTransform: TransformSpec {
    public init() {}

    public var kind: String { "count_distinct" }

    public func instantiate(_ context: TransformContext) -> any Transform { Instance() }

    public static let registration: (name: String, build: TransformRegistry.Builder) = (
        "count_distinct", { _, _ throws(ConfigProblems) in CountDistinctTransform() }
    )

    final class Instance: Transform {
        var seen: [String: Set<String>] = [:]

        func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
            let (inserted, _) = seen[record.type, default: []].insert(record.device + "\u{1F}" + record.uuid)
            guard inserted else { return }
            emit(
                Record(
                    CanonicalRecord(
                        kind: "quantity", device: "count", receiver: record.receiver, uuid: "count-\(record.type)",
                        type: record.type, start: Timestamp(seconds: 0), end: Timestamp(seconds: 0),
                        value: .number(Double(seen[record.type]!.count)), unit: "count")))
        }

        /// `StateWriter` fields: per type, the type, its key count, its keys.
        func saveState() -> [UInt8]? {
            var w = StateWriter()
            for (type, keys) in seen.sorted(by: { $0.key < $1.key }) {
                w.put(type)
                w.put(keys.count)
                for k in keys.sorted() { w.put(k) }
            }
            return w.bytes
        }

        func restoreState(_ bytes: [UInt8]) throws(TransformStateError) {
            var r = StateReader(bytes)
            seen = [:]
            while !r.atEnd {
                let type = try r.take()
                var keys = Set<String>()
                for _ in 0..<max(0, try r.int()) { keys.insert(try r.take()) }
                seen[type] = keys
            }
        }
    }
}

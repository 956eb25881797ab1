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

        func process(_ record: CanonicalRecord, emit: (CanonicalRecord) -> Void) {
            let (inserted, _) = seen[record.type, default: []].insert(record.device + "\u{1F}" + record.uuid)
            guard inserted else { return }
            emit(CanonicalRecord(kind: "quantity", device: "count", receiver: record.receiver, uuid: "count-\(record.type)",
                                 type: record.type, start: Timestamp(seconds: 0), end: Timestamp(seconds: 0),
                                 value: .number(Double(seen[record.type]!.count)), unit: "count"))
        }

        /// Every string as its byte count, a space, its bytes: `<type> <n keys> <key>…` per type.
        func saveState() -> [UInt8]? {
            var out: [UInt8] = []
            func put(_ s: String) {
                out += Array("\(s.utf8.count) ".utf8)
                out += Array(s.utf8)
            }
            for (type, keys) in seen.sorted(by: { $0.key < $1.key }) {
                put(type)
                put(String(keys.count))
                for k in keys.sorted() { put(k) }
            }
            return out
        }

        func restoreState(_ bytes: [UInt8]) throws(TransformStateError) {
            var at = 0
            func take() throws(TransformStateError) -> String {
                guard let space = bytes[at...].firstIndex(of: 0x20), let n = Int(String(decoding: bytes[at..<space], as: UTF8.self)),
                      space + 1 + n <= bytes.count else { throw TransformStateError("truncated at byte \(at)") }
                at = space + 1 + n
                return String(decoding: bytes[(space + 1)..<at], as: UTF8.self)
            }
            seen = [:]
            while at < bytes.count {
                let type = try take()
                guard let n = Int(try take()) else { throw TransformStateError("no key count for \(type)") }
                var keys = Set<String>()
                for _ in 0..<n { keys.insert(try take()) }
                seen[type] = keys
            }
        }
    }
}

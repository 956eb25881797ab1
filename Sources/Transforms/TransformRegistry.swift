import HealthgateCore
import YAMLConfig
import CanonicalJSON

/// Every transform kind, by the key that names it in a route's `transforms` list.
/// A new transform is one folder and one line here.
public enum TransformRegistry {
    public typealias Builder = @Sendable (YAMLNode, String) throws(ConfigProblems) -> any TransformSpec

    public static let builders: [(name: String, build: Builder)] = [
        ("filter", FilterTransform.build),
        ("rename", RenameTransform.build),
        ("convert", ConvertTransform.build),
        ("drop", DropTransform.build),
        ("tag", TagTransform.build),
        ("dedupe", DedupeTransform.build),
        ("aggregate", AggregateTransform.build)
    ]
}

/// The instance of a stateless transform that changes each record where it lies (rename, tag).
final class MappingInstance: Transform {
    let apply: (inout Record) -> Void

    init(_ apply: @escaping (inout Record) -> Void) { self.apply = apply }

    func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
        apply(&record)
        emit(record)
    }
}

/// What a transform worked out for a record's type (and unit), kept for the next records: the
/// last eight (`RecentAnswers`; decoded records share their strings' storage, so most
/// comparisons are a pointer's), the rest hashed; at most `limit` keys in all.
struct PerTypeCache<Value> {
    struct TypeAndUnit: RecentKey {
        var type: String
        var unit: String
        func isSame(as other: TypeAndUnit) -> Bool { type.isSameText(other.type) && unit.isSameText(other.unit) }
    }
    private var recent = RecentAnswers<TypeAndUnit, Value>()
    private var all: [String: [String: Value]] = [:]
    private var count = 0
    static var limit: Int { 4096 }

    /// The value for (`type`, `unit`), worked out by `make` the first time.
    mutating func value(_ type: String, _ unit: String = "", _ make: () -> Value) -> Value {
        let key = TypeAndUnit(type: type, unit: unit)
        if let v = recent.answer(for: key) { return v }
        let v: Value
        if let known = all[type]?[unit] {
            v = known
        } else {
            v = make()
            if count < PerTypeCache.limit {
                all[type, default: [:]][unit] = v
                count += 1
            }
        }
        recent.keep(key, v)
        return v
    }
}

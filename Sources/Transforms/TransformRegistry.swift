import HealthgateCore
import YAMLConfig

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
        ("aggregate", AggregateTransform.build),
    ]

    public static var names: [String] { builders.map(\.name) }

    public static func builder(named name: String) -> Builder? {
        builders.first { $0.name == name }?.build
    }
}

/// The instance of a stateless transform that changes each record in place (rename, tag): the
/// route runs `apply` on its one copy of the record.
final class MappingInstance: Transform {
    let apply: (inout CanonicalRecord) -> Void

    init(_ apply: @escaping (inout CanonicalRecord) -> Void) { self.apply = apply }

    func process(_ record: CanonicalRecord, emit: (CanonicalRecord) -> Void) {
        var r = record
        apply(&r)
        emit(r)
    }

    var maps: Bool { true }

    func map(_ record: inout CanonicalRecord) -> Bool {
        apply(&record)
        return true
    }
}

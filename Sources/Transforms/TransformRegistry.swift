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

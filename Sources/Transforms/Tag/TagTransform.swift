import HealthgateCore
import YAMLConfig
import CanonicalJSON

/// Adds static labels to every record of the route, in the canonical `tags` field that sinks
/// use: InfluxDB tags, the PostgreSQL `tags` column, the JSON of files, webhooks and MQTT records.
///
/// ```yaml
/// - tag: {person: alice, household: home}
/// ```
///
/// A label the record already has is given the new value. Names are lower-case letters, digits
/// and `_` (they become InfluxDB tag keys), values any text up to 256 bytes. Stateless.
public struct TagTransform: TransformSpec {
    let tags: [RecordTag]

    public var kind: String { "tag" }

    public func instantiate(_ context: TransformContext) -> any Transform { MappingInstance(apply) }

    /// Labels the record (its tags changed).
    public func apply(_ r: inout Record) {
        var labels = r.tags
        if labels.isEmpty {
            r.tags = tags // shares the one array: no copy per record
            return
        }
        for t in tags {
            if let i = labels.firstIndex(where: { $0.name == t.name }) { labels[i].value = t.value } else { labels.append(t) }
        }
        r.tags = labels
    }

    public static func build(_ node: YAMLNode, _ path: String) throws(ConfigProblems) -> any TransformSpec {
        var problems: [ConfigProblem] = []
        guard let entries = node.entries else {
            throw ConfigProblems(problems: [
                ConfigProblem(
                    location: node.location, path: path,
                    message: "tag takes labels as a mapping, e.g. {person: alice, household: home}")
            ])
        }
        var tags: [RecordTag] = []
        for e in entries {
            func problem(_ message: String) {
                problems.append(ConfigProblem(location: e.keyLocation, path: "\(path).\(e.key)", message: message))
            }
            guard RenameTransform.isName(e.key) else {
                problem("\"\(e.key)\" is not a label name: lower-case letters, digits and _, starting with a letter")
                continue
            }
            guard let value = e.value.scalar?.value, !value.isEmpty, value.utf8.count <= 256,
                !value.utf8.contains(where: { $0 < 0x20 })
            else {
                problem("the value of \(e.key) is text of 1 to 256 bytes, without control characters")
                continue
            }
            tags.append(RecordTag(e.key, value))
        }
        if entries.isEmpty { problems.append(ConfigProblem(location: node.location, path: path, message: "tag needs at least one label")) }
        if !problems.isEmpty { throw ConfigProblems(problems: problems) }
        return TagTransform(tags: tags)
    }
}

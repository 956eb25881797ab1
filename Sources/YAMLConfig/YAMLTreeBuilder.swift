/// Builds a `YAMLNode` tree from libyaml events.
///
/// Problems that still leave a usable tree (duplicate keys, unknown aliases, …) are
/// collected in `problems` and parsing goes on. Problems after which the event stream
/// cannot be followed (syntax errors, runaway nesting or aliases) end the build.
final class YAMLTreeBuilder {
    /// A node and how many nodes it stands for once aliases are expanded.
    private struct Built {
        var node: YAMLNode
        var size: Int
    }

    /// Deeper nesting than this is refused. Configuration files never come close,
    /// and the limit keeps the recursive builder (and decoder) far from the stack limit
    /// of a secondary thread.
    static let maximumDepth = 200
    /// An alias is copied where it is used. Each copy is shared in memory, but the
    /// decoder walks every copy, so "billion laughs" documents are refused.
    static let maximumAliasExpansion = 100_000

    private static let nullSpellings: Set<String> = ["", "~", "null", "Null", "NULL"]
    private static let stringTags: Set<String> = ["tag:yaml.org,2002:str", "!"]

    private let reader: YAMLEventReader
    private let file: String
    private(set) var problems: [ConfigProblem] = []
    private var anchors: [String: Built] = [:]
    private var aliasExpansion = 0

    init(reader: YAMLEventReader, file: String) {
        self.reader = reader
        self.file = file
    }

    /// The root node, or `nil` when a fatal problem stopped the build; `problems`
    /// holds everything found either way.
    func build() -> YAMLNode? {
        do {
            return try buildStream()
        } catch {
            problems.append(error)
            return nil
        }
    }

    private func buildStream() throws(ConfigProblem) -> YAMLNode {
        _ = try reader.next(path: "") // STREAM-START
        var root: YAMLNode?
        var documentCount = 0
        while true {
            switch try reader.next(path: "") {
            case .streamEnd:
                // No document at all (empty text or only comments): an empty configuration.
                return root ?? .mapping([], SourceLocation(file: file, line: 1, column: 1))
            case .documentStart(let location):
                documentCount += 1
                anchors = [:] // anchors do not carry over between documents
                let problemsBefore = problems.count
                let built = try parseNode(try reader.next(path: ""), path: "", depth: 0)
                _ = try reader.next(path: "") // DOCUMENT-END
                if documentCount == 1 {
                    root = built.node.isNull ? .mapping([], built.node.location) : built.node
                } else {
                    // Later documents are parsed only to report syntax errors;
                    // their other problems would just be noise.
                    problems.removeSubrange(problemsBefore...)
                    if documentCount == 2 {
                        problems.append(
                            ConfigProblem(
                                location: location, path: "",
                                message:
                                    "a config file holds a single YAML document; a second one starts here (remove the \"---\" line and merge the two)"
                            ))
                    }
                }
            default:
                throw ConfigProblem(location: nil, path: "", message: "unexpected YAML structure outside a document")
            }
        }
    }

    private func parseNode(_ event: YAMLEvent, path: String, depth: Int) throws(ConfigProblem) -> Built {
        let built: Built
        let anchor: String?
        switch event {
        case .scalar(let scalar):
            anchor = scalar.anchor
            built = Built(node: .scalar(makeScalar(scalar, path: path)), size: 1)

        case .alias(let name, let location):
            guard let anchored = anchors[name] else {
                problems.append(
                    ConfigProblem(
                        location: location, path: path,
                        message: "unknown alias *\(name): define the anchor &\(name) earlier in the file"))
                return Built(node: .scalar(YAMLScalar(value: "", location: location, isNull: true)), size: 1)
            }
            aliasExpansion += anchored.size
            if aliasExpansion > Self.maximumAliasExpansion {
                throw ConfigProblem(
                    location: location, path: path,
                    message: "aliases expand to more than \(Self.maximumAliasExpansion) values; use fewer nested aliases")
            }
            return anchored // an alias cannot itself carry an anchor

        case .sequenceStart(let sequenceAnchor, let tag, let location):
            anchor = sequenceAnchor
            try checkDepth(depth, location: location, path: path)
            checkTag(tag, allowed: "tag:yaml.org,2002:seq", location: location, path: path)
            var items: [YAMLNode] = []
            var size = 1
            while true {
                let next = try reader.next(path: path)
                if case .sequenceEnd = next { break }
                let item = try parseNode(next, path: ConfigPath.join(path, index: items.count), depth: depth + 1)
                items.append(item.node)
                size += item.size
            }
            built = Built(node: .sequence(items, location), size: size)

        case .mappingStart(let mappingAnchor, let tag, let location):
            anchor = mappingAnchor
            try checkDepth(depth, location: location, path: path)
            checkTag(tag, allowed: "tag:yaml.org,2002:map", location: location, path: path)
            built = try parseMappingBody(location: location, path: path, depth: depth)

        default:
            throw ConfigProblem(location: nil, path: path, message: "unexpected YAML structure")
        }
        if let anchor {
            anchors[anchor] = built
        }
        return built
    }

    /// Reads key/value pairs up to MAPPING-END.
    private func parseMappingBody(location: SourceLocation, path: String, depth: Int) throws(ConfigProblem) -> Built {
        var entries: [YAMLMappingEntry] = []
        var firstSeen: [String: SourceLocation] = [:]
        var size = 1
        while true {
            let next = try reader.next(path: path)
            if case .mappingEnd = next { break }
            let key = try parseNode(next, path: path, depth: depth + 1)
            guard case .scalar(let keyScalar) = key.node else {
                // Still parse the value so the event stream stays in step.
                _ = try parseNode(try reader.next(path: path), path: path, depth: depth + 1)
                let kind = key.node.elements != nil ? "a list" : "a mapping"
                problems.append(
                    ConfigProblem(
                        location: key.node.location, path: path,
                        message: "a key must be a single value, not \(kind)"))
                continue
            }
            let valuePath = ConfigPath.join(path, key: keyScalar.value)
            let value = try parseNode(try reader.next(path: valuePath), path: valuePath, depth: depth + 1)
            if keyScalar.value == "<<" && !keyScalar.isQuoted {
                problems.append(
                    ConfigProblem(
                        location: keyScalar.location, path: path,
                        message: "merge keys (<<) are not supported; write the keys out, or use an alias (*name) for the whole mapping"))
                continue
            }
            if let first = firstSeen[keyScalar.value] {
                problems.append(
                    ConfigProblem(
                        location: keyScalar.location, path: path,
                        message:
                            "duplicate key \(keyScalar.value.quotedForMessage) on line \(keyScalar.location.line); it was first defined on line \(first.line)"
                    ))
                continue
            }
            firstSeen[keyScalar.value] = keyScalar.location
            entries.append(YAMLMappingEntry(key: keyScalar.value, keyLocation: keyScalar.location, value: value.node))
            size += value.size
        }
        return Built(node: .mapping(entries, location), size: size)
    }

    private func makeScalar(_ scalar: YAMLEvent.Scalar, path: String) -> YAMLScalar {
        var isQuoted = !scalar.isPlain
        if let tag = scalar.tag {
            if Self.stringTags.contains(tag) {
                isQuoted = true // `!!str 5` and `! 5` are text, like "5"
            } else {
                unsupportedTag(tag, location: scalar.location, path: path)
            }
        }
        return YAMLScalar(
            value: scalar.value,
            location: scalar.location,
            isQuoted: isQuoted,
            isNull: !isQuoted && Self.nullSpellings.contains(scalar.value))
    }

    private func checkTag(_ tag: String?, allowed: String, location: SourceLocation, path: String) {
        if let tag, tag != allowed {
            unsupportedTag(tag, location: location, path: path)
        }
    }

    private func unsupportedTag(_ tag: String, location: SourceLocation, path: String) {
        let shown = tag.hasPrefix("tag:yaml.org,2002:") ? "!!" + tag.dropFirst("tag:yaml.org,2002:".count) : tag
        problems.append(
            ConfigProblem(
                location: location, path: path,
                message: "YAML tags such as \(shown) are not supported (only !!str); remove the tag"))
    }

    private func checkDepth(_ depth: Int, location: SourceLocation, path: String) throws(ConfigProblem) {
        if depth >= Self.maximumDepth {
            throw ConfigProblem(
                location: location, path: path,
                message: "values are nested more than \(Self.maximumDepth) levels deep")
        }
    }
}

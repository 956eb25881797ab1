/// A parsed YAML document: scalars, sequences and mappings, each with its location.
///
/// Produced by `parseYAML(_:file:environment:)` with aliases already resolved and
/// environment variables already substituted. `YAMLNode` is itself `Decodable`
/// through `YAMLDecoder`, which hands the raw subtree over unchanged; this is how a
/// configuration is decoded in stages (see `YAMLDecoder.decodeEntries`).
public indirect enum YAMLNode: Sendable, Equatable {
    case scalar(YAMLScalar)
    /// A sequence and the location of its first item (or of `[` for a flow sequence).
    case sequence([YAMLNode], SourceLocation)
    /// A mapping, entries in file order, and the location of its first key (or of `{`).
    case mapping([YAMLMappingEntry], SourceLocation)

    public var location: SourceLocation {
        switch self {
        case .scalar(let scalar): scalar.location
        case .sequence(_, let location): location
        case .mapping(_, let location): location
        }
    }

    /// The value stored under `key` when this node is a mapping; `nil` otherwise.
    public subscript(key: String) -> YAMLNode? {
        guard case .mapping(let entries, _) = self else { return nil }
        return entries.first { $0.key == key }?.value
    }

    /// The scalar, when this node is one.
    public var scalar: YAMLScalar? {
        if case .scalar(let scalar) = self { return scalar }
        return nil
    }

    /// The entries, when this node is a mapping.
    public var entries: [YAMLMappingEntry]? {
        if case .mapping(let entries, _) = self { return entries }
        return nil
    }

    /// The items, when this node is a sequence.
    public var elements: [YAMLNode]? {
        if case .sequence(let items, _) = self { return items }
        return nil
    }

    /// `true` for a null scalar (`~`, `null`, or nothing at all).
    public var isNull: Bool {
        scalar?.isNull ?? false
    }

    /// How the node reads in a message: `"abc"`, `the quoted string "5"`,
    /// `an empty value`, `null`, `a mapping`, `a list`.
    var summary: String {
        switch self {
        case .scalar(let scalar):
            if scalar.isNull { return scalar.value.isEmpty ? "an empty value" : "null" }
            if scalar.isQuoted { return "the quoted string \(scalar.value.quotedForMessage)" }
            return scalar.value.quotedForMessage
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        }
    }
}

extension YAMLNode: Decodable {
    /// Hands over the raw node. Only `YAMLDecoder` can do this; `YAMLDecoder` itself
    /// short-circuits `YAMLNode` fields before ever calling this initializer, so that
    /// nothing inside the subtree is tracked (and nothing reported as an unknown key).
    public init(from decoder: any Decoder) throws {
        guard let node = YAMLDecoder.node(of: decoder) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath,
                    debugDescription: "YAMLNode can only be decoded by YAMLDecoder"))
        }
        self = node
    }
}

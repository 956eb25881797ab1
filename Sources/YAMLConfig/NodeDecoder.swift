/// The `Decoder` handed to `init(from:)`: one node, its dotted path and coding path.
struct NodeDecoder: Decoder {
    let node: YAMLNode
    let path: String
    let codingPath: [any CodingKey]
    let context: DecodingContext

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .mapping(let entries, let location) = node else {
            throw context.error(
                .typeMismatch([String: Any].self), "expected a mapping (key: value pairs), found \(node.summary)",
                at: node.location, path: path, codingPath: codingPath)
        }
        // From here on, every key of this mapping must be asked for by someone.
        context.track(entries, at: path)
        return KeyedDecodingContainer(KeyedNodeContainer<Key>(entries: entries, location: location, decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .sequence(let items, let location) = node else {
            var message = "expected a list, found \(node.summary)"
            if let scalar = node.scalar, !scalar.isNull {
                // Deliberately no silent wrapping of a single value into a list.
                message += "; write [\(scalar.value)] for a list with one item"
            }
            throw context.error(
                .typeMismatch([Any].self), message, at: node.location, path: path, codingPath: codingPath)
        }
        return UnkeyedNodeContainer(items: items, location: location, decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueNodeContainer(decoder: self)
    }

    /// A decoder for a node below this one.
    func child(_ node: YAMLNode, path: String, key: any CodingKey) -> NodeDecoder {
        NodeDecoder(node: node, path: path, codingPath: codingPath + [key], context: context)
    }
}

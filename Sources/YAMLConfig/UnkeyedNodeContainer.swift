/// Sequential access to a sequence's items.
struct UnkeyedNodeContainer: UnkeyedDecodingContainer {
    private let items: [YAMLNode]
    private let location: SourceLocation
    private let decoder: NodeDecoder
    private(set) var currentIndex = 0

    init(items: [YAMLNode], location: SourceLocation, decoder: NodeDecoder) {
        self.items = items
        self.location = location
        self.decoder = decoder
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    /// Moves past the item only when it is null, as the protocol requires.
    mutating func decodeNil() throws -> Bool {
        let item = try currentItem(Never.self)
        if item.node.isNull {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decodeValue(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let container = try currentItem(KeyedDecodingContainer<NestedKey>.self).container(keyedBy: type)
        currentIndex += 1
        return container
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let container = try currentItem((any UnkeyedDecodingContainer).self).unkeyedContainer()
        currentIndex += 1
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        let decoder = try currentItem((any Decoder).self)
        currentIndex += 1
        return decoder
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try decodeValue(type) }
    mutating func decode(_ type: String.Type) throws -> String { try decodeValue(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try decodeValue(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try decodeValue(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try decodeValue(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try decodeValue(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try decodeValue(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try decodeValue(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try decodeValue(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try decodeValue(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeValue(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeValue(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeValue(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeValue(type) }

    /// Decodes the current item and moves on only if that succeeded.
    private mutating func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        let item = try currentItem(type)
        let value = try decoder.context.decode(type, node: item.node, path: item.path, codingPath: item.codingPath)
        currentIndex += 1
        return value
    }

    /// A decoder for the current item, or an error when the list has no more items.
    private func currentItem(_ type: Any.Type) throws -> NodeDecoder {
        guard !isAtEnd else {
            throw decoder.context.error(
                .valueNotFound(type), "expected another item; the list has only \(items.count)",
                at: location, path: decoder.path, codingPath: codingPath + [YAMLCodingKey(intValue: currentIndex)])
        }
        return decoder.child(
            items[currentIndex], path: ConfigPath.join(decoder.path, index: currentIndex),
            key: YAMLCodingKey(intValue: currentIndex))
    }
}

/// Keyed access to a mapping. Every lookup (`decode`, `decodeIfPresent`, `contains`,
/// `decodeNil`, nested containers, `superDecoder(forKey:)`) records the key as asked
/// for, which is what tells known keys from unknown ones.
struct KeyedNodeContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    private let entries: [YAMLMappingEntry]
    private let indexByKey: [String: Int]
    /// The mapping's own location, where missing keys are reported.
    private let location: SourceLocation
    private let decoder: NodeDecoder

    init(entries: [YAMLMappingEntry], location: SourceLocation, decoder: NodeDecoder) {
        self.entries = entries
        self.location = location
        self.decoder = decoder
        // Keys are unique: the parser refuses duplicates.
        self.indexByKey = Dictionary(entries.enumerated().map { ($1.key, $0) }, uniquingKeysWith: { first, _ in first })
    }

    var codingPath: [any CodingKey] { decoder.codingPath }

    /// In file order, so that `[String: T]` decodes (and fails) top to bottom.
    var allKeys: [Key] { entries.compactMap { Key(stringValue: $0.key) } }

    func contains(_ key: Key) -> Bool {
        lookUp(key) != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        lookUp(key)?.value.isNull ?? true
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decodeValue(type, forKey: key)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let entry = lookUp(key), !entry.value.isNull else { return nil }
        return try decodeValue(type, forKey: key)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try childDecoder(required: key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try childDecoder(required: key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        superDecoder(named: YAMLCodingKey.super)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        superDecoder(named: key)
    }

    // The protocol's per-type requirements all go through the generic path, where
    // `T.self` dispatch applies the strict scalar rules.
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decodeValue(type, forKey: key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decodeValue(type, forKey: key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decodeValue(type, forKey: key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decodeValue(type, forKey: key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decodeValue(type, forKey: key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decodeValue(type, forKey: key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decodeValue(type, forKey: key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decodeValue(type, forKey: key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decodeValue(type, forKey: key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decodeValue(type, forKey: key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decodeValue(type, forKey: key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decodeValue(type, forKey: key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decodeValue(type, forKey: key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decodeValue(type, forKey: key) }

    // MARK: Helpers

    /// The entry for `key`, recording that the key was asked for.
    private func lookUp(_ key: Key) -> YAMLMappingEntry? {
        decoder.context.markAsked(key.stringValue, at: decoder.path)
        return indexByKey[key.stringValue].map { entries[$0] }
    }

    private func decodeValue<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let child = try childDecoder(required: key)
        return try decoder.context.decode(type, node: child.node, path: child.path, codingPath: child.codingPath)
    }

    private func childDecoder(required key: Key) throws -> NodeDecoder {
        guard let entry = lookUp(key) else {
            throw missingKeyError(key)
        }
        return decoder.child(entry.value, path: ConfigPath.join(decoder.path, key: entry.key), key: key)
    }

    /// A decoder for `key`'s value, or for a null at the mapping when it is missing
    /// (so `decodeNil()` on it is true), as the standard decoders do.
    private func superDecoder(named key: any CodingKey) -> NodeDecoder {
        decoder.context.markAsked(key.stringValue, at: decoder.path)
        let path = ConfigPath.join(decoder.path, key: key.stringValue)
        if let index = indexByKey[key.stringValue] {
            return decoder.child(entries[index].value, path: path, key: key)
        }
        return decoder.child(.scalar(YAMLScalar(value: "", location: location, isNull: true)), path: path, key: key)
    }

    /// `missing required key "bucket"`, located at the mapping. When a key that has not
    /// been asked for looks like a typo of the missing one, it is named too: the decode
    /// stops here, so the typo would otherwise never be reported as unknown.
    private func missingKeyError(_ key: Key) -> DecodingError {
        let name = key.stringValue
        var message = "missing required key \(name.quotedForMessage)"
        let unasked = entries.map(\.key).filter { !decoder.context.wasAsked($0, at: decoder.path) }
        if let typo = closestMatch(to: name, in: unasked) {
            message += " (is \(typo.quotedForMessage) a typo?)"
        }
        return decoder.context.error(.keyNotFound(key), message, at: location, path: decoder.path, codingPath: codingPath)
    }
}

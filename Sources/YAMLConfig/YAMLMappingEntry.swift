/// One `key: value` pair of a mapping. Mappings keep their entries in file order.
public struct YAMLMappingEntry: Sendable, Equatable {
    /// Keys are always text: YAMLConfig refuses mappings, sequences and aliases to them as keys.
    public var key: String
    public var keyLocation: SourceLocation
    public var value: YAMLNode

    public init(key: String, keyLocation: SourceLocation, value: YAMLNode) {
        self.key = key
        self.keyLocation = keyLocation
        self.value = value
    }
}

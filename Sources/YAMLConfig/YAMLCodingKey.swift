/// Coding-path keys the decoder makes itself: sequence indices and `super`.
struct YAMLCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = "Index \(intValue)"
        self.intValue = intValue
    }

    /// The key `superDecoder()` uses, as the standard decoders do.
    static let `super` = YAMLCodingKey(stringValue: "super")
}

/// An error whose description is a message meant for the person editing the config.
///
/// `ConfigDuration` and `ByteSize` throw it for text they cannot parse. A custom
/// `init(from:)` may throw it too: `YAMLDecoder` turns it (like any error) into a
/// `ConfigProblem` located at the node being decoded, with `message` as its text.
public struct ConfigValueError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// Decodes `Decodable` types from a `YAMLNode` tree, reporting every problem as a
/// located `ConfigProblem`.
///
/// Beyond a plain `Decoder`, it
/// - refuses unknown keys: after a decode, every key of a mapping decoded through a
///   keyed container that the type never asked for is reported, with a suggestion
///   for the nearest key it did ask for (`unknown key "bukcet" — did you mean "bucket"?`);
/// - is strict about scalars: booleans are only `true`/`false`, quoted scalars are
///   always strings, integers are range-checked, a scalar is never taken as a
///   one-item list;
/// - converts errors thrown by custom `init(from:)` implementations (`DecodingError`
///   or any other error, whose description becomes the message) into problems located
///   at the node being decoded.
///
/// `YAMLNode` fields receive the raw subtree, which is not checked at all; decode it
/// later with `decode(_:from:path:)` and the matching `path`, to decode a configuration in
/// stages and collect the problems of every component.
public struct YAMLDecoder: Sendable {
    public init() {}

    /// Decodes `type` from `node`.
    ///
    /// - Parameter path: the dotted path of `node` in the whole file (for example
    ///   `sinks.influx`), used as the prefix of every problem's path. Build it with
    ///   `ConfigPath.join`.
    /// - Throws: all problems found: the error that stopped decoding (Decodable stops at
    ///   the first one) plus the unknown keys of every mapping that was fully decoded.
    public func decode<T: Decodable>(_ type: T.Type, from node: YAMLNode, path: String = "") throws(ConfigProblems) -> T {
        let context = DecodingContext(root: node)
        let value: T
        do {
            value = try context.decode(T.self, node: node, path: path, codingPath: [])
        } catch {
            // Mappings whose decode finished before the failure were fully checked,
            // so their unknown keys are real and worth reporting now.
            let problems = context.problems(from: error) + context.unknownKeyProblems(completedOnly: true)
            throw ConfigProblems(sorting: problems)
        }
        let unknownKeys = context.unknownKeyProblems(completedOnly: false)
        if !unknownKeys.isEmpty {
            throw ConfigProblems(sorting: unknownKeys)
        }
        return value
    }

    /// The node a `Decoder` is decoding, when it is a `YAMLDecoder`'s.
    public static func node(of decoder: any Decoder) -> YAMLNode? {
        (decoder as? NodeDecoder)?.node
    }
}

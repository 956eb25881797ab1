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
/// later with `decode(_:from:path:)` (or `decodeEntries` / `decodeElements`) and the
/// matching `path`, to decode a configuration in stages and collect the problems of
/// every component.
public struct YAMLDecoder: Sendable {
    /// Made available to `init(from:)` implementations as `decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    public init() {}

    /// Decodes `type` from `node`.
    ///
    /// - Parameter path: the dotted path of `node` in the whole file (for example
    ///   `sinks.influx`), used as the prefix of every problem's path. Build it with
    ///   `ConfigPath.join`.
    /// - Throws: all problems found: the error that stopped decoding (Decodable stops at
    ///   the first one) plus the unknown keys of every mapping that was fully decoded.
    public func decode<T: Decodable>(_ type: T.Type, from node: YAMLNode, path: String = "") throws(ConfigProblems) -> T {
        let context = DecodingContext(root: node, userInfo: userInfo.mapValues { $0 as Any })
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

    /// Decodes `type` from `node`, appending any problems to `problems` instead of
    /// throwing; `nil` when there were problems.
    public func decode<T: Decodable>(
        _ type: T.Type, from node: YAMLNode, path: String = "", collectingInto problems: inout [ConfigProblem]
    ) -> T? {
        do throws(ConfigProblems) {
            return try decode(type, from: node, path: path)
        } catch {
            problems += error.problems
            return nil
        }
    }

    /// Decodes each value of the mapping `node` as `type`, in file order, collecting the
    /// problems of all of them. Entries with problems are left out of the result.
    /// A null node (a key with nothing under it) has no entries.
    public func decodeEntries<T: Decodable>(
        _ type: T.Type, from node: YAMLNode, path: String, collectingInto problems: inout [ConfigProblem]
    ) -> [(key: String, value: T)] {
        if node.isNull { return [] }
        guard case .mapping(let entries, _) = node else {
            problems.append(ConfigProblem(
                location: node.location, path: path,
                message: "expected a mapping (key: value pairs), found \(node.summary)"))
            return []
        }
        return entries.compactMap { entry in
            decode(type, from: entry.value, path: ConfigPath.join(path, key: entry.key), collectingInto: &problems)
                .map { (key: entry.key, value: $0) }
        }
    }

    /// Decodes each item of the sequence `node` as `type`, collecting the problems of
    /// all of them. Items with problems are left out of the result.
    /// A null node (a key with nothing under it) has no items.
    public func decodeElements<T: Decodable>(
        _ type: T.Type, from node: YAMLNode, path: String, collectingInto problems: inout [ConfigProblem]
    ) -> [T] {
        if node.isNull { return [] }
        guard case .sequence(let items, _) = node else {
            problems.append(ConfigProblem(
                location: node.location, path: path,
                message: "expected a list, found \(node.summary)"))
            return []
        }
        return items.enumerated().compactMap { index, item in
            decode(type, from: item, path: ConfigPath.join(path, index: index), collectingInto: &problems)
        }
    }

    /// The location of the node a `Decoder` is decoding, when it is a `YAMLDecoder`'s.
    /// For use in custom `init(from:)` implementations.
    public static func location(of decoder: any Decoder) -> SourceLocation? {
        (decoder as? NodeDecoder)?.node.location
    }

    /// The dotted path of the node a `Decoder` is decoding, when it is a `YAMLDecoder`'s.
    public static func path(of decoder: any Decoder) -> String? {
        (decoder as? NodeDecoder)?.path
    }

    /// The node a `Decoder` is decoding, when it is a `YAMLDecoder`'s.
    public static func node(of decoder: any Decoder) -> YAMLNode? {
        (decoder as? NodeDecoder)?.node
    }
}

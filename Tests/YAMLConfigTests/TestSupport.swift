import YAMLConfig

/// Parses `yaml` as `test.yaml` and decodes it as `T`.
func decode<T: Decodable>(
    _ type: T.Type, _ yaml: String, environment: [String: String] = [:]
) throws(ConfigProblems) -> T {
    let node = try parseYAML(yaml, file: "test.yaml", environment: environment)
    return try YAMLDecoder().decode(type, from: node)
}

/// The problems `body` throws, rendered as `ConfigProblem.description`; empty when it
/// does not throw.
func problems<T>(_ body: () throws(ConfigProblems) -> T) -> [String] {
    do {
        _ = try body()
        return []
    } catch {
        return error.problems.map(\.description)
    }
}

/// The problems of decoding `yaml` as `T`.
func decodingProblems<T: Decodable>(
    _ type: T.Type, _ yaml: String, environment: [String: String] = [:]
) -> [String] {
    problems { () throws(ConfigProblems) in try decode(type, yaml, environment: environment) }
}

/// The problems of parsing `yaml`.
func parsingProblems(_ yaml: String, environment: [String: String] = [:]) -> [String] {
    problems { () throws(ConfigProblems) in try parseYAML(yaml, file: "test.yaml", environment: environment) }
}

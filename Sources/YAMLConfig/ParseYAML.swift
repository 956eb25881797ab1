/// Parses a configuration file into a `YAMLNode` tree, using libyaml's event parser.
///
/// - An empty document (or one holding only comments or `~`) is an empty mapping.
/// - Only one document is allowed; duplicate keys, non-scalar keys, merge keys (`<<`),
///   unknown aliases and tags other than `!!str` are problems.
/// - Aliases (`*name`) are replaced by a copy of the anchored node, which keeps the
///   anchored node's locations.
/// - After parsing, `${VAR}`, `${VAR:-default}` and `$$` in scalar values are
///   substituted from `environment` (see `EnvironmentInterpolator`); the scalar keeps
///   its location and style.
///
/// Every problem that can be found is collected before throwing. A syntax error stops
/// libyaml, so it is reported together with whatever was found before it.
///
/// - Parameters:
///   - file: the name used in `SourceLocation.file`, as the user should see it.
///   - environment: usually `ProcessInfo.processInfo.environment`.
public func parseYAML(_ text: String, file: String, environment: [String: String]) throws(ConfigProblems) -> YAMLNode {
    var bytes = Array(text.utf8)
    if bytes.isEmpty {
        // libyaml asserts on a null input pointer, which an empty array may have.
        // A lone newline parses exactly like empty text: no document.
        bytes = [UInt8(ascii: "\n")]
    }
    let (parsed, parseProblems) = bytes.withUnsafeBufferPointer { buffer in
        let builder = YAMLTreeBuilder(reader: YAMLEventReader(input: buffer, file: file), file: file)
        let root = builder.build()
        return (root, builder.problems)
    }
    var problems = parseProblems
    guard let parsed else {
        throw ConfigProblems(sorting: problems)
    }
    let root = EnvironmentInterpolator(environment: environment).apply(to: parsed, path: "", problems: &problems)
    if !problems.isEmpty {
        throw ConfigProblems(sorting: problems)
    }
    return root
}

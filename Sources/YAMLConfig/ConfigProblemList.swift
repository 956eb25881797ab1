/// The mistakes found in one block of the config (a sink's, a transform's), each placed at the
/// key it is about: `problems.add("url", "…")` as the checks go, then `try problems.check()`,
/// so every mistake is reported at once.
public struct ConfigProblemList: Sendable {
    public let node: YAMLNode
    public let path: String
    public private(set) var problems: [ConfigProblem] = []

    public init(_ node: YAMLNode, path: String) {
        self.node = node
        self.path = path
    }

    public var isEmpty: Bool { problems.isEmpty }

    /// A problem with `key` of the block (located at the key when it is there, else the block).
    public mutating func add(_ key: String, _ message: String) {
        problems.append(ConfigProblem(location: node[key]?.location ?? node.location, path: "\(path).\(key)", message: message))
    }

    /// Throws every problem added, if any.
    public func check() throws(ConfigProblems) {
        if !problems.isEmpty { throw ConfigProblems(problems: problems) }
    }
}

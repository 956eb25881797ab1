/// Every problem found in a configuration, thrown together so that a user can fix
/// them all in one pass instead of one per run.
public struct ConfigProblems: Error, Sendable, Equatable, CustomStringConvertible {
    public var problems: [ConfigProblem]

    public init(problems: [ConfigProblem]) {
        self.problems = problems
    }

    /// One problem per line.
    public var description: String {
        problems.map(\.description).joined(separator: "\n")
    }
}

extension ConfigProblems {
    /// Builds the error with the problems sorted top to bottom by location
    /// (a stable sort, so problems at the same place keep the order they were found in).
    init(sorting problems: [ConfigProblem]) {
        let indexed = problems.enumerated().sorted { a, b in
            if SourceLocation.precedes(a.element.location, b.element.location) { return true }
            if SourceLocation.precedes(b.element.location, a.element.location) { return false }
            return a.offset < b.offset
        }
        self.init(problems: indexed.map(\.element))
    }
}

/// A position in a configuration file.
///
/// `line` and `column` are 1-based. They come from libyaml's marks, which count
/// columns in characters (Unicode scalars), not bytes.
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `file:line:column`, the form editors and terminals recognise as a link.
    public var description: String { "\(file):\(line):\(column)" }
}

extension SourceLocation {
    /// Orders locations by position in the file, for reporting problems top to bottom.
    static func precedes(_ lhs: SourceLocation?, _ rhs: SourceLocation?) -> Bool {
        switch (lhs, rhs) {
        case let (l?, r?):
            if l.file != r.file { return l.file < r.file }
            return (l.line, l.column) < (r.line, r.column)
        case (.some, nil):
            return true
        case (nil, _):
            return false
        }
    }
}

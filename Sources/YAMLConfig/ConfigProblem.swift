/// One thing wrong with a configuration file, located as precisely as possible.
///
/// `description` renders as `file:line:col: path: message`, for example
/// `healthgate.yaml:14:5: sinks.influx: unknown key "bukcet" — did you mean "bucket"?`.
/// The location is left out when unknown, and the path when it is the document root.
public struct ConfigProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the problem is; `nil` when it cannot be tied to the text.
    public var location: SourceLocation?
    /// Dotted key path of the node concerned (`sinks.influx.batch`, `routes[0].to`); empty for the root.
    public var path: String
    /// What is wrong and, where possible, how to fix it.
    public var message: String
    /// The environment variable whose being unset is the problem (`${NAME}` without a default).
    public var unsetVariable: String?

    public init(location: SourceLocation?, path: String, message: String, unsetVariable: String? = nil) {
        self.location = location
        self.path = path
        self.message = message
        self.unsetVariable = unsetVariable
    }

    public var description: String {
        var text = ""
        if let location { text += "\(location): " }
        if !path.isEmpty { text += "\(path): " }
        return text + message
    }
}

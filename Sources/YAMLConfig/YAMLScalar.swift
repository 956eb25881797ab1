/// A scalar from the YAML text, after environment interpolation.
public struct YAMLScalar: Sendable, Hashable {
    /// The text of the scalar (for quoted scalars, without quotes and with escapes resolved).
    public var value: String
    /// Where the scalar starts (for quoted scalars, the opening quote).
    public var location: SourceLocation
    /// `true` for single-quoted, double-quoted, literal (`|`) and folded (`>`) scalars,
    /// and for scalars tagged `!!str`. Such scalars are always text: a quoted `"5"`
    /// does not decode as a number and a quoted `"true"` not as a boolean.
    public var isQuoted: Bool
    /// `true` for a plain `~`, `null` (also `Null`, `NULL`) or an empty value.
    /// Decided from the source text, so an environment variable cannot turn a value into null.
    public var isNull: Bool

    public init(value: String, location: SourceLocation, isQuoted: Bool = false, isNull: Bool = false) {
        self.value = value
        self.location = location
        self.isQuoted = isQuoted
        self.isNull = isNull
    }
}

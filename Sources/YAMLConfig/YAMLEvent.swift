/// A libyaml parser event, copied into Swift values so that nothing refers to
/// libyaml's memory once the C event has been deleted.
enum YAMLEvent {
    struct Scalar {
        var value: String
        var anchor: String?
        var tag: String?
        /// Plain style (not quoted, not `|` or `>`).
        var isPlain: Bool
        var location: SourceLocation
    }

    case streamStart
    case streamEnd
    case documentStart(SourceLocation)
    case documentEnd
    case alias(anchor: String, location: SourceLocation)
    case scalar(Scalar)
    case sequenceStart(anchor: String?, tag: String?, location: SourceLocation)
    case sequenceEnd
    case mappingStart(anchor: String?, tag: String?, location: SourceLocation)
    case mappingEnd
}

import CYAML

/// Owns a libyaml event parser (`yaml_parser_t`) reading from a UTF-8 buffer.
///
/// The buffer is borrowed: libyaml keeps a pointer to it, so it must stay valid
/// for the reader's whole life (`parseYAML` keeps the reader inside
/// `withUnsafeBufferPointer`). The reader is used on one thread and never escapes.
final class YAMLEventReader {
    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private let initialized: Bool
    private let input: UnsafeBufferPointer<UInt8>
    private let file: String

    /// - Precondition: `input.baseAddress` is not nil (libyaml asserts on a null input).
    init(input: UnsafeBufferPointer<UInt8>, file: String) {
        precondition(input.baseAddress != nil, "libyaml needs a non-null input buffer")
        self.input = input
        self.file = file
        parser = .allocate(capacity: 1)
        // Fails only when libyaml cannot allocate its buffers.
        initialized = yaml_parser_initialize(parser) == 1
        if initialized {
            yaml_parser_set_input_string(parser, input.baseAddress, input.count)
        }
    }

    deinit {
        if initialized { yaml_parser_delete(parser) }
        parser.deallocate()
    }

    /// The next event, or a problem describing the syntax error that stopped libyaml.
    /// After an error libyaml cannot continue, so callers stop at the first throw.
    func next(path: String) throws(ConfigProblem) -> YAMLEvent {
        guard initialized else {
            throw ConfigProblem(location: nil, path: path, message: "out of memory while starting the YAML parser")
        }
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) == 1 else {
            throw syntaxProblem(path: path)
        }
        defer { yaml_event_delete(&event) }

        let location = self.location(event.start_mark)
        switch event.type {
        case YAML_STREAM_START_EVENT:
            return .streamStart
        case YAML_STREAM_END_EVENT:
            return .streamEnd
        case YAML_DOCUMENT_START_EVENT:
            return .documentStart(location)
        case YAML_DOCUMENT_END_EVENT:
            return .documentEnd
        case YAML_ALIAS_EVENT:
            return .alias(anchor: Self.string(event.data.alias.anchor) ?? "", location: location)
        case YAML_SCALAR_EVENT:
            let data = event.data.scalar
            // Scalar values may contain NUL (from "\0" escapes), so use the length, not strlen.
            let value = String(decoding: UnsafeBufferPointer(start: data.value, count: data.length), as: UTF8.self)
            return .scalar(
                YAMLEvent.Scalar(
                    value: value,
                    anchor: Self.string(data.anchor),
                    tag: Self.string(data.tag),
                    isPlain: data.style == YAML_PLAIN_SCALAR_STYLE,
                    location: location))
        case YAML_SEQUENCE_START_EVENT:
            let data = event.data.sequence_start
            return .sequenceStart(anchor: Self.string(data.anchor), tag: Self.string(data.tag), location: location)
        case YAML_SEQUENCE_END_EVENT:
            return .sequenceEnd
        case YAML_MAPPING_START_EVENT:
            let data = event.data.mapping_start
            return .mappingStart(anchor: Self.string(data.anchor), tag: Self.string(data.tag), location: location)
        case YAML_MAPPING_END_EVENT:
            return .mappingEnd
        default:
            // YAML_NO_EVENT is never returned by a successful yaml_parser_parse.
            throw ConfigProblem(location: location, path: path, message: "unexpected YAML parser event \(event.type.rawValue)")
        }
    }

    /// libyaml marks are 0-based; SourceLocation is 1-based.
    private func location(_ mark: yaml_mark_t) -> SourceLocation {
        SourceLocation(file: file, line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    /// Turns libyaml's error fields into a problem, e.g.
    /// `YAML syntax error: mapping values are not allowed in this context`, or
    /// `YAML syntax error: did not find expected key (while parsing a block mapping that starts at line 3, column 1)`.
    private func syntaxProblem(path: String) -> ConfigProblem {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "unknown error"
        switch state.error {
        case YAML_MEMORY_ERROR:
            return ConfigProblem(location: nil, path: path, message: "out of memory while parsing YAML")
        case YAML_READER_ERROR:
            // Reader errors (bad encoding, control characters) carry a byte offset, not a mark.
            var message = "cannot read the text: \(problem)"
            if state.problem_value != -1 {
                message += " (character code \(state.problem_value))"
            }
            return ConfigProblem(location: location(ofByte: state.problem_offset), path: path, message: message)
        default:
            var message = "YAML syntax error: \(problem)"
            if let context = state.context.map({ String(cString: $0) }) {
                let mark = location(state.context_mark)
                message += " (\(context) that starts at line \(mark.line), column \(mark.column))"
            }
            let at = location(state.problem_mark)
            // libyaml's words first said plainly, for the mistakes people make.
            let index = Int(state.problem_mark.index)
            if index < input.count && input[index] == 0x09 {
                message = "a tab: YAML indents with spaces only; put spaces where the tab is (\(message))"
            } else if problem == "did not find expected key" || problem == "did not find expected '-' indicator" {
                message =
                    "line \(at.line) is not indented like the lines before it: the keys of one block start in the same "
                    + "column, and what belongs to a key sits further right (\(message))"
            } else if problem == "mapping values are not allowed in this context" {
                message =
                    "a \": \" where no key can start: a value with \": \" in it needs quotes, or the line is indented "
                    + "too far (\(message))"
            }
            return ConfigProblem(location: at, path: path, message: message)
        }
    }

    /// Line and column (in characters) of a byte offset in the input.
    private func location(ofByte offset: Int) -> SourceLocation {
        var line = 1, column = 1
        for byte in input.prefix(offset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0b1100_0000 != 0b1000_0000 {
                // Count only the first byte of each UTF-8 sequence.
                column += 1
            }
        }
        return SourceLocation(file: file, line: line, column: column)
    }
}

/// State shared by every `Decoder` and container of one `YAMLDecoder.decode` call:
/// which keys each mapping was asked for, and which decodes finished.
///
/// Mappings are identified by their dotted path, which is unique within one decode
/// (aliased copies sit at different paths and are checked separately). When several
/// containers read the same mapping (say a `kind` discriminator, then the chosen
/// type's fields), the keys they ask for are merged.
///
/// Decoding is synchronous and never leaves the calling thread, so this class needs
/// no locking and is not `Sendable`.
final class DecodingContext {
    private struct TrackedMapping {
        let entries: [YAMLMappingEntry]
        /// Keys asked for, in the order first asked (the order listed in messages).
        var asked: [String] = []
        var askedSet: Set<String> = []
    }

    let root: YAMLNode
    private var mappings: [String: TrackedMapping] = [:]
    /// Paths of `mappings` in the order they were first read, so that reports do not
    /// depend on dictionary order (an alias puts two mappings at the same location).
    private var trackingOrder: [String] = []
    /// Paths of nodes whose `init(from:)` returned.
    private var completed: Set<String> = []

    init(root: YAMLNode) {
        self.root = root
    }

    // MARK: Decoding

    /// Decodes any value: builtin scalars and `YAMLNode` directly, everything else
    /// through its `init(from:)`, whose errors are located here, at the innermost node
    /// that knows where it is.
    func decode<T: Decodable>(_ type: T.Type, node: YAMLNode, path: String, codingPath: [any CodingKey]) throws -> T {
        if let value = try decodeBuiltin(T.self, node: node, path: path, codingPath: codingPath) {
            return value
        }
        do {
            let value = try T(from: NodeDecoder(node: node, path: path, codingPath: codingPath, context: self))
            completed.insert(path)
            return value
        } catch {
            throw located(error, decoding: T.self, node: node, path: path, codingPath: codingPath)
        }
    }

    // MARK: Key tracking

    func track(_ entries: [YAMLMappingEntry], at path: String) {
        if mappings[path] == nil {
            mappings[path] = TrackedMapping(entries: entries)
            trackingOrder.append(path)
        }
    }

    func markAsked(_ key: String, at path: String) {
        guard mappings[path]?.askedSet.insert(key).inserted == true else { return }
        mappings[path]?.asked.append(key)
    }

    func wasAsked(_ key: String, at path: String) -> Bool {
        mappings[path]?.askedSet.contains(key) ?? false
    }

    /// An `unknown key` problem for every key of a tracked mapping that was never asked
    /// for. With `completedOnly`, only mappings whose decode finished are considered:
    /// a decode that stopped half-way has not asked for all its keys yet.
    func unknownKeyProblems(completedOnly: Bool) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        for path in trackingOrder where !completedOnly || completed.contains(path) {
            guard let mapping = mappings[path] else { continue }
            let present = Set(mapping.entries.map(\.key))
            // Suggest only keys the user has not written already.
            let absent = mapping.asked.filter { !present.contains($0) }
            for entry in mapping.entries where !mapping.askedSet.contains(entry.key) {
                let key = entry.key.quotedForMessage
                let message: String
                if let suggestion = closestMatch(to: entry.key, in: absent) {
                    message = "unknown key \(key) — did you mean \(suggestion.quotedForMessage)?"
                } else if mapping.asked.isEmpty {
                    message = "unknown key \(key); no keys are expected here"
                } else {
                    message = "unknown key \(key); valid keys are: \(mapping.asked.joined(separator: ", "))"
                }
                problems.append(ConfigProblem(location: entry.keyLocation, path: path, message: message))
            }
        }
        return problems
    }

    // MARK: Errors

    /// The problems an error thrown out of `decode` stands for.
    func problems(from error: any Error) -> [ConfigProblem] {
        if let problems = error as? ConfigProblems { return problems.problems }
        if let problem = (error as? DecodingError)?.yamlContext.underlyingError as? ConfigProblem {
            return [problem]
        }
        // Errors are located by `decode` before they get here; this is a last resort.
        let located = self.located(error, decoding: Any.self, node: root, path: "", codingPath: [])
        if let problem = (located as? DecodingError)?.yamlContext.underlyingError as? ConfigProblem {
            return [problem]
        }
        return [ConfigProblem(location: root.location, path: "", message: String(describing: error))]
    }

    /// A `DecodingError` carrying a located `ConfigProblem` as its underlying error.
    /// Containers throw these, so that custom `init(from:)` code that catches
    /// `DecodingError` keeps working, while the problem's location survives.
    func error(
        _ kind: DecodingErrorKind, _ message: String, at location: SourceLocation, path: String, codingPath: [any CodingKey]
    ) -> DecodingError {
        let problem = ConfigProblem(location: location, path: path, message: message)
        let context = DecodingError.Context(codingPath: codingPath, debugDescription: message, underlyingError: problem)
        switch kind {
        case .typeMismatch(let type): return .typeMismatch(type, context)
        case .valueNotFound(let type): return .valueNotFound(type, context)
        case .keyNotFound(let key): return .keyNotFound(key, context)
        case .dataCorrupted: return .dataCorrupted(context)
        }
    }

    enum DecodingErrorKind {
        case typeMismatch(Any.Type)
        case valueNotFound(Any.Type)
        case keyNotFound(any CodingKey)
        case dataCorrupted
    }

    /// Attaches a location to an error thrown while decoding `node`, unless it has one.
    ///
    /// A `DecodingError` from a custom `init(from:)` (or the standard library) names a
    /// coding path; the node it refers to is found by walking from `node` along the part
    /// of that path below `codingPath`. Any other error is placed at `node` itself, with
    /// its description as the message.
    private func located(
        _ error: any Error, decoding type: Any.Type, node: YAMLNode, path: String, codingPath: [any CodingKey]
    ) -> any Error {
        if error is ConfigProblems { return error }
        if let problem = error as? ConfigProblem {
            return DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: codingPath, debugDescription: problem.message, underlyingError: problem))
        }
        guard let decodingError = error as? DecodingError else {
            return self.error(.dataCorrupted, String(describing: error), at: node.location, path: path, codingPath: codingPath)
        }
        let context = decodingError.yamlContext
        if context.underlyingError is ConfigProblem { return error }

        let (target, targetPath) = Self.walk(from: node, path: path, below: codingPath, along: context.codingPath)
        let message: String
        let kind: DecodingErrorKind
        switch decodingError {
        case .keyNotFound(let key, _):
            message = "missing required key \(key.stringValue.quotedForMessage)"
            kind = .keyNotFound(key)
        case .typeMismatch(let expected, _):
            message = context.debugDescription
            kind = .typeMismatch(expected)
        case .valueNotFound(let expected, _):
            message = context.debugDescription
            kind = .valueNotFound(expected)
        default:
            message =
                Self.invalidEnumMessage(decodingError, decoding: type, node: node, codingPath: codingPath)
                ?? (context.debugDescription.isEmpty ? "invalid value \(target.summary)" : context.debugDescription)
            kind = .dataCorrupted
        }
        return self.error(kind, message, at: target.location, path: targetPath, codingPath: context.codingPath)
    }

    /// Follows the coding-path components after `base` down from `node`, as far as the
    /// tree allows, and returns the node reached and its dotted path.
    private static func walk(
        from node: YAMLNode, path: String, below base: [any CodingKey], along full: [any CodingKey]
    ) -> (YAMLNode, String) {
        guard full.count >= base.count,
            zip(base, full).allSatisfy({ $0.stringValue == $1.stringValue })
        else {
            return (node, path)
        }
        var current = node, currentPath = path
        for key in full.dropFirst(base.count) {
            switch current {
            case .mapping(let entries, _):
                guard let entry = entries.first(where: { $0.key == key.stringValue }) else { return (current, currentPath) }
                current = entry.value
                currentPath = ConfigPath.join(currentPath, key: entry.key)
            case .sequence(let items, _):
                guard let index = key.intValue, items.indices.contains(index) else { return (current, currentPath) }
                current = items[index]
                currentPath = ConfigPath.join(currentPath, index: index)
            case .scalar:
                return (current, currentPath)
            }
        }
        return (current, currentPath)
    }

    /// The standard library's `RawRepresentable` decoding fails with
    /// "Cannot initialize X from invalid String value y"; say instead which values are
    /// valid (when the type is `CaseIterable`) or which one was probably meant.
    private static func invalidEnumMessage(
        _ error: DecodingError, decoding type: Any.Type, node: YAMLNode, codingPath: [any CodingKey]
    ) -> String? {
        guard case .dataCorrupted(let context) = error,
            context.codingPath.count == codingPath.count,
            context.debugDescription.hasPrefix("Cannot initialize "),
            type is any RawRepresentable.Type,
            let scalar = node.scalar
        else {
            return nil
        }
        let value = scalar.value.quotedForMessage
        guard let iterable = type as? any CaseIterable.Type else {
            return "invalid value \(value) for \(type)"
        }
        let options = caseNames(of: iterable)
        if let suggestion = closestMatch(to: scalar.value, in: options) {
            return "invalid value \(value) — did you mean \(suggestion.quotedForMessage)?"
        }
        return "invalid value \(value); expected one of: \(options.joined(separator: ", "))"
    }

    private static func caseNames<C: CaseIterable>(of type: C.Type) -> [String] {
        type.allCases.map { value in
            if let raw = value as? any RawRepresentable { return "\(raw.rawValue)" }
            return "\(value)"
        }
    }
}

extension DecodingError {
    /// The context of any case (the standard library offers no accessor).
    var yamlContext: Context {
        switch self {
        case .typeMismatch(_, let context), .valueNotFound(_, let context),
            .keyNotFound(_, let context), .dataCorrupted(let context):
            return context
        @unknown default:
            return Context(codingPath: [], debugDescription: String(describing: self))
        }
    }
}

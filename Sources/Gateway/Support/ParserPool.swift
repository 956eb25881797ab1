import FastJSON
import Synchronization

/// simdjson parsers are not thread-safe and are costly to create (their buffers grow to the
/// largest document), so each worker borrows one for a request and gives it back.
public final class ParserPool: Sendable {
    private let free = Mutex<[UnsafeSendableParser]>([])

    public init() {}

    public func withParser<R>(_ body: (JSONParser) throws -> R) rethrows -> R {
        let p = free.withLock { $0.popLast() } ?? UnsafeSendableParser(JSONParser())
        defer { free.withLock { $0.append(p) } }
        return try body(p.parser)
    }
}

/// A parser is only used by one thread at a time: the pool hands it out exclusively.
struct UnsafeSendableParser: @unchecked Sendable {
    let parser: JSONParser
    init(_ p: JSONParser) { parser = p }
}

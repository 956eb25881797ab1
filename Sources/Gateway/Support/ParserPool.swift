import CLinux
import FastJSON
import Glibc
import HealthgateCore
import Posix
import CanonicalJSON

/// simdjson parsers are not thread-safe and hold buffers as large as the largest document
/// they parsed (several MB for a 1 MB body). Parsing is pure CPU work, so more parsers than
/// cores only costs memory: the pool lends at most `limit` at once and makes the rest wait.
public final class ParserPool: @unchecked Sendable {
    private let monitor = Monitor()
    private var free: [JSONParser] = []
    private var lent = 0
    public let limit: Int

    public init(limit: Int = ParserPool.cores) {
        self.limit = max(1, limit)
    }

    public static var cores: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// Parsers that have read a body larger than this are not kept.
    static let keepBelow = 2 << 20

    public func withParser<R>(_ body: (JSONParser) throws -> R) rethrows -> R {
        monitor.lock()
        while lent >= limit { monitor.wait() }
        lent += 1
        let parser = free.popLast() ?? JSONParser()
        monitor.unlock()
        defer {
            // A parser that read an outsized body holds buffers its size: let it go, and give
            // the memory back to the system, instead of keeping it for the next small body.
            let outsized = parser.largestInput > ParserPool.keepBelow
            monitor.withLock {
                if !outsized { free.append(parser) }
                lent -= 1
                monitor.broadcast()
            }
            if outsized { MemoryRelief.giveBack() }
        }
        return try body(parser)
    }
}

extension JSONParser {
    /// Parses a request body and hands the document on; a body that is not JSON gets the 400
    /// every JSON receiver answers, with simdjson's reason.
    func withBody(_ body: [UInt8], _ then: (JSONDocument) -> Reception) -> Reception {
        let doc: JSONDocument
        do {
            // In place when the server left room after it (`HTTPRequest.bodySlack`): no copy.
            doc = try parse(paddedIfRoom: body)
        } catch {
            return .unreadable(status: 400, reason: "the body is not valid JSON: \(error)")
        }
        if let key = doc.duplicateKey {
            return .unreadable(
                status: 400,
                reason: "the body has the key \"\(QuarantinedRecord.name(key))\" twice in one object; "
                    + "send each key once")
        }
        return then(doc)
    }
}

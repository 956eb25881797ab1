import CanonicalJSON
import HealthgateCore

/// A receiver turns one sender's HTTP requests into canonical records.
///
/// Guarantees the gateway gives a receiver:
/// - `receive` is called on the HTTP server's worker threads, possibly for several requests
///   at once; a receiver keeps no per-request state between calls.
/// - The body is complete and within `maxBodyBytes`; oversized bodies never reach it.
/// - What `receive` returns as `.accept` is appended to the journal whole, fsynced, and only
///   then is `reply` sent. If the append fails, the client gets a 503 and nothing of the
///   request is kept.
///
/// What a receiver promises: it checks who is sending before it reads the body; it never
/// drops a record silently (bad records go to `quarantined` with a reason); it never logs a
/// token, a secret or a health value.
public protocol Receiver: Sendable {
    /// The name in the config; every record's `receiver` field.
    var name: String { get }
    /// The URL paths this receiver answers (`POST` only).
    var paths: [String] { get }
    var maxBodyBytes: Int { get }
    func receive(_ request: HTTPRequest, context: ReceiveContext) -> Reception
    /// Checks what can be checked from the headers alone (the token), before the body is read,
    /// so an unauthenticated client cannot make the gateway buffer its body. nil to go on.
    func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse?
}

extension Receiver {
    public func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse? { nil }
}

/// What a receiver needs from the gateway for one request.
public struct ReceiveContext: Sendable {
    /// The time signatures are checked against (`HEALTHGATE_NOW` replaces it in tests).
    public var now: Timestamp

    public init(now: Timestamp) {
        self.now = now
    }
}

/// What a receiver decided about one request.
public enum Reception: Sendable {
    /// Store these records durably, then answer with `reply`.
    case accept(ReceivedBatch, reply: HTTPResponse)
    /// Answer now and store nothing (Check connection requests, auth failures).
    case answer(HTTPResponse)
    /// Refuse the request (401/403, a bad signature, say) and store nothing; `reason` says why,
    /// for the gateway's log of refusals (never a credential).
    case refused(HTTPResponse, reason: String)
    /// The body could not be read at all: answer with a problem document, keep the raw body
    /// in quarantine (size-capped) with the reason.
    case unreadable(status: Int, reason: String)
}

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
}

/// What a receiver needs from the gateway for one request.
public struct ReceiveContext: Sendable {
    /// The time signatures are checked against (`HEALTHGATE_NOW` replaces it in tests).
    public var now: Timestamp

    public init(now: Timestamp) { self.now = now }
}

/// What a receiver decided about one request.
public enum Reception: Sendable {
    /// Store these records durably, then answer with `reply`.
    case accept(ReceivedBatch, reply: HTTPResponse)
    /// Answer now and store nothing (Check connection requests, auth failures).
    case answer(HTTPResponse)
    /// The body could not be read at all: answer with a problem document, keep the raw body
    /// in quarantine (size-capped) with the reason.
    case unreadable(status: Int, reason: String)
}

public struct ReceivedBatch: Sendable {
    public var records: [CanonicalRecord]
    public var quarantined: [QuarantinedRecord]

    public init(records: [CanonicalRecord] = [], quarantined: [QuarantinedRecord] = []) {
        self.records = records
        self.quarantined = quarantined
    }
}

/// A record that made no sense, kept with the reason beside the good ones.
public struct QuarantinedRecord: Sendable, Equatable {
    public var reason: String
    /// The record as it came, as compact JSON (or a JSON string holding a CSV/line-protocol line).
    public var raw: RawJSON

    public init(reason: String, raw: RawJSON) {
        self.reason = reason
        self.raw = raw
    }
}

/// A sink delivers canonical records to one outside system.
///
/// Guarantees the gateway gives a sink:
/// - `write` is called by the sink's own queue drainer, one call at a time, never
///   concurrently, with records in journal order; it is never called once `close` has been.
/// - The same records can be written again after a restart or a `keep` (delivery is at
///   least once); a sink that stores by key `(device, uuid[, part])` makes repeats harmless,
///   and applies an `op: delete` record to every part stored under the key.
///
/// What a sink promises: it never buffers or retries on its own (its disk queue does); when
/// `write` returns `.accepted` for a record, that record is durably in the destination.
public protocol Sink: AnyObject, Sendable {
    var name: String { get }
    func write(_ batch: SinkBatch) -> SinkWriteResult
    /// Releases connections and files. Called once, after the last `write`.
    func close()
}

/// The records of one `write`, in journal order.
public struct SinkBatch: Sendable {
    public var records: [CanonicalRecord]
    /// Per record, its canonical NDJSON line (with the line feed) as the journal holds it, when
    /// no transform changed the record on its way; nil otherwise. Sinks that write canonical
    /// NDJSON copy these bytes instead of encoding the record again.
    public var lines: [ArraySlice<UInt8>?]

    public init(records: [CanonicalRecord], lines: [ArraySlice<UInt8>?]? = nil) {
        self.records = records
        self.lines = lines ?? Array(repeating: nil, count: records.count)
    }

    public var count: Int { records.count }
}

/// The outcome of one `write`.
public enum SinkWriteResult: Sendable, Equatable {
    /// Every record is delivered.
    case accepted
    /// Nothing is delivered; try the whole batch again later (network errors, 5xx, 429, 401/403).
    case keep(reason: String, retryAfterSeconds: Double?)
    /// One outcome per record, in order.
    case perRecord([DeliveryOutcome])
}

public enum DeliveryOutcome: Sendable, Equatable {
    case accepted
    case keep(reason: String)
    /// The destination will never take this record: it goes to the sink's dead letters.
    case rejected(reason: String)
}

/// A transform, as the config builds it: checked, `Sendable`, holding no state. Each sink
/// drainer that a route leads to makes its own instance (`instantiate`), which may keep state.
public protocol TransformSpec: Sendable {
    /// The name in a route's `transforms` list ("filter").
    var kind: String { get }
    /// The fields that the records this transform passes on may differ in from the record it
    /// got: sinks reuse the journal's bytes of every other field. Empty for transforms that
    /// only keep or drop records (a filter, dedupe): records they pass are unchanged, and sinks
    /// reuse all their bytes. Default `.all`.
    var changes: CanonicalRecord.Fields { get }
    /// The fields of a record the transform reads. With no other need for them (the sink's
    /// `BuiltSink.reads`, the fields a route changes), the drainer leaves the rest of each
    /// journal record unread. Default `.all`; a transform that keeps state or
    /// emits records of its own needs all.
    var reads: CanonicalRecord.Fields { get }
    func instantiate(_ context: TransformContext) -> any Transform
}

extension TransformSpec {
    public var changes: CanonicalRecord.Fields { .all }
    public var reads: CanonicalRecord.Fields { .all }
}

/// A transform at work on one sink's drainer thread (not `Sendable`: it never leaves it).
///
/// `process` passes a record on by calling `emit` — zero times (dropped from this route: a
/// choice of the config, counted, not a loss), once (as it is, or changed), or more (derived
/// records, e.g. an aggregate, each with a stable key so that a repeat overwrites). `tick` is
/// called when no batch waits, with the clock's time, to emit what time alone decides (a
/// day that has closed).
///
/// State: what `saveState` returns is written together with the sink's cursor, atomically,
/// after the records it reflects were delivered; after a crash, `restoreState` gets the last
/// one written and the records after it are processed again. So a crash at any moment neither
/// drops a record from the state nor counts one twice. See Pipeline/Delivery/QUEUES.md.
public protocol Transform: AnyObject {
    func process(_ record: CanonicalRecord, emit: (CanonicalRecord) -> Void)
    /// True for a transform that makes at most one record of each, keeping no state (filter,
    /// rename, convert, tag, drop): a route of such transforms runs them on one copy of the
    /// record, in place, through `map`. Default false.
    var maps: Bool { get }
    /// The record changed in place: the fields this record now differs in (the route believes
    /// no more of it than the spec's `changes`), nil to drop it. Only asked when `maps` is
    /// true. A transform that says exactly what it changed lets sinks reuse more of the
    /// journal's bytes: a convert that leaves a heart rate as it is says `[]`.
    func map(_ record: inout CanonicalRecord) -> CanonicalRecord.Fields?
    func tick(now: Timestamp, emit: (CanonicalRecord) -> Void)
    /// Called after each batch's records went through `process`, before they are delivered: to
    /// emit once what the batch changed (an aggregate's buckets). Default: nothing.
    func flush(emit: (CanonicalRecord) -> Void)
    /// The state to commit with the cursor; nil for a transform that keeps none (the default).
    func saveState() -> [UInt8]?
    /// The state committed last (only called when some was).
    func restoreState(_ bytes: [UInt8]) throws(TransformStateError)
}

extension Transform {
    public var maps: Bool { false }

    public func map(_ record: inout CanonicalRecord) -> CanonicalRecord.Fields? {
        var out: CanonicalRecord?
        process(record) { out = $0 }
        guard let out else { return nil }
        record = out
        return .all
    }

    public func tick(now: Timestamp, emit: (CanonicalRecord) -> Void) {}
    public func flush(emit: (CanonicalRecord) -> Void) {}
    public func saveState() -> [UInt8]? { nil }
    public func restoreState(_ bytes: [UInt8]) throws(TransformStateError) {}
}

public struct TransformStateError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
}

/// What a transform instance gets: where it runs, the clock, the tz database, a logger.
public struct TransformContext: Sendable {
    public var route: String
    public var sink: String
    public var clock: any Clock
    public var timeZones: any TimeZoneLookup
    public var logger: Logger

    public init(route: String, sink: String, clock: any Clock, timeZones: any TimeZoneLookup, logger: Logger) {
        self.route = route
        self.sink = sink
        self.clock = clock
        self.timeZones = timeZones
        self.logger = logger
    }
}

/// UTC offsets of IANA zones ("Europe/Budapest"); the system's is `Posix.SystemTimeZones`.
public protocol TimeZoneLookup: Sendable {
    /// Seconds east of UTC at the instant, or nil for an unknown zone.
    func utcOffset(zone: String, at unixSeconds: Int64) -> Int?
}

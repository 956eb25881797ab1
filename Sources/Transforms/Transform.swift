import CanonicalJSON
import HealthgateCore

/// A transform, as the config builds it: checked, `Sendable`, holding no state. Each sink
/// drainer that a route leads to makes its own instance (`instantiate`), which may keep state.
public protocol TransformSpec: Sendable {
    /// The name in a route's `transforms` list ("filter").
    var kind: String { get }
    func instantiate(_ context: TransformContext) -> any Transform
}

/// A transform at work on one sink's drainer thread (not `Sendable`: it never leaves it).
///
/// `process` passes a record on by calling `emit` — zero times (dropped from this route: a
/// choice of the config, counted, not a loss), once (as it is, or changed), or more (derived
/// records, e.g. an aggregate, each with a stable key so that a repeat overwrites). A record
/// changed keeps its journal line for every field not changed (`Record`): a transform reads and
/// sets fields and need say nothing of which. `tick` is called when no batch waits, with the
/// clock's time, to emit what time alone decides (a day that has closed).
///
/// State: what `saveState` returns is written together with the sink's cursor, atomically,
/// after the records it reflects were delivered; after a crash, `restoreState` gets the last
/// one written and the records after it are processed again. So a crash at any moment neither
/// drops a record from the state nor counts one twice. See Pipeline/Delivery/QUEUES.md.
public protocol Transform: AnyObject {
    func process(_ record: consuming Record, emit: (consuming Record) -> Void)
    func tick(now: Timestamp, emit: (consuming Record) -> Void)
    /// Called after each batch's records went through `process`, before they are delivered: to
    /// emit once what the batch changed (an aggregate's buckets). Default: nothing.
    func flush(emit: (consuming Record) -> Void)
    /// The state to commit with the cursor; nil for a transform that keeps none (the default).
    func saveState() -> [UInt8]?
    /// The state committed last (only called when some was).
    func restoreState(_ bytes: [UInt8]) throws(TransformStateError)
}

extension Transform {
    public func tick(now: Timestamp, emit: (consuming Record) -> Void) {}
    public func flush(emit: (consuming Record) -> Void) {}
    public func saveState() -> [UInt8]? { nil }
    public func restoreState(_ bytes: [UInt8]) throws(TransformStateError) {}
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

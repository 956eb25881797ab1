import HealthgateCore
import CanonicalJSON

/// A sink delivers canonical records to one outside system. Its life, as the pipeline runs it:
///
/// 1. **Built** from its config (`SinkRegistry` → `BuiltSink`): validation only. No socket, no
///    file, no thread — `check`, `status`, `link`, `write` and `delete` build every sink and
///    touch no destination.
/// 2. **Opened** by `serve` on the sink's own drainer thread (`BuiltSink.open`), with a
///    `SinkContext`: its state directory, the clock, a logger. The instance lives and dies on
///    that thread: `Sink` is deliberately not `Sendable`, so the compiler refuses to let it be
///    shared. One `serve` per data dir (its lock) means one writer per sink, ever.
/// 3. **Written**: `write` is called one batch at a time, with records in journal order. The
///    same records can be written again after a restart or a `keep` (delivery is at least
///    once); a sink that stores by key `(device, uuid[, part])` makes repeats harmless, and
///    applies an `op: delete` record to every part stored under the key.
/// 4. **Idle**: `idle` is called when no batch waits (at most every `SinkContext.idleInterval`),
///    to keep a connection alive or flush; `probe` is asked now and then whether the
///    destination is reachable (for `/healthz` and `status`).
/// 5. **Closed** once, after the last `write`, within the shutdown deadline.
///
/// What a sink promises: it never buffers or retries on its own (its disk queue does); when
/// `write` returns `.accepted` for a record, that record is durably in the destination.
public protocol Sink: AnyObject {
    func write(_ batch: SinkBatch) -> SinkWriteResult
    /// Work on a batch that needs none of the sink's state (its encoding), which the drainer
    /// does on another thread while the batch before is written; `write` finds what it made in
    /// `batch.prepared` — or nothing, and does that work itself (a batch written again in part,
    /// say). Default: none.
    var prepare: (@Sendable (SinkBatch) -> any Sendable)? { get }
    /// Called on the drainer thread when no batch waits. Default: nothing.
    func idle()
    /// Whether the destination can be reached now; cheap (a connect, an access check).
    func probe() -> Reachability
    /// Releases connections and files. Called once, after the last `write`.
    func close()
    /// State the sink keeps to do its work (the MQTT sink's entity states) of the devices in
    /// `devices`, committed atomically with its cursor after each delivered batch, so that it
    /// always reflects exactly the records before the cursor. Default: none.
    func saveState(of devices: DeviceScope) -> [UInt8]?
    /// The state committed last of the devices in `devices`, which replaces what the sink has
    /// of them (empty bytes: none). One machine gives it once, right after `open`, for `.all`;
    /// a fleet worker gives each partition's when it claims the partition.
    func restoreState(_ bytes: [UInt8], of devices: DeviceScope) throws(SinkOpenError)
    /// What the sink says of itself for `status` and `/metrics` (asked after each write, idle
    /// and probe): a line such as the schema version, and counters since it opened. Default: none.
    func report() -> SinkReport?
}

/// A sink's own word for `status` and `/metrics`.
public struct SinkReport: Sendable, Equatable {
    public var detail: String?
    /// Counts since the sink opened, e.g. `inserted`, `unchanged`: in `/metrics` as
    /// `healthgate_sink_<name>_total{sink=…}`.
    public var counters: [Counter]

    public struct Counter: Sendable, Equatable {
        public var name: String
        public var value: Int
    }

    public init(detail: String?, counters: [(String, Int)]) {
        self.detail = detail
        self.counters = counters.map { Counter(name: $0.0, value: $0.1) }
    }
}

extension Sink {
    public var prepare: (@Sendable (SinkBatch) -> any Sendable)? { nil }
    public func idle() {}
    public func probe() -> Reachability { .unknown }
    public func saveState(of devices: DeviceScope) -> [UInt8]? { nil }
    public func restoreState(_ bytes: [UInt8], of devices: DeviceScope) throws(SinkOpenError) {}
    public func report() -> SinkReport? { nil }
}

/// What a sink's probe found.
public enum Reachability: Sendable, Equatable {
    case unknown
    case reachable
    case unreachable(String)
    /// It answers, and keeps refusing the writes for a reason that is not the records' (a wrong
    /// endpoint, refused credentials, no such database): its records wait until that is fixed.
    case failing(String)

    public var word: String {
        switch self {
        case .unknown: "unknown"
        case .reachable: "reachable"
        case .unreachable: "unreachable"
        case .failing: "failing"
        }
    }

    /// What is wrong, when something is.
    public var problem: String? {
        switch self {
        case .unreachable(let why), .failing(let why): why
        case .unknown, .reachable: nil
        }
    }
}

/// What a sink gets when it is opened.
public struct SinkContext: Sendable {
    public var name: String
    /// `data_dir`: relative paths in the sink's config are resolved against it.
    public var dataDir: String
    /// `data_dir/sinks/<name>/`: the sink's own files (indexes, state). Exists when `open` runs.
    public var stateDir: String
    public var clock: any Clock
    public var logger: Logger

    public init(name: String, dataDir: String, stateDir: String, clock: any Clock, logger: Logger) {
        self.name = name
        self.dataDir = dataDir
        self.stateDir = stateDir
        self.clock = clock
        self.logger = logger
    }
}

/// A sink that could not be opened: the drainer says why and tries again with backoff.
public struct SinkOpenError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
}

/// A configured sink, checked and not yet opened: its kind, its queue settings, a line for
/// `healthgate check`, and how to open it.
public struct BuiltSink: Sendable {
    public var kind: String
    public var common: SinkCommonConfig
    public var summary: String
    public var open: @Sendable (SinkContext) throws(SinkOpenError) -> any Sink
    /// For a sink that keeps records where they can be read back (postgres): how to reach them,
    /// for the read API. Its type is the sink's own.
    public var readable: (any Sendable)?

    public init(
        kind: String, common: SinkCommonConfig, summary: String, readable: (any Sendable)? = nil,
        open: @escaping @Sendable (SinkContext) throws(SinkOpenError) -> any Sink
    ) {
        self.kind = kind
        self.common = common
        self.summary = summary
        self.readable = readable
        self.open = open
    }
}

/// What a sink builder gets besides its config.
public struct SinkBuildContext: Sendable {
    /// Relative sink paths are resolved against the data dir.
    public var dataDir: String

    public init(dataDir: String) {
        self.dataDir = dataDir
    }
}

/// The records of one `write`, in journal order: each read from its journal line as the sink
/// asks for its fields, and written as its line (`appendLine`) with only what a route changed
/// written anew.
public struct SinkBatch: Sendable {
    public var records: [Record]
    /// What the sink's `prepare` made of exactly these records, when it ran.
    public var prepared: (any Sendable)?

    public init(records: [Record], prepared: (any Sendable)? = nil) {
        self.records = records
        self.prepared = prepared
    }

    /// A batch of records made of their fields (tests, and records with no journal line).
    public init(records: [CanonicalRecord]) {
        self.records = records.map(Record.init)
    }

    /// Appends record `i`'s canonical line, with its line feed.
    public func appendLine(_ i: Int, to out: inout [UInt8]) {
        records[i].appendLine(to: &out)
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

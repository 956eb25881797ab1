import HealthgateCore
import Posix
import SinkKit
import Synchronization

/// What `/metrics` and `status` show about one sink's queue.
public final class SinkMetrics: Sendable {
    public let name: String
    public let sent = Atomic<Int>(0)
    public let kept = Atomic<Int>(0)
    /// The records of the batch being retried now (0 when none is): of those waiting.
    public let inRetry = Atomic<Int>(0)
    public let rejected = Atomic<Int>(0)
    /// Rejected records past `dead_letters.max_bytes`: kept as their keys and reason only
    /// (`keysOnly`), or not written at all (`uncounted` past the keys' own room).
    public let deadLettersKeysOnly = Atomic<Int>(0)
    public let deadLettersNotKept = Atomic<Int>(0)
    public let filtered = Atomic<Int>(0)
    /// Records dropped unsent because the sink was over `queue.max_bytes` with `drop_oldest`.
    public let dropped = Atomic<Int>(0)
    public let batches = Atomic<Int>(0)
    /// The next journal entry this sink will read, and how many of its records are done.
    public let cursorSeq = Atomic<UInt64>(0)
    public let cursorSkip = Atomic<Int>(0)
    /// The next entry of the sink's inbox (`replay --sink` beside `serve`) it will deliver.
    public let inboxSeq = Atomic<UInt64>(1)
    /// When the next try of a failed batch is due (Unix seconds; 0 when not retrying).
    public let nextRetryAt = Atomic<Int64>(0)
    private let lastErrorText = Locked<String?>(nil)
    private let reachable = Locked<Reachability>(.unknown)
    private let reported = Locked<SinkReport?>(nil)
    private let pausedBy = Locked<CrashGuard.Pause?>(nil)

    public init(name: String) { self.name = name }

    public var lastError: String? {
        get { lastErrorText.withLock { $0 } }
        set { lastErrorText.withLock { $0 = newValue } }
    }

    /// What the sink said of itself last (`Sink.report`).
    public var report: SinkReport? {
        get { reported.withLock { $0 } }
        set { reported.withLock { $0 = newValue } }
    }

    /// Why the sink is paused by the crash-loop guard (nil: it is not).
    public var paused: CrashGuard.Pause? {
        get { pausedBy.withLock { $0 } }
        set { pausedBy.withLock { $0 = newValue } }
    }

    /// What the sink's last probe (or write) said of its destination.
    public var reachability: Reachability {
        get { reachable.withLock { $0 } }
        set { reachable.withLock { $0 = newValue } }
    }
}

import Glibc
import HealthgateCore
import YAMLConfig

/// The keys every sink takes besides its own: how its disk queue batches, retries and fills.
public struct SinkCommonConfig: Sendable, Equatable {
    public var batch: BatchConfig
    public var retry: RetryConfig
    public var queue: QueueConfig

    public init(
        batch: BatchConfig? = nil, retry: RetryConfig? = nil, queue: QueueConfig? = nil,
        defaultMaxItems: Int = 1000
    ) {
        self.batch = batch ?? BatchConfig()
        if self.batch.max_items == nil { self.batch.max_items = defaultMaxItems }
        self.retry = retry ?? RetryConfig()
        self.queue = queue ?? QueueConfig()
    }
}

public struct BatchConfig: Decodable, Sendable, Equatable {
    /// Most records in one write.
    public var max_items: Int?
    /// How long a partial batch waits for more records before it is written.
    public var max_wait: ConfigDuration?

    public init(max_items: Int? = nil, max_wait: ConfigDuration? = nil) {
        self.max_items = max_items
        self.max_wait = max_wait
    }

    public var maxItems: Int { max(1, max_items ?? 1000) }
    public var maxWaitSeconds: Double { max_wait?.seconds ?? 0.2 }
}

public struct RetryConfig: Decodable, Sendable, Equatable {
    /// The first wait after a failure; it doubles up to `max`, with full jitter.
    public var initial: ConfigDuration?
    public var max: ConfigDuration?

    public init(initial: ConfigDuration? = nil, max: ConfigDuration? = nil) {
        self.initial = initial
        self.max = max
    }

    public var initialSeconds: Double { initial?.seconds ?? 1 }
    public var maxSeconds: Double { self.max?.seconds ?? 300 }

    /// The longest wait after `failures` failed tries in a row: `initial` doubling up to `max`
    /// (the wait itself is drawn from 0 up to it: full jitter).
    public func cap(afterFailures failures: Int) -> Double {
        Swift.min(maxSeconds, initialSeconds * pow(2, Double(Swift.min(Swift.max(failures, 1) - 1, 30))))
    }
}

/// How much may wait for a sink, and what happens beyond it: `block` (the default) answers 503
/// with Retry-After to the receivers that feed the sink, so phones keep their data; `drop_oldest`
/// drops the oldest waiting records unsent (for live-only sinks), counting every one.
public struct QueueConfig: Decodable, Sendable, Equatable {
    public enum WhenFull: String, Decodable, Sendable, CaseIterable {
        case block
        case drop_oldest
    }

    public var max_bytes: ByteSize?
    public var when_full: WhenFull?

    public init(max_bytes: ByteSize? = nil, when_full: WhenFull? = nil) {
        self.max_bytes = max_bytes
        self.when_full = when_full
    }
}

extension SinkCommonConfig {
    /// The common keys as a sink kind decoded them, checked: settings that would do nothing
    /// are refused rather than ignored.
    public static func checked(
        batch: BatchConfig?, retry: RetryConfig?, queue: QueueConfig?, node: YAMLNode,
        path: String, defaultMaxItems: Int
    ) throws(ConfigProblems) -> SinkCommonConfig {
        var problems: [ConfigProblem] = []
        if let q = queue, q.when_full != nil, q.max_bytes == nil {
            problems.append(
                ConfigProblem(
                    location: node["queue"]?.location ?? node.location, path: path + ".queue",
                    message: "when_full applies once max_bytes is reached: set queue.max_bytes too"))
        }
        if let n = batch?.max_items, n < 1 {
            problems.append(
                ConfigProblem(
                    location: node["batch"]?.location ?? node.location, path: path + ".batch.max_items",
                    message: "max_items must be at least 1"))
        }
        if let i = retry?.initial, let m = retry?.max, i > m {
            problems.append(
                ConfigProblem(
                    location: node["retry"]?.location ?? node.location, path: path + ".retry",
                    message: "retry.initial (\(i)) is longer than retry.max (\(m))"))
        }
        if !problems.isEmpty { throw ConfigProblems(problems: problems) }
        return SinkCommonConfig(batch: batch, retry: retry, queue: queue, defaultMaxItems: defaultMaxItems)
    }
}

extension SinkCommonConfig {
    /// The common keys checked together with the problems a sink found in its own keys: every
    /// problem at once, or the common config.
    public static func checked(
        batch: BatchConfig?, retry: RetryConfig?, queue: QueueConfig?, node: YAMLNode, path: String,
        defaultMaxItems: Int, adding problems: [ConfigProblem]
    ) throws(ConfigProblems) -> SinkCommonConfig {
        let common: SinkCommonConfig
        do throws(ConfigProblems) {
            common = try checked(batch: batch, retry: retry, queue: queue, node: node, path: path, defaultMaxItems: defaultMaxItems)
        } catch {
            throw ConfigProblems(problems: problems + error.problems)
        }
        if !problems.isEmpty { throw ConfigProblems(problems: problems) }
        return common
    }
}

import CanonicalJSON
import Glibc
import HealthgateCore
import Posix
import SinkKit

/// Writes one batch to a sink until every record is accepted or rejected: what the sink keeps
/// is tried again after an exponential backoff with full jitter (`Retry-After` honoured), what
/// it rejects goes to the dead letters. Shared by the sink drainers and `healthgate replay`.
/// Time comes from `clock`: a test's fake clock makes the backoff instant.
public struct BatchDelivery {
    let sink: any Sink
    let name: String
    let retry: RetryConfig
    let metrics: SinkMetrics
    let deadLetters: DeadLetters
    let logger: Logger
    let clock: any WaitClock
    private var rng = SystemRandomNumberGenerator()
    /// The log says when a sink starts failing, when its reason changes, and then once a minute
    /// while it goes on failing — not at every retry.
    private var lastWarning: (at: Double, reason: String)?
    static let repeatWarningEvery = 60.0

    public init(
        sink: any Sink, name: String, retry: RetryConfig, metrics: SinkMetrics, deadLetters: DeadLetters,
        logger: Logger, clock: any WaitClock
    ) {
        self.sink = sink
        self.name = name
        self.retry = retry
        self.metrics = metrics
        self.deadLetters = deadLetters
        self.logger = logger
        self.clock = clock
    }

    public enum Outcome {
        case delivered
        /// `wait` said to stop.
        case stopped
        /// `abandon` said to give the batch up.
        case abandoned
    }

    /// `wait(seconds)` sleeps and returns false to stop; `abandon()` is asked while waiting.
    /// `prepared`: what the sink's `prepare` made of these records (for the first write).
    public mutating func deliver(
        _ given: [Record], prepared: (any Sendable)? = nil, wait: (Double) -> Bool,
        abandon: () -> Bool = { false }
    ) -> Outcome {
        var batch = given
        var attempt = 0
        var prepared = prepared
        while !batch.isEmpty {
            let result = sink.write(SinkBatch(records: batch, prepared: prepared.take()))
            metrics.batches.add(1, ordering: .relaxed)
            metrics.report = sink.report()
            var retryAfter: Double?
            var reason = ""
            var keep: [Int] = []
            switch result {
            case .accepted:
                metrics.sent.add(batch.count, ordering: .relaxed)
            case .keep(let why, let after):
                keep = Array(0..<batch.count)
                reason = why
                retryAfter = after
            case .perRecord(let outcomes):
                var rejected: [Int] = []
                var why: [String] = []
                for (i, outcome) in outcomes.prefix(batch.count).enumerated() {
                    switch outcome {
                    case .accepted:
                        metrics.sent.add(1, ordering: .relaxed)
                    case .keep(let why):
                        keep.append(i)
                        reason = why
                    case .rejected(let reason):
                        rejected.append(i)
                        why.append(reason)
                    }
                }
                // The batch's rejected records in one write and one log line.
                if !rejected.isEmpty && !deadLetters.keep(rejected.enumerated().map { (batch[$0.element], why[$0.offset]) }) {
                    // Not kept anywhere yet: try the records again rather than lose them.
                    keep = (keep + rejected).sorted()
                    reason = "rejected records could not be written to the dead letters"
                }
                if outcomes.count < batch.count {
                    keep.append(contentsOf: outcomes.count..<batch.count)
                    reason = "the sink answered for fewer records than it was given"
                }
            }
            if keep.isEmpty {
                metrics.inRetry.store(0, ordering: .relaxed)
                metrics.reachability = .reachable
                if attempt > 0 {
                    lastWarning = nil
                    logger.info("sink \(name): delivering again after \(attempt) failed attempt(s)")
                    metrics.lastError = nil
                    metrics.nextRetryAt.store(0, ordering: .relaxed)
                }
                return .delivered
            }
            // The destination took none of the batch: the sink is failing (shown in status,
            // /healthz, the status page) until a write goes through.
            if keep.count == batch.count {
                if case .unreachable = metrics.reachability {} else { metrics.reachability = .failing(reason) }
            }
            if keep.count != batch.count { batch = keep.map { batch[$0] } }
            metrics.kept.add(batch.count, ordering: .relaxed)
            metrics.inRetry.store(batch.count, ordering: .relaxed)
            metrics.lastError = reason
            attempt += 1
            let cap = retry.cap(afterFailures: attempt)
            let pause = retryAfter ?? Double.random(in: 0...cap, using: &rng)
            metrics.nextRetryAt.store(clock.now().seconds + Int64(pause.rounded(.up)), ordering: .relaxed)
            let now = clock.monotonicSeconds()
            if let last = lastWarning, last.reason == reason, now - last.at < BatchDelivery.repeatWarningEvery {
                // Said already.
            } else {
                let again = lastWarning?.reason == reason ? "still failing after \(attempt) attempt(s): " : ""
                logger.warning(
                    "sink \(name): \(again)\(reason); \(batch.count) record(s) kept, retrying in \(formatSeconds(pause))"
                        + (attempt == 1 ? " (said again once a minute while it lasts)" : ""))
                lastWarning = (now, reason)
            }
            // Wait in short steps, so that a sink asked to give the batch up can do so.
            let until = clock.monotonicSeconds() + max(pause, 0.001)
            while clock.monotonicSeconds() < until {
                if !wait(max(0.001, min(0.5, until - clock.monotonicSeconds()))) { return .stopped }
                if abandon() {
                    metrics.nextRetryAt.store(0, ordering: .relaxed)
                    metrics.inRetry.store(0, ordering: .relaxed)
                    return .abandoned
                }
            }
        }
        return .delivered
    }
}

public func formatSeconds(_ s: Double) -> String {
    s < 1 ? "\(Int(s * 1000)) ms" : s < 120 ? "\(Int(s.rounded())) s" : "\(Int((s / 60).rounded())) min"
}

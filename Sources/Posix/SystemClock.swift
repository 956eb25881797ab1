import Glibc
import HealthgateCore

/// The real clock.
public struct SystemClock: Clock {
    public init() {}

    public func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(seconds: Int64(ts.tv_sec), nanoseconds: Int32(ts.tv_nsec))
    }
}

/// Monotonic seconds, for measuring durations and deadlines.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The time the pipeline waits by: the real one sleeps on a monitor; a test's fake clock
/// moves its own time forward instead, so backoff tests do not sleep.
public protocol WaitClock: Clock {
    /// Seconds on a clock that only goes forward, for deadlines.
    func monotonicSeconds() -> Double
    /// Waits up to `seconds` on `monitor`, whose lock the caller holds (a broadcast ends the
    /// wait early).
    func wait(on monitor: Monitor, seconds: Double)
}

extension SystemClock: WaitClock {
    public func monotonicSeconds() -> Double { Posix.monotonicSeconds() }

    public func wait(on monitor: Monitor, seconds: Double) { monitor.wait(seconds: seconds) }
}

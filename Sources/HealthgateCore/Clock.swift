#if canImport(Glibc)
import Glibc
#endif

/// The time source. `HEALTHGATE_NOW` and tests plug in a fixed clock.
public protocol Clock: Sendable {
    func now() -> Timestamp
}

public struct SystemClock: Clock {
    public init() {}

    public func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(seconds: Int64(ts.tv_sec), nanoseconds: Int32(ts.tv_nsec))
    }
}

public struct FixedClock: Clock {
    public var time: Timestamp

    public init(_ time: Timestamp) { self.time = time }

    public func now() -> Timestamp { time }
}

/// Monotonic seconds, for measuring durations and deadlines.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

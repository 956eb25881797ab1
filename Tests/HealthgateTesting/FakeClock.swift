import Foundation
import HealthgateCore
import Posix
import Synchronization

/// A clock that tests move by hand: `wait` advances it by the time asked and returns at once,
/// so backoff, Retry-After and dead-letter times are exercised without sleeping. It keeps
/// every wait it was asked for.
public final class FakeClock: WaitClock, Sendable {
    private let state: Mutex<(nanos: Int64, waits: [Double])>

    public init(_ start: Timestamp = Timestamp(seconds: 1_800_000_000)) {
        state = Mutex((start.unixNanoseconds, []))
    }

    public func now() -> Timestamp {
        let n = state.withLock { $0.nanos }
        return Timestamp(seconds: n / 1_000_000_000, nanoseconds: Int32(n % 1_000_000_000))
    }

    public func monotonicSeconds() -> Double { Double(state.withLock { $0.nanos }) / 1e9 }

    public func wait(on monitor: Monitor, seconds: Double) {
        advance(seconds)
        state.withLock { $0.waits.append(seconds) }
    }

    public func advance(_ seconds: Double) {
        state.withLock { $0.nanos += Int64(seconds * 1e9) }
    }

    /// Every wait asked of the clock, in order.
    public var waits: [Double] { state.withLock { $0.waits } }

    /// The time the waits added up to.
    public var waited: Double { waits.reduce(0, +) }
}

/// The real clock moved by the whole seconds written in a file (re-read at every reading), so a
/// test can send a running `healthgate-testserve` across a phone's midnight: it writes the file
/// named by `HEALTHGATE_TEST_CLOCK_SHIFT`. Waits and deadlines stay real.
public struct ShiftedClock: WaitClock {
    public let file: String

    public init(file: String) { self.file = file }

    public func now() -> Timestamp {
        let real = SystemClock().now()
        guard let bytes = try? FileIO.readAll(file),
            let shift = Int64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else { return real }
        return Timestamp(seconds: real.seconds + shift, nanoseconds: real.nanoseconds)
    }

    public func monotonicSeconds() -> Double { Posix.monotonicSeconds() }

    public func wait(on monitor: Monitor, seconds: Double) { monitor.wait(seconds: seconds) }

    /// Moves the clock of a serve started with `HEALTHGATE_TEST_CLOCK_SHIFT=file` so that it
    /// reads `to` now.
    public static func set(file: String, to: Timestamp) throws {
        let shift = to.seconds - SystemClock().now().seconds
        try FileIO.writeAtomically(file, Array("\(shift)\n".utf8))
    }
}

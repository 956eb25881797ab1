/// The time source. `HEALTHGATE_NOW` and tests plug in a fixed clock.
public protocol Clock: Sendable {
    func now() -> Timestamp
}

public struct FixedClock: Clock {
    public var time: Timestamp

    public init(_ time: Timestamp) { self.time = time }

    public func now() -> Timestamp { time }
}

import HealthgateCore

/// A configured route: the receivers it takes from, its transforms in order, its sinks.
public struct Route: Sendable {
    public var name: String
    public var from: [Glob]
    public var transforms: [any Transform]
    public var to: [String]

    public init(name: String, from: [Glob], transforms: [any Transform], to: [String]) {
        self.name = name
        self.from = from
        self.transforms = transforms
        self.to = to
    }

    public func takes(receiver: String) -> Bool { from.contains { $0.matches(receiver) } }

    /// True when records come out of this route exactly as they went in (or not at all).
    public var keepsRecordsUnchanged: Bool { !transforms.contains { $0.changesRecords } }

    /// The record as this route delivers it, or nil when a transform drops it.
    public func apply(_ record: CanonicalRecord) -> CanonicalRecord? {
        if transforms.isEmpty { return record }
        var r = record
        for t in transforms where !t.apply(&r) { return nil }
        return r
    }
}

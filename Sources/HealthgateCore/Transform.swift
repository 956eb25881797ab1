/// A transform changes or drops records on their way from a route's receivers to its sinks.
///
/// `apply` is called from sink drainer threads, possibly concurrently for different sinks, so
/// a transform holds no mutable state. Returning false drops the record from this route only;
/// that is a choice of the config, not a loss, and is counted.
public protocol Transform: Sendable {
    func apply(_ record: inout CanonicalRecord) -> Bool
    /// False for transforms that only keep or drop records (a filter): records they pass are
    /// unchanged, so sinks may reuse their journal bytes. Default true.
    var changesRecords: Bool { get }
}

extension Transform {
    public var changesRecords: Bool { true }
}

import HealthgateCore

/// Keeps the records whose type matches one of `types` (all when absent) and none of
/// `exclude_types`. Deletions pass by the same rule, so a deleted sample reaches the sinks
/// that hold it.
public struct FilterTransform: Transform {
    let include: [Glob]
    let exclude: [Glob]

    public init(types: [String]?, excludeTypes: [String]?) {
        include = (types ?? []).map(Glob.init)
        exclude = (excludeTypes ?? []).map(Glob.init)
    }

    public var changesRecords: Bool { false }

    public func apply(_ record: inout CanonicalRecord) -> Bool {
        if !include.isEmpty && !include.contains(where: { $0.matches(record.type) }) { return false }
        return !exclude.contains { $0.matches(record.type) }
    }
}

public struct FilterTransformConfig: Decodable, Sendable {
    public var types: [String]?
    public var exclude_types: [String]?
}

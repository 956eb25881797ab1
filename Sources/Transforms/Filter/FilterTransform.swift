import HealthgateCore

/// Keeps the records whose type matches one of `types` (all when absent) and none of
/// `exclude_types`. Deletions pass by the same rule, so a deleted sample reaches the sinks
/// that hold it. Stateless.
public struct FilterTransform: TransformSpec {
    let include: [Glob]
    let exclude: [Glob]

    public init(types: [String]?, excludeTypes: [String]?) {
        include = (types ?? []).map(Glob.init)
        exclude = (excludeTypes ?? []).map(Glob.init)
    }

    public var kind: String { "filter" }
    public var changesRecords: Bool { false }

    public func instantiate(_ context: TransformContext) -> any Transform { Instance(spec: self) }

    public func keeps(_ record: CanonicalRecord) -> Bool {
        if !include.isEmpty && !include.contains(where: { $0.matches(record.type) }) { return false }
        return !exclude.contains { $0.matches(record.type) }
    }

    final class Instance: Transform {
        let spec: FilterTransform
        init(spec: FilterTransform) { self.spec = spec }

        func process(_ record: CanonicalRecord, emit: (CanonicalRecord) -> Void) {
            if spec.keeps(record) { emit(record) }
        }
    }
}

public struct FilterTransformConfig: Decodable, Sendable {
    public var types: [String]?
    public var exclude_types: [String]?
}

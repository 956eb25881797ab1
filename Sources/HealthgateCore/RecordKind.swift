/// The kinds of record, and which kind a type name belongs to when the body does not say.
///
/// Quantities and categories come from the type registry (`HealthTypes`); the other kinds
/// are named by their type.
public enum RecordKind {
    public static let quantity = "quantity"
    public static let category = "category"
    public static let workout = "workout"
    public static let characteristic = "characteristic"

    /// Kinds whose type name is the kind itself.
    public static let namedKinds: Set<String> = [
        "workout", "characteristic", "state_of_mind", "gad7_assessment", "phq9_assessment",
        "audiogram", "activity_summary", "workout_route", "heartbeat_series", "ecg", "clinical_record"
    ]

    /// Whether records of `kind` come in parts, keyed by `(device, uuid, part)`: workout routes
    /// and heartbeat series. Compared, not hashed: asked per record.
    @inlinable public static func isPartedKind(_ kind: String) -> Bool {
        kind == "workout_route" || kind == "heartbeat_series"
    }
    /// Whether samples of `kind` may come as one instant (given a start and no end, they end at
    /// their start): quantities, categories, states of mind. Compared, not hashed: asked per record.
    @inlinable public static func isInstantKind(_ kind: String) -> Bool {
        kind == quantity || kind == category || kind == "state_of_mind"
    }

    /// The kind of a type named in a deletion or a body that gives no other hint.
    public static func kind(ofType type: String) -> String {
        if namedKinds.contains(type) { return type }
        if let t = HealthTypes.named(type) { return t.kind == .category ? category : quantity }
        return quantity
    }
}

extension RecordKind {
    /// HealthKit's numeric value of a category value, from the type registry.
    public static func categoryCode(type: String, name: String) -> Int? {
        HealthTypes.named(type)?.code(forValue: name)
    }
}

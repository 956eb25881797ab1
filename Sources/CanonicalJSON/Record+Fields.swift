import HealthgateCore

/// The fields of a record, as `CanonicalRecord` names them: each read from the line when first
/// asked for, each set only in this record (and written anew in its line).
extension Record {
    @inlinable public var op: CanonicalRecord.Op {
        get { box.need(.op); return box.values.op }
        set { changing(.op).values.op = newValue }
    }
    @inlinable public var kind: String {
        get { box.need(.kind); return box.values.kind }
        set { changing(.kind).values.kind = newValue }
    }
    @inlinable public var device: String {
        get { box.need(.device); return box.values.device }
        set { changing(.device).values.device = newValue }
    }
    @inlinable public var receiver: String {
        get { box.need(.receiver); return box.values.receiver }
        set { changing(.receiver).values.receiver = newValue }
    }
    @inlinable public var uuid: String {
        get { box.need(.uuid); return box.values.uuid }
        set { changing(.uuid).values.uuid = newValue }
    }
    @inlinable public var type: String {
        get { box.need(.type); return box.values.type }
        set { changing(.type).values.type = newValue }
    }
    @inlinable public var part: Int? {
        get { box.need(.part); return box.values.part }
        set { changing(.part).values.part = newValue }
    }
    @inlinable public var parts: Int? {
        get { box.need(.parts); return box.values.parts }
        set { changing(.parts).values.parts = newValue }
    }
    @inlinable public var start: Timestamp? {
        get { box.need(.start); return box.values.start }
        set { changing(.start).values.start = newValue }
    }
    @inlinable public var end: Timestamp? {
        get { box.need(.end); return box.values.end }
        set { changing(.end).values.end = newValue }
    }
    @inlinable public var utcOffset: Int? {
        get { box.need(.utcOffset); return box.values.utcOffset }
        set { changing(.utcOffset).values.utcOffset = newValue }
    }
    @inlinable public var timeZone: String? {
        get { box.need(.timeZone); return box.values.timeZone }
        set { changing(.timeZone).values.timeZone = newValue }
    }
    @inlinable public var value: RecordValue? {
        get { box.need(.value); return box.values.value }
        set { changing(.value).values.value = newValue }
    }
    @inlinable public var unit: String? {
        get { box.need(.unit); return box.values.unit }
        set { changing(.unit).values.unit = newValue }
    }
    @inlinable public var code: Int? {
        get { box.need(.code); return box.values.code }
        set { changing(.code).values.code = newValue }
    }
    @inlinable public var activity: String? {
        get { box.need(.activity); return box.values.activity }
        set { changing(.activity).values.activity = newValue }
    }
    @inlinable public var durationS: Double? {
        get { box.need(.durationS); return box.values.durationS }
        set { changing(.durationS).values.durationS = newValue }
    }
    @inlinable public var energyKcal: Double? {
        get { box.need(.energyKcal); return box.values.energyKcal }
        set { changing(.energyKcal).values.energyKcal = newValue }
    }
    @inlinable public var distanceM: Double? {
        get { box.need(.distanceM); return box.values.distanceM }
        set { changing(.distanceM).values.distanceM = newValue }
    }
    @inlinable public var fields: [RecordField] {
        get { box.need(.fields); return box.values.fields }
        set { changing(.fields).values.fields = newValue }
    }
    @inlinable public var source: RecordSource? {
        get { box.need(.source); return box.values.source }
        set { changing(.source).values.source = newValue }
    }
    @inlinable public var tags: [RecordTag] {
        get { box.need(.tags); return box.values.tags }
        set { changing(.tags).values.tags = newValue }
    }
    @inlinable public var metadata: RawJSON? {
        get { box.need(.metadata); return box.values.metadata }
        set { changing(.metadata).values.metadata = newValue }
    }
    @inlinable public var extra: [RecordField] {
        get { box.need(.extra); return box.values.extra }
        set { changing(.extra).values.extra = newValue }
    }
}

/// One sample, deletion or part in the canonical stream: what routes, transforms and sinks
/// see, and (as NDJSON) what the journal holds, the file sink writes and `replay` reads.
///
/// The key of a record is `(device, uuid)`, or `(device, uuid, part)` for parted kinds.
/// Nothing a sender sent is dropped: fields that have no place here are kept under
/// `extra`, and kind-specific fields (a heartbeat series' `beats`, a workout's `events`)
/// under `fields`, both as compact JSON.
public struct CanonicalRecord: Sendable, Equatable {
    public enum Op: String, Sendable, Equatable {
        case upsert
        case delete
    }

    public var op: Op = .upsert
    /// `quantity`, `category`, `workout`, `characteristic`, `state_of_mind`, … (see `RecordKind`).
    public var kind: String
    public var device: String
    public var receiver: String
    public var uuid: String
    /// The Syncky snake_case type name (`steps`, `heart_rate`, `sleep_analysis`, `workout`, …).
    public var type: String
    public var start: Timestamp?
    public var end: Timestamp?
    /// The sample's own UTC offset in seconds, when the sender knew it.
    public var utcOffset: Int?
    /// Quantities: a number in `unit`. Categories: the value's name. Characteristics: the value.
    public var value: RecordValue?
    public var unit: String?
    public var source: RecordSource?
    public var metadata: RawJSON?
    /// Labels routes add (`tag` transform), in the order given; sinks use them (InfluxDB tags,
    /// a PostgreSQL column, the canonical JSON of files, webhooks and MQTT records).
    public var tags: [RecordTag] = []
    /// Fields that belong to the record's kind, in the order the sender gave them.
    public var fields: [RecordField] = []
    /// Fields that have no place in the canonical record, kept as they came.
    public var extra: [RecordField] = []
    /// The fields few records have (a part's place, a category's code, a workout's activity and
    /// totals, a named time zone), out of line: nil when the record has none of them, so that
    /// most records do not carry their room. Copied on write; nil again when the last one is set
    /// to nil, so that equal records are equal however they were made.
    @usableFromInline var rare: RareFields?

    /// Parted kinds: which part this is, from 0, and of how many.
    @inlinable public var part: Int? {
        get { rare?.part }
        set { if newValue != nil || rare != nil { changeRare { $0.part = newValue } } }
    }
    @inlinable public var parts: Int? {
        get { rare?.parts }
        set { if newValue != nil || rare != nil { changeRare { $0.parts = newValue } } }
    }
    /// Categories: HealthKit's numeric value.
    @inlinable public var code: Int? {
        get { rare?.code }
        set { if newValue != nil || rare != nil { changeRare { $0.code = newValue } } }
    }
    /// The sample's IANA time zone (`Europe/Budapest`), when the sender named it.
    @inlinable public var timeZone: String? {
        get { rare?.timeZone }
        set { if newValue != nil || rare != nil { changeRare { $0.timeZone = newValue } } }
    }
    @inlinable public var activity: String? {
        get { rare?.activity }
        set { if newValue != nil || rare != nil { changeRare { $0.activity = newValue } } }
    }
    @inlinable public var durationS: Double? {
        get { rare?.durationS }
        set { if newValue != nil || rare != nil { changeRare { $0.durationS = newValue } } }
    }
    @inlinable public var energyKcal: Double? {
        get { rare?.energyKcal }
        set { if newValue != nil || rare != nil { changeRare { $0.energyKcal = newValue } } }
    }
    @inlinable public var distanceM: Double? {
        get { rare?.distanceM }
        set { if newValue != nil || rare != nil { changeRare { $0.distanceM = newValue } } }
    }

    @inlinable mutating func changeRare(_ change: (RareFields) -> Void) {
        if rare == nil {
            rare = RareFields()
        } else if !isKnownUniquelyReferenced(&rare) {
            rare = rare!.copy()
        }
        change(rare!)
        if rare!.isEmpty { rare = nil }
    }

    /// A record of a kind with its key and type, nothing else yet: what a mapper fills field by
    /// field, in place (the initialiser below, with all its arguments, copies the record it builds
    /// out of itself: each string retained, then released).
    @inlinable public init(kind: String, device: String, receiver: String, uuid: String, type: String) {
        self.kind = kind
        self.device = device
        self.receiver = receiver
        self.uuid = uuid
        self.type = type
    }

    @inlinable public init(
        op: Op = .upsert, kind: String, device: String, receiver: String, uuid: String, type: String,
        part: Int? = nil, parts: Int? = nil, start: Timestamp? = nil, end: Timestamp? = nil,
        utcOffset: Int? = nil, value: RecordValue? = nil, unit: String? = nil, code: Int? = nil,
        activity: String? = nil, durationS: Double? = nil, energyKcal: Double? = nil,
        distanceM: Double? = nil, source: RecordSource? = nil, metadata: RawJSON? = nil,
        fields: [RecordField] = [], extra: [RecordField] = []
    ) {
        self.op = op
        self.kind = kind
        self.device = device
        self.receiver = receiver
        self.uuid = uuid
        self.type = type
        self.part = part
        self.parts = parts
        self.start = start
        self.end = end
        self.utcOffset = utcOffset
        self.value = value
        self.unit = unit
        self.code = code
        self.activity = activity
        self.durationS = durationS
        self.energyKcal = energyKcal
        self.distanceM = distanceM
        self.source = source
        self.metadata = metadata
        self.fields = fields
        self.extra = extra
    }
}

extension CanonicalRecord {
    /// A record with nothing in it: what a reader fills field by field, and what is left where a
    /// record was moved out of an array.
    public static let empty = CanonicalRecord(kind: "", device: "", receiver: "", uuid: "", type: "")
}

/// `CanonicalRecord`'s out-of-line fields. Changed only through `changeRare`, which copies
/// one that is shared first: a record's value semantics hold, and one shared between threads is
/// only read.
@usableFromInline final class RareFields: @unchecked Sendable, Equatable {
    @usableFromInline var part: Int?
    @usableFromInline var parts: Int?
    @usableFromInline var code: Int?
    @usableFromInline var activity: String?
    @usableFromInline var timeZone: String?
    @usableFromInline var durationS: Double?
    @usableFromInline var energyKcal: Double?
    @usableFromInline var distanceM: Double?

    @inlinable init() {}

    @inlinable func copy() -> RareFields {
        let c = RareFields()
        c.part = part
        c.parts = parts
        c.code = code
        c.activity = activity
        c.timeZone = timeZone
        c.durationS = durationS
        c.energyKcal = energyKcal
        c.distanceM = distanceM
        return c
    }

    @inlinable var isEmpty: Bool {
        part == nil && parts == nil && code == nil && activity == nil && timeZone == nil && durationS == nil && energyKcal == nil
            && distanceM == nil
    }

    @inlinable static func == (a: RareFields, b: RareFields) -> Bool {
        a === b
            || (a.part == b.part && a.parts == b.parts && a.code == b.code && a.activity == b.activity
                && a.timeZone == b.timeZone && a.durationS == b.durationS && a.energyKcal == b.energyKcal && a.distanceM == b.distanceM)
    }
}

public enum RecordValue: Sendable, Equatable {
    case number(Double)
    case string(String)

    public var number: Double? {
        if case .number(let d) = self { return d }
        return nil
    }

    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }
}

public struct RecordSource: Sendable, Equatable {
    public var app: String?
    public var device: String?

    public init(app: String?, device: String?) {
        self.app = app
        self.device = device
    }
}

/// A named field whose value is kept as compact JSON text.
/// A label: `person: alice`.
public struct RecordTag: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

public struct RecordField: Sendable, Equatable {
    public var name: String
    public var value: RawJSON

    public init(_ name: String, _ value: RawJSON) {
        self.name = name
        self.value = value
    }
}

/// A JSON value kept as its compact text (UTF-8), written back out unchanged.
///
/// There is no way to make one from a run-time `String`: text that came from a sender becomes
/// JSON only through `string(_:)` (which escapes every byte that needs it) or through the JSON
/// parser and writer (`CanonicalCodec.raw`). Literal JSON in the source is a `StaticString`,
/// which cannot hold interpolated text. So no record can carry JSON built by concatenation.
public struct RawJSON: Sendable, Equatable, CustomStringConvertible {
    public private(set) var bytes: [UInt8]

    /// Bytes that a JSON writer produced or a JSON parser validated — nothing else.
    public init(encoded bytes: [UInt8]) { self.bytes = bytes }

    /// JSON written in the source as a literal, e.g. `RawJSON("{}")`.
    public init(_ literal: StaticString) {
        bytes = Array(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// A JSON string holding `text`, escaped as RFC 8259 asks.
    public static func string(_ text: String) -> RawJSON {
        RawJSON(encoded: JSONBytes.bytes(atMost: JSONBytes.bound(text)) { $0.str(text) })
    }

    /// A JSON number in its shortest exact form (`null` for NaN and infinities).
    public static func number(_ d: Double) -> RawJSON {
        RawJSON(encoded: JSONBytes.bytes(atMost: JSONBytes.numberBound) { $0.double(d) })
    }

    public static func integer(_ i: Int64) -> RawJSON {
        RawJSON(encoded: JSONBytes.bytes(atMost: JSONBytes.numberBound) { $0.int(i) })
    }

    public static func unsigned(_ u: UInt64) -> RawJSON {
        RawJSON(encoded: Array(String(u).utf8))
    }

    public static func bool(_ b: Bool) -> RawJSON { b ? RawJSON("true") : RawJSON("false") }

    public var description: String { String(decoding: bytes, as: UTF8.self) }

    /// The value when it is a JSON number a double holds; nil for anything else.
    public var number: Double? {
        guard let first = bytes.first, first == UInt8(ascii: "-") || (first >= 0x30 && first <= 0x39),
            let d = Double(description), d.isFinite
        else { return nil }
        return d
    }
}

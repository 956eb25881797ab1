import HealthgateCore

/// What a receiver accepted from one request. Records are encoded into the journal's
/// payload as they are added, so a large body never holds all its records at once.
public struct ReceivedBatch: Sendable {
    /// The accepted records as canonical NDJSON.
    public private(set) var payload: [UInt8] = []
    /// How many records `payload` holds.
    public private(set) var count = 0
    public var quarantined: [QuarantinedRecord] = []
    /// The device of the first record (for the request log).
    public private(set) var device: String?
    /// The devices of the other records, where they differ from `device`.
    public private(set) var otherDevices: Set<String> = []
    /// Every device the batch writes or deletes for (the receiver's `devices:` must allow each).
    public var devices: [String] { device.map { [$0] + otherDevices.sorted() } ?? [] }

    /// Names the device of a batch that stores nothing (a resend answered as stored), so the
    /// receiver's `devices:` is checked for it as for any other.
    public mutating func claim(device d: String) {
        if device == nil { device = d } else if d != device { otherDevices.insert(d) }
    }
    /// The sender's own id for this request, where its body carries one (HealthSync's export_id).
    public var requestID: String?
    /// Records of a request that was stored whole before (a HealthSync export sent again):
    /// answered as stored, not stored again.
    public var duplicates = 0
    /// Run by the gateway once the records are durable (and only then): for a receiver that
    /// remembers what it took, such as a batch id to recognise a resend.
    public var afterCommit: [@Sendable () -> Void] = []
    /// Where the journal cuts `payload` into entries (`entryBytes` at most each), as the lines
    /// are written.
    public private(set) var cuts = EntryCuts()

    /// The most bytes of records one journal entry holds: a bigger request is cut into several
    /// entries at record boundaries (a single longer line is an entry of its own; `EntryCuts`).
    public static let entryBytes = EntryCuts.entryBytes

    public init() {}

    /// Room for about `records` more records: 384 bytes each (a sample's line is ~300–350 bytes:
    /// the ingest API's, with its time zone, 341; at 320 a chunk's lines outgrew the room and
    /// were copied once more).
    public mutating func reserve(records n: Int) {
        payload.reserveCapacity(payload.count + n * 384)
    }

    /// Room for about `bytes` more bytes of records.
    public mutating func reserve(bytes: Int) {
        payload.reserveCapacity(payload.count + bytes)
    }

    /// Records whose type, or whose unit, the type registry does not know: kept as they came,
    /// and counted (`/metrics`), so a new iOS type shows up instead of vanishing.
    public private(set) var unknownTypes = 0
    public private(set) var unknownUnits = 0
    private var known = KnownCache()

    /// `unmapped`: kept although its fields have no canonical place (counted with the unknown types).
    public mutating func append(_ record: consuming CanonicalRecord, unmapped: Bool = false) {
        var r = record
        makeCanonical(&r)
        encode(r, unmapped: unmapped)
    }

    /// `append(_:)` for a record the caller built and has no more use for (a body's samples, on
    /// the ingest path): made canonical where it lies and encoded from there, not copied in
    /// (a copy of a record retains and releases each of its strings).
    public mutating func append(_ r: inout CanonicalRecord, unmapped: Bool = false) {
        makeCanonical(&r)
        encode(r, unmapped: unmapped)
    }

    /// The same fact, the same record, whichever sender it came from: a sample given as one
    /// instant ends when it starts (HealthKit's own convention), and a quantity is in its type's
    /// canonical unit (160 lb → 72.57 kg). Changed in place (most records are in that form already).
    private mutating func makeCanonical(_ r: inout CanonicalRecord) {
        if r.end == nil && r.start != nil && r.op == .upsert && RecordKind.isInstantKind(r.kind) {
            r.end = r.start
        }
        if r.kind == RecordKind.quantity, let unit = r.unit, case .number(let d)? = r.value,
            let target = known.canonicalUnit(r.type), unit != target,
            let v = Units.convert(d, from: unit, to: target)
        {
            r.value = .number(v)
            r.unit = target
        }
    }

    private mutating func encode(_ record: CanonicalRecord, unmapped: Bool) {
        let lineStart = payload.count
        record.appendNDJSON(to: &payload)
        added(
            lineFrom: lineStart, device: record.device, upsert: record.op == .upsert, type: record.type,
            unit: record.unit, unmapped: unmapped)
    }

    /// The bookkeeping of the line just written at `lineStart…`: its entry, the counts.
    private mutating func added(
        lineFrom lineStart: Int, device: String, upsert: Bool, type: String, unit: String?,
        unmapped: Bool
    ) {
        if count == 0 { self.device = device } else if device != self.device { otherDevices.insert(device) }
        cuts.add(lineFrom: lineStart, to: payload.count)
        count += 1
        if upsert {
            if unmapped || !known.typeIsKnown(type) { unknownTypes += 1 }
            if let unit, !known.unitIsKnown(unit) { unknownUnits += 1 }
        }
    }

    public var isEmpty: Bool { count == 0 }
}

/// Where a request's canonical lines are cut into journal entries: greedily, each entry at most
/// `limit` bytes, a single longer line an entry of its own. Fed line by line — by
/// `ReceivedBatch` as it writes them, by `Journal.parts` over a payload — so both cut alike.
public struct EntryCuts: Sendable {
    public static let entryBytes = 1 << 20
    @usableFromInline let limit: Int
    @usableFromInline var done: [(range: Range<Int>, count: Int)] = []
    /// The entry being filled: where it starts and ends, and its lines.
    @usableFromInline var start = 0, end = 0, lines = 0

    public init(limit: Int = EntryCuts.entryBytes) { self.limit = limit }

    /// The line `from..<to` (line feed included), after the ones before it; true when it begins
    /// a new entry.
    @inlinable @discardableResult
    public mutating func add(lineFrom from: Int, to: Int) -> Bool {
        if lines > 0 && to - start > limit {
            cut(at: from)
            lines = 1
            end = to
            return true
        }
        end = to
        lines += 1
        return lines == 1
    }

    @usableFromInline mutating func cut(at next: Int) {
        done.append((start..<end, lines))
        start = next
    }

    /// The entries, each with its byte range and its count of lines; the last one reaches
    /// `total` (bytes after the last line feed go with it).
    public func parts(total: Int) -> [(range: Range<Int>, count: Int)] {
        guard total > start || lines > 0 else { return done }
        return done + [(start..<max(total, end), lines)]
    }
}

/// A record that made no sense, kept with the reason beside the good ones.
public struct QuarantinedRecord: Sendable, Equatable {
    public var reason: String
    /// The record as it came, as compact JSON (or a JSON string holding a CSV/line-protocol line).
    public var raw: RawJSON

    /// A sender's text, described without quoting it: reasons reach the log, and a log never
    /// holds a health value ("a text of 7 characters").
    public static func describe(_ text: some StringProtocol) -> String {
        text.isEmpty ? "empty" : "a text of \(text.count) character\(text.count == 1 ? "" : "s")"
    }

    /// A name a sender chose (a key, a header's value), fit for a reason line: at most 40
    /// characters, so a long one cannot make a line of megabytes.
    public static func name(_ text: some StringProtocol) -> String {
        text.count <= 40 ? String(text) : String(text.prefix(40)) + "…"
    }

    public init(reason: String, raw: RawJSON) {
        self.reason = reason
        self.raw = raw
    }
}

/// The last few answers of the registry, for checks on every record of a body.
struct KnownCache: Sendable {
    private var types = RecentAnswers<String, Bool>()
    private var units = RecentAnswers<String, Bool>()
    private var canonical = RecentAnswers<String, String?>()

    /// The type's canonical unit (nil for types without one), from the last few asked.
    mutating func canonicalUnit(_ type: String) -> String? {
        canonical.value(type) { HealthTypes.named(type)?.unit }
    }

    mutating func typeIsKnown(_ type: String) -> Bool {
        types.value(type) { RecordKind.namedKinds.contains(type) || HealthTypes.kind(of: type) != nil }
    }

    mutating func unitIsKnown(_ unit: String) -> Bool {
        units.value(unit) { Units.family(of: unit) != nil }
    }
}

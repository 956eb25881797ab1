/// A receiver turns one sender's HTTP requests into canonical records.
///
/// Guarantees the gateway gives a receiver:
/// - `receive` is called on the HTTP server's worker threads, possibly for several requests
///   at once; a receiver keeps no per-request state between calls.
/// - The body is complete and within `maxBodyBytes`; oversized bodies never reach it.
/// - What `receive` returns as `.accept` is appended to the journal whole, fsynced, and only
///   then is `reply` sent. If the append fails, the client gets a 503 and nothing of the
///   request is kept.
///
/// What a receiver promises: it checks who is sending before it reads the body; it never
/// drops a record silently (bad records go to `quarantined` with a reason); it never logs a
/// token, a secret or a health value.
public protocol Receiver: Sendable {
    /// The name in the config; every record's `receiver` field.
    var name: String { get }
    /// The URL paths this receiver answers (`POST` only).
    var paths: [String] { get }
    var maxBodyBytes: Int { get }
    func receive(_ request: HTTPRequest, context: ReceiveContext) -> Reception
    /// Checks what can be checked from the headers alone (the token), before the body is read,
    /// so an unauthenticated client cannot make the gateway buffer its body. nil to go on.
    func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse?
}

extension Receiver {
    public func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse? { nil }
}

/// What a receiver needs from the gateway for one request.
public struct ReceiveContext: Sendable {
    /// The time signatures are checked against (`HEALTHGATE_NOW` replaces it in tests).
    public var now: Timestamp
    /// How many records the batch may keep beside their lines (`ReceivedBatch.kept`; 0: none):
    /// some when a sink's drainer parses the journal's lines, which then takes them as they are
    /// (`DecodedEntries`) instead of parsing again what was just encoded. A request with more
    /// keeps none (its records would be memory beyond its payload's, and past what is handed over).
    public var keepRecords: Int

    public init(now: Timestamp, keepRecords: Int = 0) {
        self.now = now
        self.keepRecords = keepRecords
    }
}

/// What a receiver decided about one request.
public enum Reception: Sendable {
    /// Store these records durably, then answer with `reply`.
    case accept(ReceivedBatch, reply: HTTPResponse)
    /// Answer now and store nothing (Check connection requests, auth failures).
    case answer(HTTPResponse)
    /// Refuse the request (401/403, a bad signature, say) and store nothing; `reason` says why,
    /// for the gateway's log of refusals (never a credential).
    case refused(HTTPResponse, reason: String)
    /// The body could not be read at all: answer with a problem document, keep the raw body
    /// in quarantine (size-capped) with the reason.
    case unreadable(status: Int, reason: String)
}

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
    /// With `keepsRecords`, the records as encoded (canonical), with their lines, in the parts
    /// of `cuts`: handed to the sinks with the entries.
    public private(set) var kept: [KeptPart] = []
    /// Whether the batch keeps its records: asked to, and not more of them than `keepLimit`.
    public private(set) var keepsRecords: Bool
    private let keepLimit: Int
    /// The room `reserve` asked for, for the first part's records.
    private var keptRoom = 0

    /// The most bytes of records one journal entry holds: a bigger request is cut into several
    /// entries at record boundaries (a single longer line is an entry of its own; `EntryCuts`).
    public static let entryBytes = EntryCuts.entryBytes

    /// `keepingUpTo`: how many records to keep at most (`ReceiveContext.keepRecords`); with
    /// more, none are.
    public init(keepingUpTo limit: Int = 0) {
        keepLimit = limit
        keepsRecords = limit > 0
    }

    /// Room for about `records` more records: 384 bytes each (a sample's line is ~300–350 bytes:
    /// the ingest API's, with its time zone, 341; at 320 a chunk's lines outgrew the room and
    /// were copied once more).
    public mutating func reserve(records n: Int) {
        payload.reserveCapacity(payload.count + n * 384)
        if keepsRecords && kept.isEmpty { keptRoom = min(n, keepLimit, ReceivedBatch.entryBytes / 256) }
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
        if keepsRecords { keep(consume r) }
    }

    /// `append(_:)` for a record the caller built and has no more use for (a body's samples, on
    /// the ingest path): made canonical where it lies and encoded from there, not copied in
    /// (a copy of a record retains and releases each of its strings).
    /// Kept (`keepsRecords`), the record is moved out and `r` left empty.
    public mutating func append(_ r: inout CanonicalRecord, unmapped: Bool = false) {
        makeCanonical(&r)
        encode(r, unmapped: unmapped)
        if keepsRecords {
            var taken = CanonicalRecord.empty
            swap(&taken, &r)
            keep(consume taken)
        }
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
           let v = Units.convert(d, from: unit, to: target) {
            r.value = .number(v)
            r.unit = target
        }
    }

    private mutating func encode(_ record: CanonicalRecord, unmapped: Bool) {
        let lineStart = payload.count
        record.appendNDJSON(to: &payload)
        added(lineFrom: lineStart, device: record.device, upsert: record.op == .upsert, type: record.type,
              unit: record.unit, unmapped: unmapped)
    }

    /// Appends one canonical line that `write` writes straight from what a receiver parsed, no
    /// record made: its members from `{"op":` on, the closing brace and line feed left to this.
    /// It must be byte for byte the line `append` writes for the record it stands for, that
    /// record already canonical (`makeCanonical` would change nothing: an instant's end given, a
    /// quantity in its type's canonical unit — `canonicalUnit(of:)`); any other goes to `append`.
    /// `bound`: the most `write` writes. Not for a batch that keeps its records (`keepsRecords`).
    public mutating func appendLine(device: String, type: String, unit: String?, atMost bound: Int,
                                    _ write: (inout ByteWriter) -> Void) {
        precondition(!keepsRecords, "appendLine: this batch keeps records, which a line alone is not")
        let lineStart = payload.count
        ByteWriter.append(to: &payload, atMost: bound + 2) { o in
            write(&o)
            o.lit("}\n")
        }
        added(lineFrom: lineStart, device: device, upsert: true, type: type, unit: unit, unmapped: false)
    }

    /// The canonical unit of `type` (nil for types without one, or not known): where a
    /// quantity's value goes when it came in another unit.
    public mutating func canonicalUnit(of type: String) -> String? {
        known.canonicalUnit(type)
    }

    /// The bookkeeping of the line just written at `lineStart…`: its entry, the kept records'
    /// parts, the counts.
    private mutating func added(lineFrom lineStart: Int, device: String, upsert: Bool, type: String, unit: String?,
                                unmapped: Bool) {
        if count == 0 { self.device = device } else if device != self.device { otherDevices.insert(device) }
        let newPart = cuts.add(lineFrom: lineStart, to: payload.count)
        if keepsRecords {
            if count < keepLimit {
                if newPart {
                    var part = KeptPart(start: lineStart)
                    if kept.isEmpty {
                        part.records.reserveCapacity(keptRoom)
                        part.ranges.reserveCapacity(keptRoom)
                    }
                    kept.append(part)
                }
                let start = kept[kept.count - 1].start
                kept[kept.count - 1].ranges.append((lineStart - start)..<(payload.count - start))
            } else {
                keepsRecords = false
                kept = []
            }
        }
        count += 1
        if upsert {
            if unmapped || !known.typeIsKnown(type) { unknownTypes += 1 }
            if let unit, !known.unitIsKnown(unit) { unknownUnits += 1 }
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// A record just encoded, kept in the part its line went into.
    private mutating func keep(_ r: consuming CanonicalRecord) {
        kept[kept.count - 1].records.append(consume r)
    }

    /// The records kept (`keepsRecords`), part by part, moved out (the batch keeps its payload
    /// and counts).
    public mutating func takeRecords() -> [KeptPart] {
        var out: [KeptPart] = []
        swap(&out, &kept)
        return out
    }
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

/// One journal entry's worth of a request's records as a receiver made them
/// (`ReceivedBatch.takeRecords`), each with its line's bytes in the entry: what the journal
/// hands to the sinks that parse.
public struct KeptPart: Sendable {
    /// Where the part starts in the batch's payload.
    public let start: Int
    public var records: [CanonicalRecord] = []
    /// Each record's line in the part (line feed included).
    public var ranges: [Range<Int>] = []

    public init(start: Int) { self.start = start }
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

extension String {
    /// Calls `body` with the string's UTF-8 bytes where they lie: no copy of the string, so no
    /// retain and release (`var s = self; s.withUTF8` took both, a few times for every record).
    /// A string that is not contiguous UTF-8 (bridged) is made so first.
    @inlinable public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let r = utf8.withContiguousStorageIfAvailable(body) { return r }
        var s = self
        return s.withUTF8(body)
    }

    /// Whether `other` is the same text, lengths first: they tell most different types and
    /// units apart without comparing bytes (`==` on two different strings costs a few hundred
    /// instructions; on the same storage, as decoded records share it, a pointer's). Two
    /// spellings of one text in different Unicode forms differ here: for the caches that use
    /// it, that is a miss, and the registry is asked.
    @inlinable public func isSameText(_ other: String) -> Bool {
        utf8.count == other.utf8.count && self == other
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

import FastJSON
import Glibc
import HealthgateCore

/// One canonical line's fields as the bytes they are in the line, from one walk of it
/// (`CanonicalLine`) and no parser, no string, no record made: for a sink that writes each
/// record in a format of its own straight from its journal line (the InfluxDB sink's line
/// protocol) instead of decoding it into a `CanonicalRecord` first.
///
/// Strings are their text between the quotes; `read` gives nil for a line whose strings hold an
/// escape (the text would not be the bytes), a `null`, a field out of order, or anything else
/// not as `appendNDJSON` writes it — the caller decodes such a line whole instead. Valid while
/// the line's bytes are. The phone's own JSON (`fields`, `metadata`, `extra`) is skipped unread;
/// the walk stops at the labels (`tags`), the last field read.
public struct CanonicalView {
    public var op: CanonicalRecord.Op = .upsert
    public var kind = UnsafeRawBufferPointer(start: nil, count: 0)
    public var device = UnsafeRawBufferPointer(start: nil, count: 0)
    public var receiver = UnsafeRawBufferPointer(start: nil, count: 0)
    public var uuid = UnsafeRawBufferPointer(start: nil, count: 0)
    public var type = UnsafeRawBufferPointer(start: nil, count: 0)
    public var part: Int?
    public var code: Int?
    public var start: Timestamp?
    /// A number, or a string's text.
    public var value: Value?
    public var unit: UnsafeRawBufferPointer?
    public var activity: UnsafeRawBufferPointer?
    public var durationS, energyKcal, distanceM: Double?
    public var sourceApp, sourceDevice: UnsafeRawBufferPointer?
    /// The labels object's JSON text (`{"name":"text",…}`, no escapes), when the record has any.
    public var labels: UnsafeRawBufferPointer?

    /// An empty view, for `read(_:recent:into:)` to fill.
    public init() {}

    public enum Value {
        case number(Double)
        case string(UnsafeRawBufferPointer)
    }

    /// The fields of `line` (without its line feed), or nil when it is not a plain canonical
    /// line (see above).
    public static func read(_ line: UnsafeRawBufferPointer) -> CanonicalView? {
        var none = Timestamp.RecentDay()
        var v = CanonicalView()
        return read(line, recent: &none, into: &v) ? v : nil
    }

    /// `read(_:)` into `v` (a view of some hundred bytes: returned, it was copied twice a line),
    /// the start's date read with the last one's remembered (lines of one batch mostly share a
    /// few days). False when the line is not one `read` reads; `v` is then not to be used.
    public static func read(_ line: UnsafeRawBufferPointer, recent: inout Timestamp.RecentDay,
                            into v: inout CanonicalView) -> Bool {
        v = CanonicalView()
        if readPlain(line, recent: &recent, into: &v) { return true }
        v = CanonicalView()
        return readWalking(line, recent: &recent, into: &v)
    }

    /// `read` by a walk of the line's members (`CanonicalLine`), each field found by its key:
    /// any line `appendNDJSON` writes, the plain ones too.
    static func readWalking(_ line: UnsafeRawBufferPointer, recent: inout Timestamp.RecentDay,
                            into v: inout CanonicalView) -> Bool {
        var op: CanonicalRecord.Op?
        var required: UInt8 = 0
        var walk = CanonicalLine(line)
        walking: while let m = walk.next() {
            let text = UnsafeRawBufferPointer(rebasing: line[m.valueStart..<m.end])
            switch m.field {
            case .op:
                guard let s = walk.string(m), s.count == 6 else { return false }
                op = memcmp(s.baseAddress!, "upsert", 6) == 0 ? .upsert : memcmp(s.baseAddress!, "delete", 6) == 0 ? .delete : nil
                if op == nil { return false }
            case .kind, .device, .receiver, .uuid, .type:
                guard let s = walk.string(m) else { return false }
                switch m.field {
                case .kind: v.kind = s; required |= 1
                case .device: v.device = s; required |= 2
                case .receiver: v.receiver = s; required |= 4
                case .uuid: v.uuid = s; required |= 8
                default: v.type = s; required |= 16
                }
            case .part, .code:
                guard let n = CanonicalCodec.integer(text) else { return false }
                if m.field == .part { v.part = n } else { v.code = n }
            case .start:
                guard let s = walk.string(m), let (t, _) = Timestamp.parseRFC3339(s, recent: &recent) else { return false }
                v.start = t
            case .value:
                if let s = walk.string(m) {
                    v.value = .string(s)
                } else {
                    guard let d = CanonicalCodec.number(text) else { return false }
                    v.value = .number(d)
                }
            case .unit, .activity:
                guard let s = walk.string(m) else { return false }
                if m.field == .unit { v.unit = s } else { v.activity = s }
            case .durationS, .energyKcal, .distanceM:
                guard let d = CanonicalCodec.number(text) else { return false }
                switch m.field {
                case .durationS: v.durationS = d
                case .energyKcal: v.energyKcal = d
                default: v.distanceM = d
                }
            case .source:
                guard let (app, device) = CanonicalCodec.source(text) else { return false }
                v.sourceApp = app
                v.sourceDevice = device
            case .tags:
                guard CanonicalCodec.objectOfStrings(text, { _, _ in true }) else { return false }
                if text.count > 2 { v.labels = text }
                break walking   // the last field read
            case .metadata, .extra:
                break walking
            case .parts, .end, .utcOffset, .fields:
                continue
            }
        }
        guard !walk.failed, let op, required == 31 else { return false }
        v.op = op
        return true
    }

    /// A plain sample's line — an upserted quantity or category as the writers write it (Syncky's
    /// straight one, `SynckyNative.writeLine`, and `appendNDJSON`): `op`, `kind`, `device`,
    /// `receiver`, `uuid`, `type`, `start`, `end`, `value`, and perhaps `unit`, `code` and a
    /// `source` of an app and a device — read with each key where it must be, not looked for
    /// among the fields (the walk did ~3,000 instructions a line). False, the view half filled,
    /// for a line of any other shape or with an escape: `read` walks it then, and reads what this
    /// reads alike (`CanonicalViewPlainTests`).
    static func readPlain(_ line: UnsafeRawBufferPointer, recent: inout Timestamp.RecentDay,
                          into v: inout CanonicalView) -> Bool {
        guard let base = line.baseAddress else { return false }
        let n = line.count
        var i = 0
        /// Whether `text` comes next (stepped over).
        func lit(_ text: StaticString) -> Bool {
            let k = text.utf8CodeUnitCount
            guard i + k <= n, memcmp(base + i, text.utf8Start, k) == 0 else { return false }
            i += k
            return true
        }
        /// A string's text up to its closing quote (stepped over); nil at an escape or the end.
        @inline(__always) func str() -> UnsafeRawBufferPointer? {
            let from = i
            i = CanonicalLine.quoteOrBackslash(in: line, from: i)
            guard i < n, line[i] == 0x22 else { return nil }
            i += 1
            return UnsafeRawBufferPointer(start: base + from, count: i - 1 - from)
        }
        /// A number's or integer's text, up to the `,` or `}` after it.
        func bare() -> UnsafeRawBufferPointer {
            let from = i
            while i < n && line[i] != 0x2C && line[i] != 0x7D { i += 1 }
            return UnsafeRawBufferPointer(start: base + from, count: i - from)
        }
        guard lit("{\"op\":\"upsert\",\"kind\":\""), let kind = str(),
              lit(",\"device\":\""), let device = str(),
              lit(",\"receiver\":\""), let receiver = str(),
              lit(",\"uuid\":\""), let uuid = str(),
              lit(",\"type\":\""), let type = str(),
              lit(",\"start\":\""), let start = str(), let (t, _) = Timestamp.parseRFC3339(start, recent: &recent),
              lit(",\"end\":\""), str() != nil,
              lit(",\"value\":") else { return false }
        if lit("\"") {
            guard let name = str() else { return false }
            v.value = .string(name)
        } else {
            guard let d = CanonicalCodec.number(bare()) else { return false }
            v.value = .number(d)
        }
        if lit(",\"unit\":\"") {
            guard let unit = str() else { return false }
            v.unit = unit
        }
        if lit(",\"code\":") {
            guard let code = CanonicalCodec.integer(bare()) else { return false }
            v.code = code
        }
        if lit(",\"source\":{") {
            if lit("\"app\":\"") {
                guard let app = str() else { return false }
                v.sourceApp = app
                if lit(",\"device\":\"") {
                    guard let device = str() else { return false }
                    v.sourceDevice = device
                }
            } else if lit("\"device\":\"") {
                guard let device = str() else { return false }
                v.sourceDevice = device
            }
            guard lit("}"), v.sourceApp != nil || v.sourceDevice != nil else { return false }
        }
        guard i == n - 1, line[i] == 0x7D else { return false }
        v.op = .upsert
        v.kind = kind
        v.device = device
        v.receiver = receiver
        v.uuid = uuid
        v.type = type
        v.start = t
        return true
    }

    /// Calls `body` with each label's name and text, in the line's order.
    public func forEachLabel(_ body: (_ name: UnsafeRawBufferPointer, _ text: UnsafeRawBufferPointer) -> Void) {
        guard let labels else { return }
        _ = CanonicalCodec.objectOfStrings(labels) { name, text in
            body(name, text)
            return true
        }
    }
}

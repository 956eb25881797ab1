import CanonicalJSON
import HealthgateCore

/// A template over a record's fields (`{type}`, `{device}` …), parsed once when the config is
/// read, so a record costs one pass over the parts. The file sink names its files with it, the
/// influxdb sink its measurements and tag values; each says which fields it allows and how a
/// field's value is written.
public struct RecordTemplate: Sendable {
    public enum Field: String, Sendable, CaseIterable {
        /// `{phone}` is the record's device, under the name InfluxDB users know it by.
        case device, phone, receiver, date, type, kind, source, unit
    }

    public enum Part: Sendable {
        case text(String)
        case field(Field)
    }

    public let parts: [Part]
    /// The `{name}`s that are not among the allowed fields; they stay as literal text.
    public let unknown: [String]

    public init(_ template: String, allowed: [Field]) {
        var parts: [Part] = []
        var unknown: [String] = []
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            if open > rest.startIndex { parts.append(.text(String(rest[..<open]))) }
            let name = String(rest[rest.index(after: open)..<close])
            if let field = Field(rawValue: name), allowed.contains(field) {
                parts.append(.field(field))
            } else {
                unknown.append(name)
                parts.append(.text(String(rest[open...close])))
            }
            rest = rest[rest.index(after: close)...]
        }
        if !rest.isEmpty { parts.append(.text(String(rest))) }
        self.parts = parts
        self.unknown = unknown
    }

    /// Whether the template has no field at all (its text is the same for every record).
    public var isConstant: Bool { !parts.contains { if case .field = $0 { true } else { false } } }

    public func render(_ r: Record, _ value: (Field, Record) -> String) -> String {
        if parts.count == 1 {
            switch parts[0] {
            case .field(let f): return value(f, r)
            case .text(let t): return t
            }
        }
        var out = ""
        for p in parts {
            switch p {
            case .text(let t): out += t
            case .field(let f): out += value(f, r)
            }
        }
        return out
    }

    /// "unknown placeholder {x}; a template may use {a}, {b}" for a config problem.
    public static func problem(_ unknown: [String], allowed: [Field]) -> String {
        "unknown placeholder " + unknown.map { "{\($0)}" }.joined(separator: ", ")
            + "; a template may use " + allowed.map { "{\($0.rawValue)}" }.joined(separator: ", ")
    }
}

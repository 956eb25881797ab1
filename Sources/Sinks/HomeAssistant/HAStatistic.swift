import FastJSON
import HealthgateCore

/// How one health type stands in Home Assistant's long-term statistics: its unit there (and
/// the factor from healthgate's canonical unit), HA's unit class where HA converts that unit,
/// and whether its hours add up (`sum`) or are averaged (`mean`/`min`/`max`).
struct HAStatisticKind: Equatable, Sendable {
    var unit: String?
    var factor: Double
    var unitClass: String?
    var cumulative: Bool

    /// Quantity types only: a category's code or a workout is no number to chart by the hour.
    static func of(type: String) -> HAStatisticKind? {
        guard let t = HealthTypes.named(type), t.kind == .quantity, let canonical = t.unit else { return nil }
        let cumulative = t.aggregation == .cumulative
        switch canonical {
        case "%": return HAStatisticKind(unit: "%", factor: 100, unitClass: nil, cumulative: cumulative)
        case "degC": return HAStatisticKind(unit: "°C", factor: 1, unitClass: "temperature", cumulative: cumulative)
        case "kg", "g": return HAStatisticKind(unit: canonical, factor: 1, unitClass: "mass", cumulative: cumulative)
        case "m" where cumulative: return HAStatisticKind(unit: "km", factor: 0.001, unitClass: "distance", cumulative: true)
        case "m", "cm": return HAStatisticKind(unit: canonical, factor: 1, unitClass: "distance", cumulative: cumulative)
        case "m/s": return HAStatisticKind(unit: "km/h", factor: 3.6, unitClass: "speed", cumulative: cumulative)
        case "mL", "L": return HAStatisticKind(unit: canonical, factor: 1, unitClass: "volume", cumulative: cumulative)
        case "mmHg": return HAStatisticKind(unit: "mmHg", factor: 1, unitClass: "pressure", cumulative: cumulative)
        case "count/min":
            let unit =
                type.contains("heart_rate")
                ? "bpm" : type == "respiratory_rate" ? "breaths/min" : type == "cycling_cadence" ? "rpm" : "/min"
            return HAStatisticKind(unit: unit, factor: 1, unitClass: nil, cumulative: cumulative)
        case "count":
            return HAStatisticKind(unit: countUnits[type], factor: 1, unitClass: nil, cumulative: cumulative)
        case "ml/(kg*min)": return HAStatisticKind(unit: "mL/(kg·min)", factor: 1, unitClass: nil, cumulative: cumulative)
        default: return HAStatisticKind(unit: canonical, factor: 1, unitClass: nil, cumulative: cumulative)
        }
    }

    /// Counts that have a word for what they count (the rest, a body mass index say, has no unit).
    static let countUnits = [
        "steps": "steps", "flights_climbed": "floors", "push_count": "pushes", "swimming_stroke_count": "strokes",
        "number_of_alcoholic_beverages": "drinks", "number_of_times_fallen": "falls", "inhaler_usage": "uses"
    ]

    /// Whether Home Assistant takes `mean_type` and `unit_class` (2025.11 on; they are required
    /// from 2026.11) rather than `has_mean` (the only way before: 2024.3 refuses the new keys).
    static func wantsMeanType(haVersion: String) -> Bool {
        let parts = haVersion.split(separator: ".").prefix(2).map { Int($0.prefix { $0.isNumber }) ?? 0 }
        guard parts.count == 2 else { return true } // a development build names no release: the newest form
        return (parts[0], parts[1]) >= (2025, 11)
    }

    /// The `metadata` of `recorder/import_statistics`, as this Home Assistant version takes it.
    func writeMetadata(id: String, name: String, haVersion: String, to w: inout JSONWriter) {
        w.beginObject()
        w.key("has_sum"); w.bool(cumulative)
        if HAStatisticKind.wantsMeanType(haVersion: haVersion) {
            w.key("mean_type"); w.int(cumulative ? 0 : 1) // 0: none, 1: arithmetic
            w.key("unit_class")
            if let c = unitClass { w.string(c) } else { w.null() }
        } else {
            w.key("has_mean"); w.bool(!cumulative)
        }
        w.key("name"); w.string(name)
        w.key("source"); w.string(HAStatisticIDs.source)
        w.key("statistic_id"); w.string(id)
        w.key("unit_of_measurement")
        if let u = unit { w.string(u) } else { w.null() }
        w.endObject()
    }
}

/// The ids of healthgate's external statistics: `healthgate:<device>_<type>`, in the form Home
/// Assistant requires (lowercase `[a-z0-9_]`, no `__`, no `_` first or last on either side).
enum HAStatisticIDs {
    static let source = "healthgate"

    static func id(device: String, type: String) -> String {
        "\(source):\(deviceSlug(device))_\(typeSlug(type))"
    }

    /// A device id as it is when it already has the form; otherwise made to fit, with a hash of
    /// the id so that two devices stay two (`Anna-iPhone` and `anna_iphone` differ).
    static func deviceSlug(_ device: String) -> String {
        if device.utf8.count <= 64, let s = fitting(device), s == device { return s }
        let lossy = String((fitting(device) ?? "device").prefix(40)).trimmingTrailingUnderscores
        return (lossy.isEmpty ? "device" : lossy) + "_" + String(FNV1a.hex(device).prefix(10))
    }

    static func typeSlug(_ type: String) -> String { fitting(type) ?? "type_" + String(FNV1a.hex(type).prefix(10)) }

    /// Lowercase ASCII letters and digits, everything else one `_` between them; nil when nothing is left.
    static func fitting(_ s: String) -> String? {
        var out: [UInt8] = []
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): out.append(b)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): out.append(b | 0x20)
            default: if let last = out.last, last != UInt8(ascii: "_") { out.append(UInt8(ascii: "_")) }
            }
        }
        while out.last == UInt8(ascii: "_") { out.removeLast() }
        return out.isEmpty ? nil : String(decoding: out, as: UTF8.self)
    }

    /// A type as people read it: `heart_rate` → `Heart rate`.
    static func title(_ type: String) -> String {
        let words = type.replacingUnderscores
        return words.prefix(1).uppercased() + words.dropFirst()
    }
}

extension String {
    fileprivate var trimmingTrailingUnderscores: String {
        var s = self
        while s.hasSuffix("_") { s.removeLast() }
        return s
    }

    fileprivate var replacingUnderscores: String { String(map { $0 == "_" ? " " : $0 }) }
}

import HealthgateCore
import YAMLConfig
import CanonicalJSON

/// Keeps the records that match every rule given, and drops the rest from this route. Each rule
/// is a list of globs (`*`, `?`) and has an `exclude_` counterpart; a rule not given matches all.
///
/// ```yaml
/// - filter:
///     types: [steps, "heart_*"]            # exclude_types: ["body_fat_*"]
///     kinds: [quantity, category]          # exclude_kinds: [workout_route]
///     devices: [alice-iphone]              # exclude_devices
///     receivers: [phone]                   # exclude_receivers
///     sources: ["com.apple.*"]             # the source app; exclude_sources: ["com.example.*"]
///     source_devices: ["Apple Watch*"]     # exclude_source_devices
///     since: 2026-01-01                    # a date or an RFC 3339 time: samples that start before go
///     max_age: 30d                         # samples older than this, by the clock, go
///     values: {heart_rate: {min: 25, max: 250}}          # numbers outside the range go
///     exclude_values: {body_mass: {max: 0}}               # numbers inside the range go
/// ```
///
/// Deletions pass every rule about time, values and sources (they carry none), and the others by
/// the same rule, so a deleted sample reaches the sinks that hold it. Stateless.
public struct FilterTransform: TransformSpec {
    struct Rule: Sendable {
        var include: [Glob]
        var exclude: [Glob]

        var isEmpty: Bool { include.isEmpty && exclude.isEmpty }

        func keeps(_ value: String?) -> Bool {
            if isEmpty { return true }
            let v = value ?? ""
            if !include.isEmpty && !include.contains(where: { $0.matches(v) }) { return false }
            return !exclude.contains { $0.matches(v) }
        }
    }

    struct Range: Sendable {
        var min: Double?
        var max: Double?

        func contains(_ v: Double) -> Bool { (min.map { v >= $0 } ?? true) && (max.map { v <= $0 } ?? true) }
    }

    var types = Rule(include: [], exclude: [])
    var kinds = Rule(include: [], exclude: [])
    var devices = Rule(include: [], exclude: [])
    var receivers = Rule(include: [], exclude: [])
    var sources = Rule(include: [], exclude: [])
    var sourceDevices = Rule(include: [], exclude: [])
    var since: Timestamp?
    var maxAgeSeconds: Int64?
    var values: [String: Range] = [:]
    var excludeValues: [String: Range] = [:]

    public init(types: [String]?, excludeTypes: [String]?) {
        self.types = Rule(include: (types ?? []).map(Glob.init), exclude: (excludeTypes ?? []).map(Glob.init))
    }

    public var kind: String { "filter" }
    public func instantiate(_ context: TransformContext) -> any Transform { Instance(spec: self, clock: context.clock) }

    /// Whether the record passes, at `now` (for `max_age`).
    /// What the filter says of a type, whatever the record.
    struct TypeRules {
        var kept: Bool
        var values: Range?
        var excludeValues: Range?
    }

    func rules(type: String) -> TypeRules {
        TypeRules(kept: types.keeps(type), values: values[type], excludeValues: excludeValues[type])
    }

    public func keeps(_ r: CanonicalRecord, now: Timestamp = Timestamp(seconds: 0)) -> Bool {
        keeps(Record(r), now: now, rules(type: r.type))
    }

    /// Whether a rule beside the type's applies: most filters name types (and values) only.
    var hasOtherRules: Bool {
        !(kinds.isEmpty && devices.isEmpty && receivers.isEmpty && sources.isEmpty && sourceDevices.isEmpty)
            || since != nil || maxAgeSeconds != nil
    }

    func keeps(_ r: borrowing Record, now: Timestamp, _ typeRules: TypeRules, otherRules: Bool = true) -> Bool {
        guard typeRules.kept else { return false }
        if otherRules {
            guard kinds.keeps(r.kind), devices.keeps(r.device), receivers.keeps(r.receiver) else { return false }
        }
        if r.op == .delete { return true }
        if otherRules {
            guard sources.keeps(r.source?.app), sourceDevices.keeps(r.source?.device) else { return false }
        }
        if otherRules, let t = r.start ?? r.end {
            if let since, t < since { return false }
            if let maxAgeSeconds, t.seconds < now.seconds - maxAgeSeconds { return false }
        }
        if let v = r.value?.number {
            if let range = typeRules.values, !range.contains(v) { return false }
            if let range = typeRules.excludeValues, range.contains(v) { return false }
        }
        return true
    }

    final class Instance: Transform {
        let spec: FilterTransform
        let clock: any Clock
        /// The type rules (globs, value ranges) for each type seen.
        @exclusivity(unchecked) var byType = PerTypeCache<TypeRules>()
        let otherRules: Bool
        init(spec: FilterTransform, clock: any Clock) {
            self.spec = spec
            self.clock = clock
            otherRules = spec.hasOtherRules
        }

        func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
            let type = record.type
            let rules = byType.value(type) { spec.rules(type: type) }
            if spec.keeps(record, now: spec.maxAgeSeconds == nil ? Timestamp(seconds: 0) : clock.now(), rules, otherRules: otherRules) {
                emit(record)
            }
        }
    }

    public static func build(_ node: YAMLNode, _ path: String) throws(ConfigProblems) -> any TransformSpec {
        let c = try YAMLDecoder().decode(FilterTransformConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        func rule(_ a: [String]?, _ b: [String]?) -> Rule { Rule(include: (a ?? []).map(Glob.init), exclude: (b ?? []).map(Glob.init)) }
        var f = FilterTransform(types: c.types, excludeTypes: c.exclude_types)
        for (key, names) in [("types", c.types), ("exclude_types", c.exclude_types)] {
            for n in names ?? [] { if let why = HealthTypes.configProblem(n, nearest: closestMatch) { problems.add(key, why) } }
        }
        for (key, ranges) in [("values", c.values), ("exclude_values", c.exclude_values)] {
            for n in (ranges ?? [:]).keys.sorted() {
                if let why = HealthTypes.configProblem(n, nearest: closestMatch) { problems.add(key, why) }
            }
        }
        f.kinds = rule(c.kinds, c.exclude_kinds)
        f.devices = rule(c.devices, c.exclude_devices)
        f.receivers = rule(c.receivers, c.exclude_receivers)
        f.sources = rule(c.sources, c.exclude_sources)
        f.sourceDevices = rule(c.source_devices, c.exclude_source_devices)
        if let s = c.since {
            if let (t, _) = Timestamp.parseRFC3339(s) {
                f.since = t
            } else if s.utf8.count == 10, let (t, _) = Timestamp.parseRFC3339(s + "T00:00:00Z") {
                f.since = t
            } else {
                problems.add("since", "\"\(s)\" is not a date (2026-01-01) or an RFC 3339 time (2026-01-01T00:00:00Z)")
            }
        }
        if let age = c.max_age {
            if age.seconds <= 0 { problems.add("max_age", "max_age must be more than 0 (e.g. 30d)") }
            f.maxAgeSeconds = Int64(age.seconds)
        }
        func ranges(_ key: String, _ given: [String: FilterRangeConfig]?) -> [String: Range] {
            var out: [String: Range] = [:]
            for (type, r) in given ?? [:] {
                if r.min == nil && r.max == nil { problems.add(key, "\(type): give min, max or both") }
                if let a = r.min, let b = r.max, a > b { problems.add(key, "\(type): min \(a) is above max \(b)") }
                if HealthTypes.kind(of: type) == .category { problems.add(key, "\(type) is a category: its values are names, not numbers") }
                out[type] = Range(min: r.min, max: r.max)
            }
            return out
        }
        f.values = ranges("values", c.values)
        f.excludeValues = ranges("exclude_values", c.exclude_values)
        try problems.check()
        return f
    }
}

public struct FilterTransformConfig: Decodable, Sendable {
    public var types: [String]?
    public var exclude_types: [String]?
    public var kinds: [String]?
    public var exclude_kinds: [String]?
    public var devices: [String]?
    public var exclude_devices: [String]?
    public var receivers: [String]?
    public var exclude_receivers: [String]?
    public var sources: [String]?
    public var exclude_sources: [String]?
    public var source_devices: [String]?
    public var exclude_source_devices: [String]?
    public var since: String?
    public var max_age: ConfigDuration?
    public var values: [String: FilterRangeConfig]?
    public var exclude_values: [String: FilterRangeConfig]?
}

public struct FilterRangeConfig: Decodable, Sendable {
    public var min: Double?
    public var max: Double?
}

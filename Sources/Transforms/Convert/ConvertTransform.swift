import HealthgateCore
import YAMLConfig
import CanonicalJSON

/// Shows numbers in other units, per type or per unit family, through the type registry's exact
/// factors (the unit moves with the value).
///
/// ```yaml
/// - convert: {body_mass: lb, distance: km, temperature: degF}
/// ```
///
/// A key is a type name (`body_mass`) or a unit family (`mass`, `length` or `distance`,
/// `volume`, `energy`, `temperature`, `speed`, `pressure`, `time`, …); a type's own entry wins
/// over its family's. Records in a unit the registry does not know pass unchanged. Stateless.
public struct ConvertTransform: TransformSpec {
    let byType: [String: String]
    let byFamily: [UnitFamily: String]

    public var kind: String { "convert" }
    /// A value and its unit.

    public func instantiate(_ context: TransformContext) -> any Transform { Instance(spec: self) }

    public func apply(_ r: inout CanonicalRecord) {
        guard r.op == .upsert, let v = r.value?.number, let unit = r.unit, let target = target(type: r.type, unit: unit),
            let converted = Units.convert(v, from: unit, to: target)
        else { return }
        r.value = .number(converted)
        r.unit = target
    }

    /// The unit a record of `type` in `unit` is shown in, or nil when it stays as it is.
    func target(type: String, unit: String) -> String? {
        guard let target = byType[type] ?? Units.family(of: unit).flatMap({ byFamily[$0] }),
            Units.normalize(unit) != Units.normalize(target), Units.convert(1, from: unit, to: target) != nil
        else { return nil }
        return target
    }

    final class Instance: Transform {
        let spec: ConvertTransform
        /// The conversion for each (type, unit) seen: finding a unit's family reads its
        /// spelling, which costs far more than the arithmetic.
        @exclusivity(unchecked) var conversions = PerTypeCache<(unit: String, conversion: UnitConversion)?>()
        init(spec: ConvertTransform) { self.spec = spec }

        func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
            if record.op == .upsert, let v = record.value?.number, let unit = record.unit {
                let type = record.type
                let conversion = conversions.value(type, unit) {
                    spec.target(type: type, unit: unit).flatMap { t in Units.conversion(from: unit, to: t).map { (t, $0) } }
                }
                if let conversion {
                    record.value = .number(conversion.conversion.apply(v))
                    record.unit = conversion.unit
                }
            }
            emit(record)
        }
    }

    static let familyAliases: [String: UnitFamily] = ["distance": .length]

    public static func build(_ node: YAMLNode, _ path: String) throws(ConfigProblems) -> any TransformSpec {
        let c = try YAMLDecoder().decode([String: String].self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        var byType: [String: String] = [:], byFamily: [UnitFamily: String] = [:]
        if c.isEmpty { problems.add("", "convert needs at least one type or unit family, e.g. {body_mass: lb, distance: km}") }
        for (key, unit) in c.sorted(by: { $0.key < $1.key }) {
            if let type = HealthTypes.named(key) {
                guard let from = type.unit, type.kind == .quantity else {
                    problems.add(key, "\(key) is a category: it has no unit to convert")
                    continue
                }
                guard Units.convert(1, from: from, to: unit) != nil else {
                    let family = Units.family(of: from).map { Units.units(of: $0).joined(separator: ", ") } ?? from
                    problems.add(key, "\(key) is in \(from) and cannot be shown in \"\(unit)\" (units of its kind: \(family))")
                    continue
                }
                byType[key] = unit
            } else if let family = UnitFamily(rawValue: key) ?? familyAliases[key] {
                guard Units.family(of: unit) == family else {
                    problems.add(key, "\"\(unit)\" is not a unit of \(key) (\(Units.units(of: family).joined(separator: ", ")))")
                    continue
                }
                byFamily[family] = unit
            } else {
                let families = UnitFamily.allCases.map(\.rawValue) + ["distance"]
                let near =
                    HealthTypes.hk(key)?.name ?? HealthTypes.hae(key)?.name
                    ?? closestMatch(to: key.lowercased(), in: HealthTypes.knownNames + families)
                problems.add(
                    key,
                    "\"\(key)\" is neither a type the registry knows nor a unit family "
                        + "(\(families.joined(separator: ", ")))" + (near.map { " — did you mean \"\($0)\"?" } ?? ""))
            }
        }
        try problems.check()
        return ConvertTransform(byType: byType, byFamily: byFamily)
    }
}

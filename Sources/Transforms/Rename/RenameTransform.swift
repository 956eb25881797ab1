import HealthgateCore
import YAMLConfig
import CanonicalJSON

/// Renames types and devices, deletions too (so that a deletion still finds what it deletes
/// under the new name).
///
/// ```yaml
/// - rename:
///     types: {apple_exercise_time: exercise_minutes}
///     devices: {d_zsOZnTQUz_juWFVljuOOBQ: alice-iphone}
/// ```
///
/// A type renamed to one the registry knows takes that type's meaning downstream (its unit is
/// not changed: use `convert`); renaming two devices to one name merges them. Stateless.
public struct RenameTransform: TransformSpec {
    let types: [String: String]
    let devices: [String: String]

    public var kind: String { "rename" }

    public func instantiate(_ context: TransformContext) -> any Transform { MappingInstance(apply) }

    /// Renames what the config names; says which of the two it renamed.
    public func apply(_ r: inout Record) {
        if !types.isEmpty, let t = types[r.type] { r.type = t }
        if !devices.isEmpty, let d = devices[r.device] { r.device = d }
    }

    public static func build(_ node: YAMLNode, _ path: String) throws(ConfigProblems) -> any TransformSpec {
        let c = try YAMLDecoder().decode(RenameTransformConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        if (c.types ?? [:]).isEmpty && (c.devices ?? [:]).isEmpty { problems.add("types", "rename needs types, devices or both") }
        for (from, to) in (c.types ?? [:]).sorted(by: { $0.key < $1.key }) {
            if let why = HealthTypes.configProblem(from, nearest: closestMatch) { problems.add("types", why) }
            if !RenameTransform.isName(to) { problems.add("types", "\(from) → \"\(to)\": a type name is lower-case letters, digits and _") }
        }
        for (from, to) in (c.devices ?? [:]).sorted(by: { $0.key < $1.key })
        where to.isEmpty || to.utf8.count > 128 || to.utf8.contains(where: { $0 < 0x20 }) {
            problems.add("devices", "\(from) → \"\(to)\": a device name is 1 to 128 characters, no control characters")
        }
        try problems.check()
        return RenameTransform(types: c.types ?? [:], devices: c.devices ?? [:])
    }

    static func isName(_ s: String) -> Bool {
        guard let first = s.utf8.first, first >= 0x61 && first <= 0x7A, s.utf8.count <= 64 else { return false }
        return s.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }
}

public struct RenameTransformConfig: Decodable, Sendable {
    public var types: [String: String]?
    public var devices: [String: String]?
}

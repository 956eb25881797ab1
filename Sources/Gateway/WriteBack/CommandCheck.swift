import HealthgateCore
import YAMLConfig

/// Checks a write-back command against the type registry before it is queued: the type can be
/// written, the value fits the type (a number in a unit of its family, within its bounds; or one
/// of a category's values). What the app would reject is said here, with what to do.
enum CommandCheck {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func validID(_ id: String) -> Bool {
        (1...64).contains(id.utf8.count)
            && id.utf8.allSatisfy {
                ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39)
                    || $0 == 0x5F || $0 == 0x2E || $0 == 0x3A || $0 == 0x2D
            }
    }

    static func check(type name: String, value: String, unit: String?, force: Bool) throws(Failure)
        -> (WriteCommand.Value, String?)
    {
        guard let type = HealthTypes.named(name) else {
            let hint = closestMatch(to: name, in: HealthTypes.all.map(\.name)).map { " — did you mean \"\($0)\"?" } ?? ""
            throw Failure(description: "\"\(name)\" is not a type healthgate knows\(hint)")
        }
        if !type.writable && !force {
            throw Failure(
                description: "\(name) cannot be written to Apple Health (the app rejects it as type_not_allowed); "
                    + "--force queues it anyway")
        }
        switch type.kind {
        case .category:
            if unit != nil { throw Failure(description: "\(name) is a category: its value is a name, without a unit") }
            guard type.code(forValue: value) != nil else {
                throw Failure(
                    description: "\"\(value)\" is not a value of \(name); one of: "
                        + type.categoryValues.map(\.name).joined(separator: ", "))
            }
            return (.name(value), nil)
        case .quantity:
            guard let number = Double(value), number.isFinite else {
                throw Failure(description: "\(name) takes a number, not \"\(value)\"")
            }
            let canonical = type.unit ?? ""
            let given = unit.map(Units.normalize) ?? canonical
            guard let family = type.family, let inCanonical = Units.convert(number, from: given, to: canonical) else {
                let units = type.family.map { Units.units(of: $0).joined(separator: ", ") } ?? canonical
                throw Failure(description: "\"\(unit ?? "")\" is not a unit of \(name); use one of: \(units)")
            }
            _ = family
            if let bounds = type.bounds, !bounds.contains(inCanonical), !force {
                throw Failure(
                    description: "\(WriteCommandCLI.number(number)) \(given) is outside what \(name) can be "
                        + "(\(WriteCommandCLI.number(bounds.lowerBound))–\(WriteCommandCLI.number(bounds.upperBound)) \(canonical)); "
                        + "the app would reject it as value_out_of_range")
            }
            return (.number(number), unit ?? canonical)
        }
    }
}

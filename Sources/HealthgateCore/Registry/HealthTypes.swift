// The public face of the type registry: HealthKit quantity and category types under healthgate's snake_case
// names, workout activities and characteristics. The rows live in TypeRegistryData.swift.

public enum HealthTypeKind: String, Sendable {
    case quantity, category
}

public enum Aggregation: String, Sendable {
    /// Values add up over time (steps, energy, dietary intake).
    case cumulative
    /// Each value stands alone (heart rate, body mass); averaged or min/max'd, never summed. All categories.
    case discrete
}

/// One value of a category type or characteristic, with its HealthKit raw value.
public struct CategoryValue: Sendable, Equatable {
    /// snake_case name, e.g. `asleep_core`.
    public let name: String
    /// HealthKit's raw value, e.g. 3 for HKCategoryValueSleepAnalysisAsleepCore.
    public let code: Int
    /// Other accepted names, e.g. `asleep` for `asleep_unspecified`.
    public let aliases: [String]
}

public struct HealthType: Sendable, Equatable {
    /// healthgate's name, e.g. `steps`, `heart_rate`, `sleep_analysis`; matches `^[a-z][a-z0-9_]{1,63}$`.
    public let name: String
    /// Full HealthKit identifier, e.g. `HKQuantityTypeIdentifierStepCount`.
    public let hkIdentifier: String
    public let kind: HealthTypeKind
    /// Canonical unit (see `Units.normalize`); nil for categories. `%` is a fraction 0–1.
    public let unit: String?
    /// Family of `unit`; nil for categories.
    public let family: UnitFamily?
    public let aggregation: Aggregation
    /// Health Auto Export metric names: the name HAE uses now first, then aliases; may be empty.
    public let haeNames: [String]
    /// Whether a write command may create samples of this type.
    public let writable: Bool
    /// Sane range for a written value, in `unit`; set for writable quantity types only.
    public let bounds: ClosedRange<Double>?
    /// The category's values; empty for quantities.
    public let categoryValues: [CategoryValue]

    /// The HealthKit code of a category value, by name or alias. Also accepts case and spacing variants
    /// ("asleepCore", "AsleepCore", "Asleep Core", "ASLEEP_CORE" → 3). nil when unknown or for a quantity type.
    public func code(forValue name: String) -> Int? {
        HealthValueMatching.code(for: name, in: categoryValues)
    }

    /// The canonical name of a category value code; nil when the code is not one of this type's.
    public func valueName(forCode code: Int) -> String? {
        categoryValues.first { $0.code == code }?.name
    }
}

public struct WorkoutActivity: Sendable, Equatable {
    /// snake_case of the HKWorkoutActivityType case, e.g. `traditional_strength_training`.
    public let name: String
    /// HKWorkoutActivityType raw value, e.g. 50.
    public let rawValue: Int
    /// Health Auto Export's workout name, e.g. "Traditional Strength Training".
    public let haeName: String
}

public struct Characteristic: Sendable, Equatable {
    /// e.g. `blood_type`, `date_of_birth`.
    public let name: String
    /// The characteristic's values; empty for `date_of_birth`, whose value is a date.
    public let values: [CategoryValue]

    /// The HealthKit code of a value, by name or alias (e.g. `a_positive` or `A+` → 1); nil when unknown.
    public func code(forValue name: String) -> Int? {
        HealthValueMatching.code(for: name, in: values)
    }

    /// The canonical name of a code; nil when unknown.
    public func valueName(forCode code: Int) -> String? {
        values.first { $0.code == code }?.name
    }
}

public enum HealthTypes {
    /// Every quantity and category type, in the order of the data file.
    public static let all: [HealthType] = HealthRegistryStore.contents.types

    /// The type with this healthgate name (`steps`, `heart_rate`, ...); nil when unknown.
    public static func named(_ name: String) -> HealthType? {
        byName[name]
    }

    /// Every type name a record can have that healthgate knows: the registry's, and the kinds
    /// named by their type (`workout`, `ecg`, …).
    public static let knownNames: [String] = all.map(\.name) + RecordKind.namedKinds.sorted()

    /// Why a type name in a config would never match a record (`step` for `steps`), with the
    /// known name `nearest` (the config's own "did you mean") finds close; nil for a known name
    /// or a glob. A type the registry does not know yet is still taken as a glob (`"someNewType*"`).
    public static func configProblem(_ name: String, nearest: (_ word: String, _ among: [String]) -> String?) -> String? {
        if name.contains("*") || name.contains("?") || byName[name] != nil || RecordKind.namedKinds.contains(name) { return nil }
        var hint = ""
        if let t = hk(name) ?? hae(name) {
            hint = " — healthgate calls it \"\(t.name)\""
        } else if let near = nearest(name.lowercased(), knownNames) {
            hint = " — did you mean \"\(near)\"?"
        }
        return "\"\(name)\" is not a type healthgate knows, so it would match no record\(hint) "
            + "(a type the registry does not know yet is taken as a glob: \"\(name)*\")"
    }

    /// Just the kind of a type (no copy of its row): for checks on every sample.
    public static func kind(of name: String) -> HealthTypeKind? {
        kindByName[name]
    }

    private static let kindByName: [String: HealthTypeKind] = byName.mapValues(\.kind)

    /// Accepts "HKQuantityTypeIdentifierStepCount", "StepCount", "stepCount" (lowerCamelCase, as HealthSync and
    /// /v1/ingest send), case-sensitive apart from the first letter. Swift's import spelling of identifiers that
    /// start with an acronym is accepted too ("vo2Max", "uvExposure"). A full identifier must carry the prefix of
    /// its own kind.
    public static func hk(_ identifier: String) -> HealthType? {
        var short = Substring(identifier)
        var requiredKind: HealthTypeKind?
        if short.hasPrefix(quantityPrefix) {
            short = short.dropFirst(quantityPrefix.count)
            requiredKind = .quantity
        } else if short.hasPrefix(categoryPrefix) {
            short = short.dropFirst(categoryPrefix.count)
            requiredKind = .category
        }
        guard let first = short.first else { return nil }
        let key = String(short)
        let found =
            byShortIdentifier[key]
            ?? byShortIdentifier[first.uppercased() + short.dropFirst()]
            ?? bySwiftName[key]
        guard let type = found else { return nil }
        if let requiredKind, type.kind != requiredKind { return nil }
        return type
    }

    /// The type a Health Auto Export metric name or alias stands for (`step_count` → steps,
    /// `weight_body_mass` → body_mass, `mindful_minutes` → mindful_session); nil when unknown.
    public static func hae(_ name: String) -> HealthType? {
        byHAEName[name] ?? byHAEName[HealthUnitTable.trimmed(name).lowercased()]
    }

    /// Every HKWorkoutActivityType, in raw-value order.
    public static let workouts: [WorkoutActivity] = HealthRegistryStore.contents.workouts

    /// The activity with this snake_case name (`running`); HealthKit's lowerCamelCase case name
    /// (`highIntensityIntervalTraining`, as HealthSync sends) is accepted too.
    public static func workout(named name: String) -> WorkoutActivity? {
        workoutByName[name] ?? workoutByName[HealthNameStyle.snake(name)]
    }

    /// The activity with this HKWorkoutActivityType raw value (37 → running).
    public static func workout(rawValue: Int) -> WorkoutActivity? {
        workoutByRawValue[rawValue]
    }

    /// The activity Health Auto Export names so ("Traditional Strength Training"), case-insensitive; spaces,
    /// underscores and hyphens are interchangeable and "&" reads as "and".
    /// Health Auto Export's name of a workout, in English or, for the most common ones, as the
    /// Health app names them in French, German and Spanish (HAE sends the phone's language).
    public static func workout(haeName: String) -> WorkoutActivity? {
        let key = HealthNameStyle.displayKey(haeName)
        if let w = workoutByHAEKey[key] ?? localizedWorkoutNames[key].flatMap({ workout(named: $0) }) { return w }
        // The Fitness app's names: "Outdoor Run", "Indoor Cycle", "Pool Swim", "Open Water Swim".
        var words = key.split(separator: " ").map(String.init)
        if words.first == "outdoor" || words.first == "indoor" { words.removeFirst() }
        let rest = words.joined(separator: " ")
        return fitnessNames[rest].flatMap { workout(named: $0) } ?? (rest != key ? workoutByHAEKey[rest] : nil)
    }

    static let fitnessNames: [String: String] = [
        "run": "running", "walk": "walking", "cycle": "cycling", "cycling": "cycling", "pool swim": "swimming",
        "open water swim": "swimming", "rower": "rowing", "row": "rowing", "hike": "hiking"
    ]

    /// Display names in other languages (keys as `HealthNameStyle.displayKey` makes them).
    static let localizedWorkoutNames: [String: String] = {
        let names: [(String, String)] = [
            // French
            ("Course à pied", "running"), ("Marche", "walking"), ("Vélo", "cycling"), ("Cyclisme", "cycling"),
            ("Natation", "swimming"), ("Randonnée", "hiking"), ("Elliptique", "elliptical"), ("Rameur", "rowing"),
            ("Entraînement de Force Fonctionnelle", "functional_strength_training"),
            ("Entraînement de Force Traditionnel", "traditional_strength_training"),
            // German
            ("Laufen", "running"), ("Gehen", "walking"), ("Radfahren", "cycling"), ("Schwimmen", "swimming"),
            ("Wandern", "hiking"), ("Crosstrainer", "elliptical"), ("Rudern", "rowing"),
            ("Funktionelles Krafttraining", "functional_strength_training"),
            ("Traditionelles Krafttraining", "traditional_strength_training"),
            // Spanish
            ("Correr", "running"), ("Caminar", "walking"), ("Ciclismo", "cycling"), ("Natación", "swimming"),
            ("Senderismo", "hiking"), ("Remo", "rowing"),
            ("Entrenamiento de fuerza funcional", "functional_strength_training"),
            ("Entrenamiento de fuerza tradicional", "traditional_strength_training")
        ]
        return Dictionary(names.map { (HealthNameStyle.displayKey($0.0), $0.1) }, uniquingKeysWith: { first, _ in first })
    }()

    /// biological_sex, blood_type, fitzpatrick_skin_type, wheelchair_use, activity_move_mode, date_of_birth.
    public static let characteristics: [Characteristic] = HealthRegistryStore.contents.characteristics

    public static func characteristic(named name: String) -> Characteristic? {
        characteristics.first { $0.name == name }
    }

    // MARK: indexes

    static let quantityPrefix = "HKQuantityTypeIdentifier"
    static let categoryPrefix = "HKCategoryTypeIdentifier"

    private static let byName: [String: HealthType] =
        Dictionary(all.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

    private static let byShortIdentifier: [String: HealthType] =
        Dictionary(all.map { (shortIdentifier(of: $0), $0) }, uniquingKeysWith: { first, _ in first })

    private static let bySwiftName: [String: HealthType] =
        Dictionary(
            all.map { (HealthNameStyle.swiftLowerCamel(shortIdentifier(of: $0)), $0) },
            uniquingKeysWith: { first, _ in first })

    private static let byHAEName: [String: HealthType] =
        Dictionary(all.flatMap { type in type.haeNames.map { ($0, type) } }, uniquingKeysWith: { first, _ in first })

    private static let workoutByName: [String: WorkoutActivity] =
        Dictionary(workouts.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

    private static let workoutByRawValue: [Int: WorkoutActivity] =
        Dictionary(workouts.map { ($0.rawValue, $0) }, uniquingKeysWith: { first, _ in first })

    private static let workoutByHAEKey: [String: WorkoutActivity] =
        Dictionary(workouts.map { (HealthNameStyle.displayKey($0.haeName), $0) }, uniquingKeysWith: { first, _ in first })

    /// `HKQuantityTypeIdentifierStepCount` → `StepCount`.
    static func shortIdentifier(of type: HealthType) -> String {
        let prefix = type.kind == .quantity ? quantityPrefix : categoryPrefix
        return String(type.hkIdentifier.dropFirst(prefix.count))
    }
}

/// Matching of value names typed by people and other apps.
enum HealthValueMatching {
    static func code(for text: String, in values: [CategoryValue]) -> Int? {
        if values.isEmpty { return nil }
        let plain = HealthUnitTable.trimmed(text)
        guard !plain.isEmpty else { return nil }
        // HealthKit's own names (export.xml, scripts that copy it): `HKCategoryValueSleepAnalysisAsleepREM`
        // is the type's name, then the value's: try what follows each word.
        if plain.hasPrefix("HKCategoryValue") {
            var rest = plain.dropFirst("HKCategoryValue".count)
            while !rest.isEmpty {
                if let c = code(for: String(rest), in: values) { return c }
                rest = rest.dropFirst().drop { !$0.isUppercase }
            }
            return nil
        }
        for key in [plain, plain.lowercased(), HealthNameStyle.snake(plain)] {
            if let value = values.first(where: { $0.name == key || $0.aliases.contains(key) }) {
                return value.code
            }
        }
        return nil
    }
}

/// Conversions between the naming styles in play: HealthKit's UpperCamelCase, Swift's lowerCamelCase,
/// healthgate's snake_case and HAE's "Title Case Words".
enum HealthNameStyle {
    /// "HeartRateVariabilitySDNN" → "heart_rate_variability_sdnn", "VO2Max" → "vo2_max", "UVExposure" →
    /// "uv_exposure", "In Bed" → "in_bed", "asleepREM" → "asleep_rem". Spaces and hyphens become underscores.
    static func snake(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        func separate() {
            if let last = out.last, last != "_" { out.append("_") }
        }
        for (index, scalar) in scalars.enumerated() {
            if scalar == " " || scalar == "-" || scalar == "_" {
                separate()
                continue
            }
            if scalar.properties.isUppercase {
                let previous: Unicode.Scalar? = index > 0 ? scalars[index - 1] : nil
                let next: Unicode.Scalar? = index + 1 < scalars.count ? scalars[index + 1] : nil
                if let previous {
                    let afterLowerOrDigit = previous.properties.isLowercase || isDigit(previous)
                    let endsAcronym = previous.properties.isUppercase && (next?.properties.isLowercase ?? false)
                    if afterLowerOrDigit || endsAcronym { separate() }
                }
                out.append(contentsOf: scalar.properties.lowercaseMapping.unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        while let last = out.last, last == "_" { out.removeLast() }
        return String(out)
    }

    /// Swift's import of a HealthKit short identifier: "HeartRate" → "heartRate", "VO2Max" → "vo2Max",
    /// "UVExposure" → "uvExposure".
    static func swiftLowerCamel(_ identifier: String) -> String {
        let scalars = Array(identifier.unicodeScalars)
        var leadingUpper = 0
        while leadingUpper < scalars.count, scalars[leadingUpper].properties.isUppercase { leadingUpper += 1 }
        var lowerCount = leadingUpper
        if leadingUpper > 1, leadingUpper < scalars.count, scalars[leadingUpper].properties.isLowercase {
            lowerCount = leadingUpper - 1
        }
        var out = String.UnicodeScalarView()
        for (index, scalar) in scalars.enumerated() {
            if index < lowerCount {
                out.append(contentsOf: scalar.properties.lowercaseMapping.unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    /// Key for display names: lowercased, "&" as "and", runs of spaces, underscores and hyphens as one space.
    static func displayKey(_ text: String) -> String {
        var words: [String] = []
        var current = ""
        for character in text.lowercased() {
            if character == " " || character == "_" || character == "-" || character == "\t" {
                if !current.isEmpty { words.append(current); current = "" }
            } else if character == "&" {
                if !current.isEmpty { words.append(current); current = "" }
                words.append("and")
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { words.append(current) }
        return words.joined(separator: " ")
    }

    static func isDigit(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value >= 48 && scalar.value <= 57
    }
}

// Unit spellings, unit families and conversions for healthgate.
//
// Spellings follow HealthKit's HKUnit strings where HealthKit has one (`count/min`, `degC`, `mL`, `mg/dL`,
// `ml/(kg*min)`, `kcal/(kg*hr)`, `dBASPL`, ...). Factors are those of HKUnit.h.
//
// Percent: `%` is HealthKit's and Syncky's percent unit, a FRACTION from 0 to 1. The 0-100 scale (what Health Auto
// Export sends as `%`, e.g. SpO2 95) is spelled `percent` (aliases `%100`, `pct`). Convert HAE percent values with
// `Units.convert(v, from: "percent", to: "%")`.
//
// Within a family every unit converts to every other unit, except in `.other`, whose units (`IU`, `L/min`,
// `appleEffortScore`) are unrelated and convert only to themselves.

public enum UnitFamily: String, Sendable, CaseIterable {
    case mass, length, volume, energy, time, temperature, pressure, frequency, speed, fraction, count
    /// Blood glucose: mg/dL and mmol/L (HealthKit's molar mass of glucose, 180.15588000005408 g/mol).
    case concentration
    case vo2, effort, sound, conductance, power, other
}

public enum Units {
    /// The unit's spelling normalised: "bpm"/"beats/min"/"count/min" → "count/min", "kmph"/"km/h"/"km/hr" → "km/hr",
    /// "mph"/"mi/h" → "mi/hr", "ml"/"mL" → "mL", "°C"/"degC"/"C" → "degC", "°F"/"degF" → "degF", "h"/"hr" → "hr",
    /// "mcg"/"µg" → "mcg", "kcal/hr·kg" and "kcal/(kg*hr)" → "kcal/(kg*hr)", "ml/(kg·min)" → "ml/(kg*min)",
    /// "Cal" → "kcal", "%100"/"pct" → "percent" (0–100 scale). Exact spellings win; otherwise the match ignores
    /// spaces, takes "·", "⋅", "×" and "." for "*", "µ" for "mc", "°" for "deg", and then ignores case where that
    /// is unambiguous ("S" siemens vs "s" second, "Cal" vs "cal" stay case-sensitive).
    /// An unknown unit comes back trimmed of surrounding whitespace, otherwise unchanged.
    public static func normalize(_ unit: String) -> String {
        if let definition = HealthUnitTable.definition(for: unit) { return definition.symbol }
        return HealthUnitTable.trimmed(unit)
    }

    /// The family of a unit in any accepted spelling; nil when the unit is unknown.
    public static func family(of unit: String) -> UnitFamily? {
        HealthUnitTable.definition(for: unit)?.family
    }

    /// `value` converted between two units of one family (affine for temperature; `%` fraction 0–1 ↔ `percent`
    /// 0–100; mg/dL ↔ mmol/L with HealthKit's molar mass 180.15588000005408); nil when a unit is unknown or the
    /// units are of different families (or, within `.other`, are different units).
    /// Non-finite values pass through the arithmetic unchanged in kind (NaN stays NaN).
    public static func convert(_ value: Double, from: String, to: String) -> Double? {
        conversion(from: from, to: to)?.apply(value)
    }

    /// The conversion between two units, looked up once to apply to many values; nil when
    /// `convert` would say nil.
    public static func conversion(from: String, to: String) -> UnitConversion? {
        guard let source = HealthUnitTable.definition(for: from),
            let target = HealthUnitTable.definition(for: to),
            source.family == target.family,
            source.dimension == target.dimension
        else { return nil }
        return UnitConversion(source: source, target: target)
    }

    /// `value * factor`, but for a factor that is 1/n with a whole n, `value / n`: 95 × 0.01 is
    /// 0.9500000000000001 in binary floating point, 95 / 100 is 0.95.
    static func scaled(_ value: Double, by factor: Double) -> Double {
        let inverse = 1 / factor
        if factor < 1, inverse == inverse.rounded(.towardZero) { return value / inverse }
        return value * factor
    }

    /// The units a write command may use for a type of this family, in their normalised spelling, the family's
    /// base unit first.
    public static func units(of family: UnitFamily) -> [String] {
        HealthUnitTable.symbolsByFamily[family] ?? []
    }
}

/// `Units.convert` between two given units, with their spellings already looked up.
/// Numbers only (no strings to retain when it is copied).
public struct UnitConversion: Sendable {
    let same: Bool
    let sourceOffset: Double, sourceScale: Double
    let targetOffset: Double, targetScale: Double

    init(source: HealthUnitDefinition, target: HealthUnitDefinition) {
        same = source.symbol == target.symbol
        sourceOffset = source.offset
        sourceScale = source.scale
        targetOffset = target.offset
        targetScale = target.scale
    }

    public func apply(_ value: Double) -> Double {
        if same { return value }
        let base = Units.scaled(value + sourceOffset, by: sourceScale)
        return Units.scaled(base, by: 1 / targetScale) - targetOffset
    }
}

/// One unit: `base = (value + offset) * scale` in the family's base unit.
struct HealthUnitDefinition: Sendable {
    let symbol: String
    let family: UnitFamily
    /// Units convert only within the same dimension; equal to the family except inside `.other`.
    let dimension: String
    let scale: Double
    let offset: Double
    let aliases: [String]
}

enum HealthUnitTable {
    static let definitions: [HealthUnitDefinition] = {
        var list: [HealthUnitDefinition] = []
        func add(
            _ symbol: String, _ family: UnitFamily, _ scale: Double, offset: Double = 0,
            dimension: String? = nil, aliases: [String] = []
        ) {
            list.append(
                HealthUnitDefinition(
                    symbol: symbol, family: family, dimension: dimension ?? family.rawValue,
                    scale: scale, offset: offset, aliases: aliases))
        }
        // Exact definitions: 1 lb = 0.45359237 kg, 1 oz = 1/16 lb, 1 st = 14 lb, 1 in = 0.0254 m,
        // 1 ft = 0.3048 m, 1 yd = 0.9144 m, 1 mi = 1609.344 m, K = (°F + 459.67) × 5/9.
        // mass, base g
        add("g", .mass, 1, aliases: ["gram", "grams"])
        add("kg", .mass, 1000, aliases: ["kgs", "kilogram", "kilograms"])
        add("mg", .mass, 0.001, aliases: ["milligram", "milligrams"])
        add("mcg", .mass, 0.000001, aliases: ["µg", "μg", "ug", "microgram", "micrograms"])
        add("oz", .mass, 28.349523125, aliases: ["ounce", "ounces"])
        add("lb", .mass, 453.59237, aliases: ["lbs", "pound", "pounds"])
        add("st", .mass, 6350.29318, aliases: ["stone"])
        // length, base m
        add("m", .length, 1, aliases: ["meter", "meters", "metre", "metres"])
        add("cm", .length, 0.01)
        add("mm", .length, 0.001)
        add("km", .length, 1000)
        add("in", .length, 0.0254, aliases: ["inch", "inches"])
        add("ft", .length, 0.3048, aliases: ["foot", "feet"])
        add("yd", .length, 0.9144, aliases: ["yard", "yards"])
        add("mi", .length, 1609.344, aliases: ["mile", "miles"])
        // volume, base L
        add("L", .volume, 1, aliases: ["l", "liter", "liters", "litre", "litres"])
        add("mL", .volume, 0.001, aliases: ["ml", "milliliter", "milliliters", "millilitre", "millilitres"])
        add("dL", .volume, 0.1, aliases: ["dl"])
        add("fl_oz_us", .volume, 0.0295735295625, aliases: ["fl oz", "floz", "fl_oz", "fl oz us", "fl_oz_US"])
        add("fl_oz_imp", .volume, 0.0284130625, aliases: ["fl oz imp", "fl_oz_IMP"])
        add("cup_us", .volume, 0.2365882365, aliases: ["cup", "cups", "cup us"])
        add("pt_us", .volume, 0.473176473, aliases: ["pt", "pint", "pints", "pt us"])
        // energy, base J
        add("J", .energy, 1, aliases: ["joule", "joules"])
        add("kJ", .energy, 1000, aliases: ["kj", "kilojoule", "kilojoules"])
        add("cal", .energy, 4.184)
        add("kcal", .energy, 4184, aliases: ["Cal", "kilocalorie", "kilocalories"])
        // time, base s
        add("s", .time, 1, aliases: ["sec", "secs", "second", "seconds"])
        add("ms", .time, 0.001, aliases: ["millisecond", "milliseconds"])
        add("min", .time, 60, aliases: ["mins", "minute", "minutes"])
        add("hr", .time, 3600, aliases: ["h", "hrs", "hour", "hours"])
        add("d", .time, 86400, aliases: ["day", "days"])
        // temperature, base K (affine)
        add("degC", .temperature, 1, offset: 273.15, aliases: ["°C", "C", "celsius"])
        add("degF", .temperature, 5.0 / 9.0, offset: 459.67, aliases: ["°F", "F", "fahrenheit"])
        add("K", .temperature, 1, aliases: ["kelvin"])
        // pressure, base Pa
        add("mmHg", .pressure, 133.3224)
        add("kPa", .pressure, 1000)
        add("Pa", .pressure, 1)
        add("inHg", .pressure, 3386.38816)
        add("cmAq", .pressure, 98.0665, aliases: ["cmH2O"])
        add("atm", .pressure, 101325)
        // frequency, base count/s
        add(
            "count/min", .frequency, 1.0 / 60.0,
            aliases: ["bpm", "beats/min", "/min", "1/min", "min^-1", "breaths/min", "brpm", "spm", "steps/min", "rpm"])
        add("count/s", .frequency, 1, aliases: ["/s", "1/s", "s^-1", "beats/s"])
        add("Hz", .frequency, 1, aliases: ["hz"])
        // speed, base m/s
        add("m/s", .speed, 1, aliases: ["mps"])
        add("km/hr", .speed, 1000.0 / 3600.0, aliases: ["km/h", "kmph", "kph", "kmh"])
        add("mi/hr", .speed, 1609.344 / 3600.0, aliases: ["mi/h", "mph"])
        add("ft/s", .speed, 0.3048, aliases: ["ft/sec"])
        // fraction, base % (HealthKit's percent: 0-1)
        add("%", .fraction, 1, aliases: ["fraction"])
        add("percent", .fraction, 0.01, aliases: ["%100", "pct"])
        // count
        add("count", .count, 1, aliases: ["counts"])
        // blood glucose concentration, base mg/dL
        add("mg/dL", .concentration, 1, aliases: ["mg/dl"])
        add("mmol/L", .concentration, 18.015588000005408, aliases: ["mmol/l", "mmol<180.15588000005408>/L"])
        // VO2 max
        add(
            "ml/(kg*min)", .vo2, 1,
            aliases: [
                "ml/(kg·min)", "mL/(kg*min)", "ml/kg/min", "mL/kg/min",
                "ml/(min*kg)", "mL/(min*kg)", "ml/kg*min"
            ])
        // physical effort (1 MET = 1 kcal/(kg*hr))
        add(
            "kcal/(kg*hr)", .effort, 1,
            aliases: [
                "kcal/hr·kg", "kcal/hr*kg", "kcal/(hr*kg)", "kcal/kg/hr",
                "kcal/(kg*h)", "kcal/kg/h", "kcal/h*kg", "kcal/kg*hr", "MET", "METs"
            ])
        // sound pressure level
        add("dBASPL", .sound, 1, aliases: ["dBA", "dB(A)", "dB SPL", "dB(SPL)", "dB"])
        // conductance, base S
        add("S", .conductance, 1, aliases: ["siemens"])
        add("mS", .conductance, 0.001)
        add("mcS", .conductance, 0.000001, aliases: ["µS", "μS", "uS"])
        // power, base W
        add("W", .power, 1, aliases: ["watt", "watts"])
        add("kW", .power, 1000)
        // other: unrelated units, each its own dimension
        add("IU", .other, 1, dimension: "international_unit", aliases: ["iu"])
        add("L/min", .other, 1, dimension: "flow", aliases: ["l/min"])
        add("appleEffortScore", .other, 1, dimension: "effort_score")
        return list
    }()

    /// Exact spellings (as written, and in cleaned form) → definition index.
    static let exact: [String: Int] = {
        var map: [String: Int] = [:]
        for (index, definition) in definitions.enumerated() {
            for spelling in [definition.symbol] + definition.aliases {
                if map[spelling] == nil { map[spelling] = index }
                let cleaned = clean(spelling)
                if map[cleaned] == nil { map[cleaned] = index }
            }
        }
        return map
    }()

    /// Lowercased cleaned spellings → definition index, leaving out any lowercased spelling shared by two units.
    static let caseless: [String: Int] = {
        var map: [String: Int] = [:]
        var ambiguous: Set<String> = []
        for (spelling, index) in exact {
            let key = spelling.lowercased()
            if let existing = map[key], existing != index { ambiguous.insert(key) } else { map[key] = index }
        }
        for key in ambiguous { map[key] = nil }
        return map
    }()

    static let symbolsByFamily: [UnitFamily: [String]] = {
        var map: [UnitFamily: [String]] = [:]
        for definition in definitions { map[definition.family, default: []].append(definition.symbol) }
        return map
    }()

    static func definition(for unit: String) -> HealthUnitDefinition? {
        let plain = trimmed(unit)
        if let index = exact[plain] { return definitions[index] }
        let cleaned = clean(plain)
        if let index = exact[cleaned] ?? caseless[cleaned.lowercased()] { return definitions[index] }
        return nil
    }

    static func trimmed(_ text: String) -> String {
        // Nearly every unit starts and ends with a printable ASCII byte: nothing to trim.
        if let first = text.utf8.first, let last = text.utf8.last, first > 0x20, first < 0x80, last > 0x20, last < 0x80 {
            return text
        }
        let scalars = text.unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, scalars[start].properties.isWhitespace { start = scalars.index(after: start) }
        while end > start, scalars[scalars.index(before: end)].properties.isWhitespace {
            end = scalars.index(before: end)
        }
        return String(scalars[start..<end])
    }

    /// Spaces removed, multiplication dots as "*", micro signs as "mc", degree signs as "deg", a HealthKit molar
    /// mass annotation ("mmol<180.15588000005408>/L") dropped.
    static func clean(_ text: String) -> String {
        var result = ""
        var insideAngle = false
        for scalar in text.unicodeScalars {
            if insideAngle {
                if scalar == ">" { insideAngle = false }
                continue
            }
            switch scalar {
            case "<": insideAngle = true
            case "\u{00B7}", "\u{22C5}", "\u{2022}", "\u{00D7}", ".": result.append("*")
            case "\u{00B5}", "\u{03BC}": result.append("mc")
            case "\u{00B0}", "\u{00BA}": result.append("deg")
            default:
                if !scalar.properties.isWhitespace { result.unicodeScalars.append(scalar) }
            }
        }
        return result
    }
}

import Testing
@testable import HealthgateCore

private func close(_ a: Double?, _ b: Double, tolerance: Double = 1e-9) -> Bool {
    guard let a else { return false }
    return abs(a - b) <= tolerance * max(1, abs(b))
}

@Suite struct UnitConversions {
    /// Every type's canonical unit round-trips through every other unit of its family.
    @Test func everyRowRoundTripsThroughItsFamily() throws {
        for type in HealthTypes.all where type.kind == .quantity {
            let unit = try #require(type.unit)
            let family = try #require(type.family)
            #expect(Units.family(of: unit) == family, "\(type.name)")
            #expect(Units.normalize(unit) == unit, "\(type.name)")
            let units = Units.units(of: family)
            #expect(units.contains(unit), "\(type.name)")
            let samples = [0.0, 1.0, 0.37, 72.5, 1234.5] + (type.bounds.map { [$0.lowerBound, $0.upperBound] } ?? [])
            for other in units {
                for value in samples {
                    guard let there = Units.convert(value, from: unit, to: other) else {
                        #expect(family == .other, "\(type.name): \(unit) → \(other)")
                        continue
                    }
                    let back = Units.convert(there, from: other, to: unit)
                    #expect(close(back, value, tolerance: 1e-9), "\(type.name): \(value) \(unit) → \(other) → \(String(describing: back))")
                }
            }
        }
    }

    /// Within every family except `.other`, every unit converts to every other and back.
    @Test(arguments: UnitFamily.allCases)
    func familiesAreClosed(family: UnitFamily) {
        let units = Units.units(of: family)
        #expect(!units.isEmpty)
        for from in units {
            #expect(Units.family(of: from) == family)
            #expect(Units.normalize(from) == from)
            for to in units {
                let there = Units.convert(42.5, from: from, to: to)
                if family == .other && from != to {
                    #expect(there == nil, "\(from) → \(to)")
                } else {
                    #expect(close(Units.convert(there ?? .nan, from: to, to: from), 42.5), "\(from) → \(to)")
                }
            }
        }
    }

    @Test func knownValues() {
        // Exact definitions, so miles and metres, pounds and kilograms give one canonical value.
        #expect(close(Units.convert(1, from: "lb", to: "kg"), 0.45359237, tolerance: 1e-15))
        #expect(close(Units.convert(98.6, from: "degF", to: "degC"), 37, tolerance: 1e-12))
        #expect(close(Units.convert(37, from: "degC", to: "degF"), 98.6))
        #expect(close(Units.convert(0, from: "degC", to: "K"), 273.15))
        #expect(close(Units.convert(-40, from: "degF", to: "degC"), -40))
        #expect(close(Units.convert(5.5, from: "mmol/L", to: "mg/dL"), 99.09, tolerance: 0.0001))
        #expect(close(Units.convert(180.15588000005408, from: "mg/dL", to: "mmol/L"), 10))
        #expect(close(Units.convert(1, from: "mi", to: "m"), 1609.344, tolerance: 1e-12))
        #expect(close(Units.convert(3.1, from: "mi", to: "m"), 4988.9664, tolerance: 1e-9))
        #expect(close(Units.convert(1, from: "mi", to: "ft"), 5280, tolerance: 1e-9))
        #expect(close(Units.convert(250, from: "mL", to: "L"), 0.25))
        #expect(close(Units.convert(1, from: "kcal", to: "kJ"), 4.184))
        #expect(close(Units.convert(1, from: "Cal", to: "cal"), 1000))
        #expect(close(Units.convert(60, from: "count/min", to: "count/s"), 1))
        #expect(close(Units.convert(1, from: "Hz", to: "bpm"), 60))
        #expect(close(Units.convert(95, from: "percent", to: "%"), 0.95))
        #expect(close(Units.convert(0.95, from: "%", to: "%100"), 95))
        #expect(close(Units.convert(1, from: "oz", to: "g"), 28.349523125, tolerance: 1e-12))
        #expect(close(Units.convert(16, from: "oz", to: "lb"), 1, tolerance: 1e-12))
        #expect(close(Units.convert(1, from: "st", to: "lb"), 14, tolerance: 1e-12))
        #expect(close(Units.convert(12, from: "in", to: "ft"), 1))
        #expect(close(Units.convert(1, from: "yd", to: "m"), 0.9144))
        #expect(close(Units.convert(120, from: "mmHg", to: "kPa"), 15.998688))
        #expect(close(Units.convert(1, from: "atm", to: "Pa"), 101325))
        #expect(close(Units.convert(1, from: "inHg", to: "Pa"), 3386.38816))
        #expect(close(Units.convert(10, from: "cmAq", to: "Pa"), 980.665))
        #expect(close(Units.convert(1, from: "fl_oz_us", to: "mL"), 29.5735295625))
        #expect(close(Units.convert(1, from: "fl_oz_imp", to: "mL"), 28.4130625))
        #expect(close(Units.convert(1, from: "cup_us", to: "L"), 0.2365882365))
        #expect(close(Units.convert(2, from: "cup_us", to: "pt_us"), 1, tolerance: 1e-9))
        #expect(close(Units.convert(1, from: "dL", to: "mL"), 100))
        #expect(close(Units.convert(1, from: "d", to: "hr"), 24))
        #expect(close(Units.convert(90, from: "min", to: "hr"), 1.5))
        #expect(close(Units.convert(1500, from: "ms", to: "s"), 1.5))
        #expect(close(Units.convert(36, from: "km/hr", to: "m/s"), 10))
        #expect(close(Units.convert(1, from: "mi/hr", to: "km/hr"), 1.609344, tolerance: 1e-12))
        #expect(close(Units.convert(1, from: "ft/s", to: "m/s"), 0.3048))
        #expect(close(Units.convert(1, from: "kW", to: "W"), 1000))
        #expect(close(Units.convert(1, from: "µS", to: "S"), 0.000001))
        #expect(close(Units.convert(1, from: "mcg", to: "mg"), 0.001))
        #expect(close(Units.convert(3.5, from: "kcal/hr·kg", to: "kcal/(kg*hr)"), 3.5))
        #expect(close(Units.convert(42, from: "ml/(kg·min)", to: "ml/(kg*min)"), 42))
        #expect(close(Units.convert(5, from: "IU", to: "IU"), 5))
    }

    @Test func acrossFamiliesIsNil() {
        #expect(Units.convert(1, from: "kg", to: "m") == nil)
        #expect(Units.convert(1, from: "mL", to: "g") == nil)
        #expect(Units.convert(1, from: "oz", to: "fl_oz_us") == nil)
        #expect(Units.convert(1, from: "count", to: "%") == nil)
        #expect(Units.convert(1, from: "count/min", to: "count") == nil)
        #expect(Units.convert(1, from: "s", to: "S") == nil)
        #expect(Units.convert(1, from: "ms", to: "mS") == nil)
        #expect(Units.convert(1, from: "IU", to: "L/min") == nil)
        #expect(Units.convert(1, from: "appleEffortScore", to: "kcal/(kg*hr)") == nil)
        #expect(Units.convert(1, from: "furlong", to: "m") == nil)
        #expect(Units.convert(1, from: "", to: "") == nil)
    }

    @Test func nonFiniteValuesDoNotCrash() {
        #expect(Units.convert(.nan, from: "kg", to: "lb")?.isNaN == true)
        #expect(Units.convert(.infinity, from: "degC", to: "degF") == .infinity)
    }
}

@Suite struct UnitSpellings {
    @Test func normalizeFromTheBrief() {
        let expected: [String: String] = [
            "bpm": "count/min", "beats/min": "count/min", "count/min": "count/min", "breaths/min": "count/min",
            "kmph": "km/hr", "km/h": "km/hr", "km/hr": "km/hr", "mph": "mi/hr", "mi/h": "mi/hr", "mi/hr": "mi/hr",
            "ml": "mL", "mL": "mL", "°C": "degC", "degC": "degC", "C": "degC", "°F": "degF", "degF": "degF",
            "h": "hr", "hr": "hr", "mcg": "mcg", "µg": "mcg", "μg": "mcg", "kcal/hr·kg": "kcal/(kg*hr)",
            "kcal/(kg*hr)": "kcal/(kg*hr)", "ml/(kg·min)": "ml/(kg*min)", "mL/(kg·min)": "ml/(kg*min)",
            "ml/(kg*min)": "ml/(kg*min)", "Cal": "kcal", "kcal": "kcal", "cal": "cal", "KCAL": "kcal", "Kcal": "kcal",
            "kJ": "kJ", "kj": "kJ", "%": "%", "%100": "percent", "percent": "percent", "l": "L", "L": "L",
            "dBASPL": "dBASPL", "dB SPL": "dBASPL", "mmol/l": "mmol/L", "mmol<180.15588000005408>/L": "mmol/L",
            "mg/dl": "mg/dL", "lbs": "lb", "fl oz": "fl_oz_us", "s": "s", "S": "S", "ms": "ms", "mS": "mS",
            "µS": "mcS", "ft/s": "ft/s", "m/s": "m/s", "Hz": "Hz", "count": "count", " kg ": "kg", "KG": "kg",
            "min": "min", "appleEffortScore": "appleEffortScore", "IU": "IU", "L/min": "L/min", "mmHg": "mmHg",
            "cmH2O": "cmAq", "MET": "kcal/(kg*hr)", "count/s": "count/s", "K": "K"
        ]
        for (spelling, normal) in expected {
            #expect(Units.normalize(spelling) == normal, "\(spelling)")
            #expect(Units.family(of: spelling) != nil, "\(spelling)")
        }
    }

    @Test func familiesOfSpellings() {
        #expect(Units.family(of: "bpm") == .frequency)
        #expect(Units.family(of: "kmph") == .speed)
        #expect(Units.family(of: "%") == .fraction)
        #expect(Units.family(of: "percent") == .fraction)
        #expect(Units.family(of: "mmol/L") == .concentration)
        #expect(Units.family(of: "ml/(kg·min)") == .vo2)
        #expect(Units.family(of: "kcal/hr·kg") == .effort)
        #expect(Units.family(of: "dBASPL") == .sound)
        #expect(Units.family(of: "S") == .conductance)
        #expect(Units.family(of: "s") == .time)
        #expect(Units.family(of: "W") == .power)
        #expect(Units.family(of: "°F") == .temperature)
        #expect(Units.family(of: "inHg") == .pressure)
        #expect(Units.family(of: "st") == .mass)
        #expect(Units.family(of: "yd") == .length)
        #expect(Units.family(of: "cup_us") == .volume)
        #expect(Units.family(of: "kJ") == .energy)
        #expect(Units.family(of: "count") == .count)
        #expect(Units.family(of: "IU") == .other)
    }

    @Test func ambiguousCaseIsNotGuessed() {
        #expect(Units.family(of: "CAL") == nil) // Cal (kcal) or cal?
        #expect(Units.family(of: "MS") == nil) // ms or mS?
        #expect(Units.normalize("CAL") == "CAL")
    }

    @Test func unknownSpellingsComeBackTrimmed() {
        #expect(Units.normalize("  furlong ") == "furlong")
        #expect(Units.normalize("") == "")
        #expect(Units.family(of: "furlong") == nil)
        #expect(Units.family(of: "") == nil)
        #expect(Units.family(of: "<>") == nil)
        #expect(Units.family(of: "°") == nil)
    }

    @Test func familyUnitLists() {
        #expect(Units.units(of: .mass) == ["g", "kg", "mg", "mcg", "oz", "lb", "st"])
        #expect(Units.units(of: .length) == ["m", "cm", "mm", "km", "in", "ft", "yd", "mi"])
        #expect(Units.units(of: .volume) == ["L", "mL", "dL", "fl_oz_us", "fl_oz_imp", "cup_us", "pt_us"])
        #expect(Units.units(of: .energy) == ["J", "kJ", "cal", "kcal"])
        #expect(Units.units(of: .time) == ["s", "ms", "min", "hr", "d"])
        #expect(Units.units(of: .temperature) == ["degC", "degF", "K"])
        #expect(Units.units(of: .pressure) == ["mmHg", "kPa", "Pa", "inHg", "cmAq", "atm"])
        #expect(Units.units(of: .frequency) == ["count/min", "count/s", "Hz"])
        #expect(Units.units(of: .speed) == ["m/s", "km/hr", "mi/hr", "ft/s"])
        #expect(Units.units(of: .fraction) == ["%", "percent"])
        #expect(Units.units(of: .concentration) == ["mg/dL", "mmol/L"])
        #expect(Units.units(of: .count) == ["count"])
    }

    @Test func everySpellingResolvesToOneUnit() {
        var owners: [String: Set<String>] = [:]
        for definition in HealthUnitTable.definitions {
            for spelling in [definition.symbol] + definition.aliases {
                owners[spelling, default: []].insert(definition.symbol)
                #expect(Units.normalize(spelling) == definition.symbol, "\(spelling)")
            }
        }
        for (spelling, symbols) in owners { #expect(symbols.count == 1, "\(spelling) → \(symbols)") }
    }
}

@Suite struct UnitsExactnessTests {
    /// Values that people read back must not pick up binary noise: 95 % is 0.95, not
    /// 0.9500000000000001; 250 mL is 0.25 L.
    @Test func commonConversionsAreExact() {
        #expect(Units.convert(95, from: "percent", to: "%") == 0.95)
        #expect(Units.convert(0.95, from: "%", to: "percent") == 95)
        #expect(Units.convert(250, from: "mL", to: "L") == 0.25)
        #expect(Units.convert(5.02, from: "km", to: "m") == 5020)
        #expect(Units.convert(1500, from: "ms", to: "s") == 1.5)
    }
}

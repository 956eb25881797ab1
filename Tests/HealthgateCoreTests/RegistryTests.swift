import Testing
@testable import HealthgateCore

/// An independent snake_case of a HealthKit short identifier, to check every row's name against.
private func expectedName(forShortIdentifier identifier: String) -> String {
    if identifier == "StepCount" { return "steps" }
    let characters = Array(identifier)
    var words: [String] = []
    var current = ""
    for (index, character) in characters.enumerated() {
        let next: Character? = index + 1 < characters.count ? characters[index + 1] : nil
        let previous: Character? = index > 0 ? characters[index - 1] : nil
        if character.isUppercase, let previous, !current.isEmpty {
            if previous.isLowercase || previous.isNumber || (previous.isUppercase && (next?.isLowercase ?? false)) {
                words.append(current)
                current = ""
            }
        }
        current.append(character)
    }
    if !current.isEmpty { words.append(current) }
    return words.map { $0.lowercased() }.joined(separator: "_")
}

private func shortIdentifier(_ type: HealthType) -> String {
    let prefix = type.kind == .quantity ? "HKQuantityTypeIdentifier" : "HKCategoryTypeIdentifier"
    #expect(type.hkIdentifier.hasPrefix(prefix), "\(type.name)")
    return String(type.hkIdentifier.dropFirst(prefix.count))
}

private func matchesNamePattern(_ name: String) -> Bool {
    guard (2...64).contains(name.count), let first = name.first, ("a"..."z").contains(first) else { return false }
    return name.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
}

private func type(_ name: String) throws -> HealthType {
    try #require(HealthTypes.named(name), "no type \(name)")
}

@Suite struct RegistryShape {
    @Test func dataParsesWithoutProblems() {
        #expect(HealthRegistryStore.contents.problems == [])
    }

    @Test func rowCounts() {
        #expect(HealthTypes.all.filter { $0.kind == .quantity }.count == 120)
        #expect(HealthTypes.all.filter { $0.kind == .category }.count == 68)
        #expect(HealthTypes.workouts.count == 84)
        #expect(HealthTypes.characteristics.count == 6)
        #expect(HealthTypes.all.filter { $0.name.hasPrefix("dietary_") }.count == 39)
        let symptoms = HealthTypes.all.filter { type in
            type.kind == .category && type.categoryValues.map(\.name) == ["unspecified", "not_present", "mild", "moderate", "severe"]
        }
        #expect(symptoms.count == 36)
    }

    @Test func namesAreUniqueAndWellFormed() {
        var seen: Set<String> = []
        for type in HealthTypes.all {
            #expect(matchesNamePattern(type.name), "\(type.name)")
            #expect(seen.insert(type.name).inserted, "duplicate \(type.name)")
        }
    }

    @Test func namesAreSnakeCaseOfTheIdentifier() {
        for type in HealthTypes.all {
            #expect(type.name == expectedName(forShortIdentifier: shortIdentifier(type)), "\(type.hkIdentifier)")
        }
    }

    @Test func namedExamplesFromTheBrief() throws {
        let expected = [
            "steps": "HKQuantityTypeIdentifierStepCount",
            "heart_rate": "HKQuantityTypeIdentifierHeartRate",
            "dietary_water": "HKQuantityTypeIdentifierDietaryWater",
            "body_mass": "HKQuantityTypeIdentifierBodyMass",
            "distance_walking_running": "HKQuantityTypeIdentifierDistanceWalkingRunning",
            "heart_rate_variability_sdnn": "HKQuantityTypeIdentifierHeartRateVariabilitySDNN",
            "vo2_max": "HKQuantityTypeIdentifierVO2Max",
            "uv_exposure": "HKQuantityTypeIdentifierUVExposure",
            "environmental_audio_exposure": "HKQuantityTypeIdentifierEnvironmentalAudioExposure",
            "apple_exercise_time": "HKQuantityTypeIdentifierAppleExerciseTime",
            "mindful_session": "HKCategoryTypeIdentifierMindfulSession",
            "sleep_analysis": "HKCategoryTypeIdentifierSleepAnalysis",
            "apple_stand_hour": "HKCategoryTypeIdentifierAppleStandHour",
            "heart_rate_recovery_one_minute": "HKQuantityTypeIdentifierHeartRateRecoveryOneMinute"
        ]
        for (name, identifier) in expected {
            #expect(try type(name).hkIdentifier == identifier)
        }
    }

    @Test func identifiersAreUnique() {
        let identifiers = HealthTypes.all.map(\.hkIdentifier)
        #expect(Set(identifiers).count == identifiers.count)
        let shorts = HealthTypes.all.map(shortIdentifier)
        #expect(Set(shorts).count == shorts.count, "a quantity and a category share a short identifier")
    }

    @Test func kindsCarryTheRightFields() {
        for type in HealthTypes.all {
            switch type.kind {
            case .quantity:
                #expect(type.unit != nil && type.family != nil, "\(type.name)")
                #expect(type.categoryValues.isEmpty, "\(type.name)")
                #expect(type.hkIdentifier.hasPrefix("HKQuantityTypeIdentifier"))
            case .category:
                #expect(type.unit == nil && type.family == nil && type.bounds == nil, "\(type.name)")
                #expect(!type.categoryValues.isEmpty, "\(type.name)")
                #expect(type.aggregation == .discrete, "\(type.name)")
                #expect(type.hkIdentifier.hasPrefix("HKCategoryTypeIdentifier"))
            }
        }
    }

    @Test func aggregationFollowsHealthKit() throws {
        for name in [
            "steps", "active_energy_burned", "basal_energy_burned", "distance_walking_running", "flights_climbed",
            "apple_exercise_time", "dietary_water", "dietary_protein", "insulin_delivery", "time_in_daylight",
            "number_of_times_fallen", "inhaler_usage"
        ] {
            #expect(try type(name).aggregation == .cumulative, "\(name)")
        }
        for name in [
            "heart_rate", "body_mass", "oxygen_saturation", "vo2_max", "walking_speed", "blood_glucose",
            "environmental_audio_exposure", "uv_exposure", "apple_sleeping_breathing_disturbances",
            "atrial_fibrillation_burden", "body_temperature"
        ] {
            #expect(try type(name).aggregation == .discrete, "\(name)")
        }
        for type in HealthTypes.all where type.name.hasPrefix("dietary_") {
            #expect(type.aggregation == .cumulative, "\(type.name)")
        }
    }

    @Test func canonicalUnits() throws {
        let expected: [String: String] = [
            "steps": "count", "heart_rate": "count/min", "respiratory_rate": "count/min", "resting_heart_rate": "count/min",
            "body_mass": "kg", "height": "m", "dietary_water": "mL", "dietary_energy_consumed": "kcal",
            "dietary_protein": "g", "dietary_caffeine": "g", "oxygen_saturation": "%", "body_fat_percentage": "%",
            "vo2_max": "ml/(kg*min)", "physical_effort": "kcal/(kg*hr)", "blood_glucose": "mg/dL",
            "body_temperature": "degC", "blood_pressure_systolic": "mmHg", "heart_rate_variability_sdnn": "ms",
            "environmental_audio_exposure": "dBASPL", "walking_speed": "m/s", "running_vertical_oscillation": "cm",
            "electrodermal_activity": "S", "running_power": "W", "insulin_delivery": "IU",
            "peak_expiratory_flow_rate": "L/min", "forced_vital_capacity": "L", "apple_exercise_time": "min",
            "workout_effort_score": "appleEffortScore", "uv_exposure": "count"
        ]
        for (name, unit) in expected {
            #expect(try type(name).unit == unit, "\(name)")
        }
    }
}

@Suite struct HealthKitLookup {
    static let sample = [
        "steps", "heart_rate", "resting_heart_rate", "heart_rate_variability_sdnn", "vo2_max", "uv_exposure",
        "body_mass", "dietary_water", "dietary_energy_consumed", "dietary_vitamin_b12", "oxygen_saturation",
        "distance_walking_running", "forced_expiratory_volume1", "apple_sleeping_breathing_disturbances",
        "sleep_analysis", "mindful_session", "apple_stand_hour", "rapid_pounding_or_fluttering_heartbeat",
        "menstrual_flow", "environmental_audio_exposure_event"
    ]

    @Test(arguments: sample)
    func fullShortAndLowerCamel(name: String) throws {
        let type = try type(name)
        let short = shortIdentifier(type)
        #expect(HealthTypes.hk(type.hkIdentifier) == type)
        #expect(HealthTypes.hk(short) == type)
        let lowerFirst = short.prefix(1).lowercased() + short.dropFirst()
        #expect(HealthTypes.hk(lowerFirst) == type, "\(lowerFirst)")
    }

    @Test func documentedSpellings() throws {
        #expect(HealthTypes.hk("HKQuantityTypeIdentifierStepCount")?.name == "steps")
        #expect(HealthTypes.hk("StepCount")?.name == "steps")
        #expect(HealthTypes.hk("stepCount")?.name == "steps")
        #expect(HealthTypes.hk("restingHeartRate")?.name == "resting_heart_rate")
        #expect(HealthTypes.hk("heartRateVariabilitySDNN")?.name == "heart_rate_variability_sdnn")
        #expect(HealthTypes.hk("dietaryEnergyConsumed")?.name == "dietary_energy_consumed")
        #expect(HealthTypes.hk("oxygenSaturation")?.name == "oxygen_saturation")
        #expect(HealthTypes.hk("bodyMass")?.name == "body_mass")
        // Swift's import spelling of identifiers that start with an acronym
        #expect(HealthTypes.hk("vo2Max")?.name == "vo2_max")
        #expect(HealthTypes.hk("uvExposure")?.name == "uv_exposure")
        #expect(HealthTypes.hk("sleepAnalysis")?.name == "sleep_analysis")
        #expect(HealthTypes.hk("HKCategoryTypeIdentifierSleepAnalysis")?.kind == .category)
    }

    @Test func rejectsWrongPrefixCaseAndUnknown() {
        #expect(HealthTypes.hk("HKCategoryTypeIdentifierStepCount") == nil)
        #expect(HealthTypes.hk("HKQuantityTypeIdentifierSleepAnalysis") == nil)
        #expect(HealthTypes.hk("stepcount") == nil)
        #expect(HealthTypes.hk("STEPCOUNT") == nil)
        #expect(HealthTypes.hk("steps") == nil)
        #expect(HealthTypes.hk("") == nil)
        #expect(HealthTypes.hk("HKQuantityTypeIdentifier") == nil)
        #expect(HealthTypes.hk("HKCategoryTypeIdentifier") == nil)
        #expect(HealthTypes.hk("HKQuantityTypeIdentifierFooBar") == nil)
        #expect(HealthTypes.hk("ßtepCount") == nil)
        #expect(HealthTypes.hk("🙂") == nil)
    }
}

@Suite struct HealthAutoExportNames {
    @Test func everyHAENameMapsToExactlyOneType() {
        var owners: [String: [String]] = [:]
        for type in HealthTypes.all {
            for name in type.haeNames { owners[name, default: []].append(type.name) }
        }
        for (haeName, types) in owners {
            #expect(types.count == 1, "\(haeName) → \(types)")
            #expect(HealthTypes.hae(haeName)?.name == types.first, "\(haeName)")
            #expect(matchesNamePattern(haeName), "\(haeName)")
            if let other = HealthTypes.named(haeName) {
                #expect(other.name == types.first, "HAE name \(haeName) is another type's name")
            }
        }
    }

    @Test func mappingsFromTheBrief() {
        let expected: [String: String] = [
            "step_count": "steps", "weight_body_mass": "body_mass", "blood_oxygen_saturation": "oxygen_saturation",
            "walking_heart_rate_average": "walking_heart_rate_average", "walking_heart_rate": "walking_heart_rate_average",
            "environmental_audio_exposure": "environmental_audio_exposure", "environmental_audio": "environmental_audio_exposure",
            "protein": "dietary_protein", "monounsaturated_fat": "dietary_fat_monounsaturated",
            "monosaturated_fat": "dietary_fat_monounsaturated", "number_of_times_fallen": "number_of_times_fallen",
            "number_of_time_fallen": "number_of_times_fallen", "mindful_minutes": "mindful_session",
            "cardio_recovery": "heart_rate_recovery_one_minute", "walking_running_distance": "distance_walking_running",
            "stair_speed_up": "stair_ascent_speed", "stair_speed_down": "stair_descent_speed",
            "heart_rate_variability": "heart_rate_variability_sdnn", "active_energy": "active_energy_burned",
            "dietary_energy": "dietary_energy_consumed", "total_fat": "dietary_fat_total",
            "breathing_disturbances": "apple_sleeping_breathing_disturbances", "handwashing": "handwashing_event",
            "six_minute_walking_test_distance": "six_minute_walk_test_distance", "apple_stand_hour": "apple_stand_hour",
            "wheelchair_push_count": "push_count", "swim_stroke_count": "swimming_stroke_count",
            "under_water_temperature": "water_temperature", "forced_expiratory_volume": "forced_expiratory_volume1"
        ]
        for (haeName, name) in expected {
            #expect(HealthTypes.hae(haeName)?.name == name, "\(haeName)")
        }
        #expect(HealthTypes.named("walking_heart_rate_average")?.haeNames == ["walking_heart_rate_average", "walking_heart_rate"])
        #expect(HealthTypes.named("environmental_audio_exposure")?.haeNames == ["environmental_audio_exposure", "environmental_audio"])
        #expect(HealthTypes.named("dietary_fat_monounsaturated")?.haeNames == ["monounsaturated_fat", "monosaturated_fat"])
        #expect(HealthTypes.named("number_of_times_fallen")?.haeNames == ["number_of_times_fallen", "number_of_time_fallen"])
        #expect(HealthTypes.named("dietary_phosphorus")?.haeNames == [])
        #expect(HealthTypes.named("cross_country_skiing_speed")?.haeNames == [])
    }

    /// Every metric name listed in the research (§1.6) resolves, except the blood_pressure correlation.
    @Test func everyResearchedNameResolves() {
        let names = """
            active_energy basal_energy_burned apple_exercise_time apple_move_time apple_stand_time apple_stand_hour
            step_count flights_climbed walking_running_distance cycling_distance swimming_distance wheelchair_distance
            downhill_snow_sports wheelchair_push_count swim_stroke_count vo2_max physical_effort cycling_cadence
            cycling_functional_threshold_power cycling_power cycling_speed running_power running_speed
            running_ground_contact_time running_stride_length running_vertical_oscillation height weight_body_mass
            waist_circumference body_fat_percentage body_mass_index lean_body_mass heart_rate resting_heart_rate
            heart_rate_variability walking_heart_rate_average walking_heart_rate cardio_recovery atrial_fibrillation_burden
            walking_speed walking_step_length walking_asymmetry_percentage walking_double_support_percentage
            six_minute_walking_test_distance stair_speed_up stair_speed_down respiratory_rate blood_oxygen_saturation
            forced_expiratory_volume forced_vital_capacity peak_expiratory_flow_rate peripheral_perfusion_index inhaler_usage
            body_temperature basal_body_temperature apple_sleeping_wrist_temperature under_water_depth under_water_temperature
            uv_exposure time_in_daylight environmental_audio_exposure environmental_audio headphone_audio_exposure
            headphone_audio mindful_minutes sexual_activity electrodermal_activity breathing_disturbances sleep_analysis
            insulin_delivery blood_glucose blood_alcohol_content handwashing toothbrushing number_of_time_fallen
            number_of_times_fallen number_of_alcoholic_beverages dietary_energy dietary_water dietary_sugar protein
            carbohydrates total_fat saturated_fat monosaturated_fat monounsaturated_fat polyunsaturated_fat cholesterol
            fiber sodium potassium calcium iron magnesium zinc caffeine biotin chloride chromium copper folate iodine
            manganese molybdenum niacin pantothenic_acid riboflavin selenium thiamin vitamin_a vitamin_b6 vitamin_b12
            vitamin_c vitamin_d vitamin_e vitamin_k
            """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        #expect(names.count == 116 && Set(names).count == names.count)
        for name in names {
            #expect(HealthTypes.hae(name) != nil, "\(name)")
        }
        #expect(HealthTypes.hae("blood_pressure") == nil)
    }

    @Test func haeLookupToleratesCaseButNotUnknown() {
        #expect(HealthTypes.hae("Step_Count")?.name == "steps")
        #expect(HealthTypes.hae(" step_count ")?.name == "steps")
        #expect(HealthTypes.hae("steps") == nil)
        #expect(HealthTypes.hae("") == nil)
        #expect(HealthTypes.hae("no_such_metric") == nil)
    }
}

@Suite struct CategoryValues {
    @Test func codesAreUniquePerType() {
        for type in HealthTypes.all where type.kind == .category {
            let codes = type.categoryValues.map(\.code)
            #expect(Set(codes).count == codes.count, "\(type.name)")
            var spellings: Set<String> = []
            for value in type.categoryValues {
                for spelling in [value.name] + value.aliases {
                    #expect(spellings.insert(spelling).inserted, "\(type.name): \(spelling) twice")
                }
                #expect(type.code(forValue: value.name) == value.code)
                #expect(type.valueName(forCode: value.code) == value.name)
                for alias in value.aliases { #expect(type.code(forValue: alias) == value.code, "\(alias)") }
            }
        }
    }

    @Test func sleepAnalysis() throws {
        let sleep = try type("sleep_analysis")
        let expected = ["in_bed": 0, "asleep_unspecified": 1, "awake": 2, "asleep_core": 3, "asleep_deep": 4, "asleep_rem": 5]
        #expect(sleep.categoryValues.count == 6)
        for (name, code) in expected {
            #expect(sleep.code(forValue: name) == code, "\(name)")
            #expect(sleep.valueName(forCode: code) == name)
        }
        #expect(sleep.code(forValue: "asleep") == 1)
        #expect(sleep.valueName(forCode: 1) == "asleep_unspecified")
        // spellings other apps use
        #expect(sleep.code(forValue: "asleepCore") == 3)
        #expect(sleep.code(forValue: "AsleepREM") == 5)
        #expect(sleep.code(forValue: "In Bed") == 0)
        #expect(sleep.code(forValue: "InBed") == 0)
        #expect(sleep.code(forValue: "REM") == 5)
        #expect(sleep.code(forValue: "Deep") == 4)
        #expect(sleep.code(forValue: "ASLEEP_CORE") == 3)
        #expect(sleep.code(forValue: "dreaming") == nil)
        #expect(sleep.code(forValue: "") == nil)
        #expect(sleep.valueName(forCode: 6) == nil)
        #expect(sleep.valueName(forCode: -1) == nil)
        #expect(sleep.writable)
    }

    @Test func standHourMenstrualFlowAndOthers() throws {
        let stand = try type("apple_stand_hour")
        #expect(stand.code(forValue: "stood") == 0)
        #expect(stand.code(forValue: "idle") == 1)
        #expect(!stand.writable)

        let flow = try type("menstrual_flow")
        for (name, code) in ["unspecified": 1, "light": 2, "medium": 3, "heavy": 4, "none": 5] {
            #expect(flow.code(forValue: name) == code)
        }
        #expect(flow.code(forValue: "not_applicable") == nil)
        #expect(flow.writable)

        let ovulation = try type("ovulation_test_result")
        #expect(ovulation.code(forValue: "luteinizing_hormone_surge") == 2)
        #expect(ovulation.code(forValue: "positive") == 2)
        #expect(try type("cervical_mucus_quality").code(forValue: "egg_white") == 5)
        #expect(try type("contraceptive").code(forValue: "intrauterine_device") == 4)
        #expect(try type("appetite_changes").code(forValue: "increased") == 3)
        #expect(try type("apple_walking_steadiness_event").code(forValue: "repeat_very_low") == 4)
        #expect(try type("low_cardio_fitness_event").code(forValue: "low_fitness") == 1)
    }

    @Test func symptomsUseSeverityOrPresence() throws {
        let severity = ["unspecified": 0, "not_present": 1, "mild": 2, "moderate": 3, "severe": 4]
        for name in ["headache", "fatigue", "nausea", "coughing", "fever", "wheezing", "lower_back_pain", "acne"] {
            let symptom = try type(name)
            #expect(symptom.writable, "\(name)")
            for (value, code) in severity { #expect(symptom.code(forValue: value) == code, "\(name) \(value)") }
        }
        for name in ["mood_changes", "sleep_changes"] {
            let symptom = try type(name)
            #expect(symptom.code(forValue: "present") == 0)
            #expect(symptom.code(forValue: "not_present") == 1)
            #expect(symptom.code(forValue: "mild") == nil)
        }
    }

    @Test func eventsUseNotApplicable() throws {
        for name in [
            "high_heart_rate_event", "low_heart_rate_event", "irregular_heart_rhythm_event", "handwashing_event",
            "toothbrushing_event", "sleep_apnea_event"
        ] {
            let event = try type(name)
            #expect(event.categoryValues == [CategoryValue(name: "not_applicable", code: 0, aliases: [])], "\(name)")
            #expect(!event.writable, "\(name)")
        }
        #expect(try type("mindful_session").code(forValue: "not_applicable") == 0)
        #expect(try type("mindful_session").writable)
    }

    @Test func quantitiesHaveNoValues() throws {
        let steps = try type("steps")
        #expect(steps.code(forValue: "not_applicable") == nil)
        #expect(steps.valueName(forCode: 0) == nil)
    }
}

@Suite struct Writability {
    @Test func writableQuantitiesHaveBoundsAndFamily() {
        for type in HealthTypes.all where type.kind == .quantity {
            if type.writable {
                #expect(type.bounds != nil, "\(type.name)")
                #expect(
                    type.family != nil && type.family != .other || type.name == "insulin_delivery"
                        || type.name == "peak_expiratory_flow_rate", "\(type.name)")
                if let bounds = type.bounds { #expect(bounds.lowerBound < bounds.upperBound, "\(type.name)") }
            } else {
                #expect(type.bounds == nil, "\(type.name) has bounds but cannot be written")
            }
        }
    }

    @Test func watchComputedTypesAreNotWritable() throws {
        for name in [
            "apple_exercise_time", "apple_stand_time", "apple_move_time", "heart_rate_variability_sdnn",
            "vo2_max", "walking_speed", "walking_step_length", "walking_asymmetry_percentage",
            "walking_double_support_percentage", "walking_heart_rate_average", "environmental_audio_exposure",
            "headphone_audio_exposure", "apple_walking_steadiness", "resting_heart_rate", "apple_stand_hour",
            "high_heart_rate_event", "apple_sleeping_wrist_temperature", "six_minute_walk_test_distance"
        ] {
            #expect(try !type(name).writable, "\(name)")
        }
    }

    @Test func userLoggedTypesAreWritable() throws {
        for name in [
            "body_mass", "height", "body_fat_percentage", "dietary_water", "dietary_caffeine",
            "dietary_energy_consumed", "mindful_session", "sleep_analysis", "blood_pressure_systolic",
            "blood_pressure_diastolic", "blood_glucose", "body_temperature", "menstrual_flow", "heart_rate"
        ] {
            #expect(try type(name).writable, "\(name)")
        }
        for type in HealthTypes.all where type.name.hasPrefix("dietary_") {
            #expect(type.writable, "\(type.name)")
        }
    }

    @Test func boundsFromTheBrief() throws {
        #expect(try type("body_mass").bounds == 0.5...700)
        #expect(try type("heart_rate").bounds == 20...300)
        #expect(try type("dietary_water").bounds == 0...10_000) // 10 L in mL
        let spo2 = try #require(try type("oxygen_saturation").bounds)
        #expect(spo2.contains(0.95) && !spo2.contains(95))
    }

    /// The write command of the Syncky guide: `dietary_water 0.25 L`.
    @Test func dietaryWaterAcceptsLitres() throws {
        let water = try type("dietary_water")
        let unit = try #require(water.unit)
        #expect(Units.family(of: "L") == water.family)
        #expect(Units.units(of: try #require(water.family)).contains("L"))
        let value = try #require(Units.convert(0.25, from: "L", to: unit))
        #expect(abs(value - 250) < 1e-9)
        #expect(try #require(water.bounds).contains(value))
        #expect(Units.family(of: "kg") != water.family)
    }
}

@Suite struct Workouts {
    @Test func lookups() throws {
        let strength = try #require(HealthTypes.workout(haeName: "Traditional Strength Training"))
        #expect(strength.name == "traditional_strength_training")
        #expect(strength.rawValue == 50)
        #expect(HealthTypes.workout(named: "traditional_strength_training") == strength)
        #expect(HealthTypes.workout(rawValue: 50) == strength)
        #expect(HealthTypes.workout(named: "running")?.rawValue == 37)
        #expect(HealthTypes.workout(rawValue: 37)?.name == "running")
        #expect(HealthTypes.workout(rawValue: 37)?.haeName == "Running")
        #expect(HealthTypes.workout(named: "other")?.rawValue == 3000)
        #expect(HealthTypes.workout(rawValue: 3000)?.haeName == "Other")
        #expect(HealthTypes.workout(rawValue: 63)?.name == "high_intensity_interval_training")
        #expect(HealthTypes.workout(haeName: "high intensity interval training")?.rawValue == 63)
        // The Fitness app's names, as Health Auto Export passes them on.
        for (name, activity) in [
            ("Outdoor Run", "running"), ("Indoor Walk", "walking"), ("Outdoor Cycle", "cycling"),
            ("Indoor Cycling", "cycling"), ("Pool Swim", "swimming"), ("Open Water Swim", "swimming"),
            ("Outdoor Hike", "hiking"), ("Indoor Rower", "rowing")
        ] {
            #expect(HealthTypes.workout(haeName: name)?.name == activity, "\(name)")
        }
        #expect(HealthTypes.workout(haeName: "Outdoor Zorbing") == nil)
        #expect(HealthTypes.workout(haeName: "TRADITIONAL STRENGTH TRAINING")?.rawValue == 50)
        #expect(HealthTypes.workout(haeName: "Mind & Body")?.rawValue == 29)
        #expect(HealthTypes.workout(haeName: "Mind and Body")?.rawValue == 29)
        #expect(HealthTypes.workout(named: "highIntensityIntervalTraining")?.rawValue == 63)
        #expect(HealthTypes.workout(named: "taiChi")?.rawValue == 72)
    }

    @Test func unknownWorkouts() {
        #expect(HealthTypes.workout(rawValue: 81) == nil)
        #expect(HealthTypes.workout(rawValue: 0) == nil)
        #expect(HealthTypes.workout(rawValue: -1) == nil)
        #expect(HealthTypes.workout(rawValue: Int.max) == nil)
        #expect(HealthTypes.workout(named: "") == nil)
        #expect(HealthTypes.workout(named: "jogging") == nil)
        #expect(HealthTypes.workout(haeName: "") == nil)
        #expect(HealthTypes.workout(haeName: "Quidditch") == nil)
    }

    @Test func rowsAreConsistent() {
        var names: Set<String> = []
        var raws: Set<Int> = []
        for workout in HealthTypes.workouts {
            #expect(matchesNamePattern(workout.name), "\(workout.name)")
            #expect(names.insert(workout.name).inserted, "\(workout.name)")
            #expect(raws.insert(workout.rawValue).inserted, "\(workout.rawValue)")
            // HAE name is the HealthKit case name de-camel-cased: snake words in Title Case
            let title = workout.name.split(separator: "_").map { $0.prefix(1).uppercased() + $0.dropFirst() }
                .joined(separator: " ")
            #expect(workout.haeName == title, "\(workout.name)")
            #expect(HealthTypes.workout(haeName: workout.haeName) == workout)
            #expect(HealthTypes.workout(named: workout.name) == workout)
            #expect(HealthTypes.workout(rawValue: workout.rawValue) == workout)
        }
        #expect(Set(1...80).isSubset(of: raws))
        #expect(raws.subtracting(1...80) == [82, 83, 84, 3000])
    }
}

@Suite struct Characteristics {
    @Test func bloodType() throws {
        let blood = try #require(HealthTypes.characteristic(named: "blood_type"))
        let expected = [
            "not_set": 0, "a_positive": 1, "a_negative": 2, "b_positive": 3, "b_negative": 4,
            "ab_positive": 5, "ab_negative": 6, "o_positive": 7, "o_negative": 8
        ]
        #expect(blood.values.count == 9)
        for (name, code) in expected {
            #expect(blood.values.first { $0.name == name }?.code == code, "\(name)")
            #expect(blood.code(forValue: name) == code)
            #expect(blood.valueName(forCode: code) == name)
        }
        #expect(blood.code(forValue: "A+") == 1)
        #expect(blood.code(forValue: "AB-") == 6)
        #expect(blood.code(forValue: "O+") == 7)
        #expect(blood.code(forValue: "c_positive") == nil)
    }

    @Test func allCharacteristics() throws {
        #expect(
            Set(HealthTypes.characteristics.map(\.name)) == [
                "biological_sex", "blood_type", "fitzpatrick_skin_type",
                "wheelchair_use", "activity_move_mode", "date_of_birth"
            ])
        #expect(try #require(HealthTypes.characteristic(named: "date_of_birth")).values.isEmpty)
        let sex = try #require(HealthTypes.characteristic(named: "biological_sex"))
        #expect(sex.code(forValue: "female") == 1 && sex.code(forValue: "male") == 2 && sex.code(forValue: "other") == 3)
        let skin = try #require(HealthTypes.characteristic(named: "fitzpatrick_skin_type"))
        #expect(skin.code(forValue: "i") == 1 && skin.code(forValue: "vi") == 6 && skin.code(forValue: "type_iii") == 3)
        let wheelchair = try #require(HealthTypes.characteristic(named: "wheelchair_use"))
        #expect(wheelchair.code(forValue: "no") == 1 && wheelchair.code(forValue: "yes") == 2)
        let move = try #require(HealthTypes.characteristic(named: "activity_move_mode"))
        #expect(move.code(forValue: "active_energy") == 1 && move.code(forValue: "apple_move_time") == 2)
        for characteristic in HealthTypes.characteristics {
            let codes = characteristic.values.map(\.code)
            #expect(Set(codes).count == codes.count, "\(characteristic.name)")
        }
        #expect(HealthTypes.characteristic(named: "eye_color") == nil)
        #expect(HealthTypes.characteristic(named: "") == nil)
    }
}

@Suite struct UnknownInput {
    @Test func lookupsReturnNil() {
        for text in ["", " ", "nope", "STEPS", "Steps", "steps ", "🙂", "\u{0}", String(repeating: "a", count: 10_000)] {
            #expect(HealthTypes.named(text) == nil, "\(text)")
            #expect(HealthTypes.hk(text) == nil)
            #expect(HealthTypes.hae(text) == nil)
            #expect(HealthTypes.workout(named: text) == nil)
            #expect(HealthTypes.workout(haeName: text) == nil)
            #expect(HealthTypes.characteristic(named: text) == nil)
            #expect(Units.family(of: text) == nil)
            #expect(Units.convert(1, from: text, to: "kg") == nil)
            #expect(Units.convert(1, from: "kg", to: text) == nil)
            #expect(HealthTypes.named("sleep_analysis")?.code(forValue: text) == nil)
        }
    }

    @Test func malformedDataIsReportedNotFatal() {
        let contents = HealthRegistryStore.parse(
            """
            # a comment
            values | s | a=0 b=x c
            quantity | Bad Name | HKQuantityTypeIdentifierX | kg | mass | discrete | no | - | - | -
            quantity | x_unit | HKQuantityTypeIdentifierY | furlong | length | discrete | no | - | - | -
            quantity | wrong_family | HKQuantityTypeIdentifierZ | kg | length | discrete | no | - | - | -
            quantity | bad_bounds | HKQuantityTypeIdentifierW | kg | mass | discrete | yes | 9...1 | - | -
            category | no_set | HKCategoryTypeIdentifierV | - | - | discrete | no | - | - | missing
            category | wrong_prefix | HKQuantityTypeIdentifierU | - | - | discrete | no | - | - | s
            category | short_row | HKCategoryTypeIdentifierT
            workout | x | running | Running
            characteristic | c | missing
            mystery | row
            quantity | good | HKQuantityTypeIdentifierGood | kg | mass | discrete | yes | 1...2 | good_one | -
            """)
        #expect(contents.problems.count == 12)
        #expect(contents.types.map(\.name) == ["good"])
        #expect(contents.types.first?.bounds == 1...2)
        #expect(contents.workouts.isEmpty && contents.characteristics.isEmpty)
    }
}

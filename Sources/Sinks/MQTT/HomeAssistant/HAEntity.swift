import HealthgateCore

/// What one Home Assistant sensor shows for one health type: which reading, in which unit, with
/// which device and state class (only those HA defines for that unit — research §3: none exists
/// for heart rate, steps, SpO2, respiratory rate, HRV, BMI or VO2max).
public struct HAEntity: Sendable, Equatable {
    public enum Reading: String, Sendable {
        /// Today's total in the phone's local day (cumulative types), reset at local midnight.
        case todayTotal = "today"
        /// The newest sample by its own time (discrete types).
        case newest
        /// Last night's time asleep (sleep_analysis), stages as attributes.
        case lastNight = "last_night"
        /// The last workout (its activity as the state).
        case lastWorkout = "last_workout"
        /// One figure of the last workout (`HAStateBook.WorkoutFigure`), a sensor of its own.
        case workoutFigure = "workout_figure"
        /// An HA `event` entity that fires once per new last workout (nothing retained).
        case workoutEvent = "workout_event"
    }

    public var type: String
    /// `steps_today`, `heart_rate`, `sleep_last_night`: the entity's object id (per phone).
    public var objectID: String
    /// `Steps today`, `Heart rate`.
    public var name: String
    public var reading: Reading
    /// The unit shown (`steps`, `bpm`, `kg`, `%`, `h`); nil for a text state.
    public var unit: String?
    /// The type's canonical unit, which `unit` is converted from (nil: no conversion).
    public var canonicalUnit: String?
    public var deviceClass: String?
    public var stateClass: String?
    public var precision: Int?

    /// The record type whose samples the entity shows: its own, or `workout` for the workout's
    /// figures and event (`workout.duration`, `workout.event`).
    public var recordType: String { type.split(separator: ".").first.map(String.init) ?? type }
    /// The MQTT discovery component: an `event` for the workout event, else a `sensor`.
    public var component: String { reading == .workoutEvent ? "event" : "sensor" }

    /// The value shown, from one in the type's canonical unit.
    public func display(_ canonical: Double) -> Double {
        guard let from = canonicalUnit, let to = unit else { return canonical }
        if from == "%" { return canonical * 100 } // the registry's % is a fraction 0–1
        if from == to { return canonical }
        return Units.convert(canonical, from: from, to: HAEntity.unitsSpelling[to] ?? to) ?? canonical
    }

    /// Display units whose spelling in `Units` differs.
    static let unitsSpelling: [String: String] = ["°C": "degC", "°F": "degF", "km/h": "km/hr"]
}

/// The entities healthgate announces, by type: a default set people expect (the companion
/// app's 22 metrics and more), overridable per sink with `include`/`exclude` and `units`.
public enum HACatalog {
    /// (type, object id, name, unit shown, device class, state class, precision)
    static let rows: [(String, String, String, String?, String?, String?, Int?)] = [
        // Daily totals.
        ("steps", "steps_today", "Steps today", "steps", nil, "total", 0),
        ("active_energy_burned", "active_energy_today", "Active energy today", "kcal", nil, "total", 0),
        ("basal_energy_burned", "resting_energy_today", "Resting energy today", "kcal", nil, "total", 0),
        ("distance_walking_running", "walking_running_distance_today", "Walking + running distance today", "km", "distance", "total", 2),
        ("distance_cycling", "cycling_distance_today", "Cycling distance today", "km", "distance", "total", 2),
        ("flights_climbed", "flights_climbed_today", "Flights climbed today", "floors", nil, "total", 0),
        ("apple_exercise_time", "exercise_time_today", "Exercise time today", "min", "duration", "total", 0),
        ("apple_stand_time", "stand_time_today", "Stand time today", "min", "duration", "total", 0),
        ("dietary_water", "water_today", "Water today", "mL", "volume", "total", 0),
        ("dietary_energy_consumed", "dietary_energy_today", "Dietary energy today", "kcal", nil, "total", 0),
        // Newest values.
        ("heart_rate", "heart_rate", "Heart rate", "bpm", nil, "measurement", 0),
        ("resting_heart_rate", "resting_heart_rate", "Resting heart rate", "bpm", nil, "measurement", 0),
        ("walking_heart_rate_average", "walking_heart_rate", "Walking heart rate", "bpm", nil, "measurement", 0),
        ("heart_rate_variability_sdnn", "heart_rate_variability", "Heart rate variability", "ms", nil, "measurement", 0),
        ("oxygen_saturation", "blood_oxygen", "Blood oxygen", "%", nil, "measurement", 0),
        ("respiratory_rate", "respiratory_rate", "Respiratory rate", "breaths/min", nil, "measurement", 1),
        ("body_mass", "weight", "Weight", "kg", "weight", "measurement", 1),
        ("body_mass_index", "body_mass_index", "Body mass index", nil, nil, "measurement", 1),
        ("body_fat_percentage", "body_fat", "Body fat", "%", nil, "measurement", 1),
        ("lean_body_mass", "lean_body_mass", "Lean body mass", "kg", "weight", "measurement", 1),
        ("blood_pressure_systolic", "blood_pressure_systolic", "Blood pressure systolic", "mmHg", "pressure", "measurement", 0),
        ("blood_pressure_diastolic", "blood_pressure_diastolic", "Blood pressure diastolic", "mmHg", "pressure", "measurement", 0),
        ("blood_glucose", "blood_glucose", "Blood glucose", "mg/dL", "blood_glucose_concentration", "measurement", 0),
        ("body_temperature", "body_temperature", "Body temperature", "°C", "temperature", "measurement", 1),
        ("vo2_max", "vo2_max", "VO2 max", "mL/(kg·min)", nil, "measurement", 1),
        ("walking_speed", "walking_speed", "Walking speed", "km/h", "speed", "measurement", 1),
        // Sleep and workouts.
        ("sleep_analysis", "sleep_last_night", "Sleep last night", "h", "duration", "measurement", 2),
        ("workout", "last_workout", "Last workout", nil, nil, nil, nil),
        ("workout.duration", "last_workout_duration", "Last workout duration", "min", "duration", nil, 0),
        ("workout.energy", "last_workout_energy", "Last workout energy", "kcal", nil, nil, 0),
        ("workout.distance", "last_workout_distance", "Last workout distance", "km", "distance", nil, 2),
        ("workout.heart_rate", "last_workout_heart_rate", "Last workout heart rate", "bpm", nil, nil, 0),
        ("workout.event", "workout", "Workout", nil, nil, nil, nil)
    ]

    /// The units the catalog's display units are converted from, where they differ in name.
    static let canonicalOverride: [String: String] = [
        "steps": "count", "floors": "count", "bpm": "count/min",
        "breaths/min": "count/min", "mL/(kg·min)": "ml/(kg*min)"
    ]

    public static let all: [HAEntity] = rows.map { row in
        let (type, object, name, unit, deviceClass, stateClass, precision) = row
        let reading: HAEntity.Reading =
            switch type {
            case "sleep_analysis": .lastNight
            case "workout": .lastWorkout
            case "workout.event": .workoutEvent
            case _ where type.hasPrefix("workout."): .workoutFigure
            default: HealthTypes.named(type)?.aggregation == .cumulative ? .todayTotal : .newest
            }
        var canonical = HealthTypes.named(type)?.unit
        if let u = unit, canonicalOverride[u] != nil { canonical = nil } // same quantity, another name
        if type == "sleep_analysis" || type.hasPrefix("workout.") { canonical = nil } // made by the book in its unit
        return HAEntity(
            type: type, objectID: object, name: name, reading: reading, unit: unit, canonicalUnit: canonical,
            deviceClass: deviceClass, stateClass: stateClass, precision: precision)
    }

    public static func entity(forType type: String) -> HAEntity? { all.first { $0.type == type } }
}

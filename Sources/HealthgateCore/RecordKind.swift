/// The kinds of record, and which kind a type name belongs to when the body does not say.
///
/// The full type registry (units, bounds, HealthKit identifiers) is its own piece of work;
/// this is the part every receiver needs to tell kinds apart.
public enum RecordKind {
    public static let quantity = "quantity"
    public static let category = "category"
    public static let workout = "workout"
    public static let characteristic = "characteristic"

    /// Kinds whose type name is the kind itself.
    public static let namedKinds: Set<String> = [
        "workout", "characteristic", "state_of_mind", "gad7_assessment", "phq9_assessment",
        "audiogram", "activity_summary", "workout_route", "heartbeat_series", "ecg", "clinical_record",
    ]

    /// Kinds that come in parts, keyed by `(device, uuid, part)`.
    public static let partedKinds: Set<String> = ["workout_route", "heartbeat_series"]

    /// HealthKit category types by their Syncky names.
    public static let categoryTypes: Set<String> = [
        "sleep_analysis", "apple_stand_hour", "mindful_session", "high_heart_rate_event",
        "low_heart_rate_event", "irregular_heart_rhythm_event", "low_cardio_fitness_event",
        "toothbrushing_event", "handwashing_event", "menstrual_flow", "intermenstrual_bleeding",
        "infrequent_menstrual_cycles", "irregular_menstrual_cycles", "persistent_intermenstrual_bleeding",
        "prolonged_menstrual_periods", "cervical_mucus_quality", "ovulation_test_result",
        "progesterone_test_result", "pregnancy_test_result", "pregnancy", "lactation", "contraceptive",
        "sexual_activity", "environmental_audio_exposure_event", "headphone_audio_exposure_event",
        "apple_walking_steadiness_event", "sleep_changes", "bleeding_after_pregnancy",
        "bleeding_during_pregnancy", "abdominal_cramps", "acne", "appetite_changes", "bladder_incontinence",
        "bloating", "breast_pain", "chest_tightness_or_pain", "chills", "constipation", "coughing",
        "diarrhea", "dizziness", "dry_skin", "fainting", "fatigue", "fever", "generalized_body_ache",
        "hair_loss", "headache", "heartburn", "hot_flashes", "lower_back_pain", "loss_of_smell",
        "loss_of_taste", "memory_lapse", "mood_changes", "nausea", "night_sweats", "pelvic_pain",
        "rapid_pounding_or_fluttering_heartbeat", "runny_nose", "shortness_of_breath", "sinus_congestion",
        "skipped_heartbeat", "sore_throat", "vaginal_dryness", "vomiting", "wheezing",
    ]

    /// The kind of a type named in a deletion or a body that gives no other hint.
    public static func kind(ofType type: String) -> String {
        if namedKinds.contains(type) { return type }
        if categoryTypes.contains(type) { return category }
        return quantity
    }
}

extension RecordKind {
    /// HealthKit's numeric value of a category value, for the types whose codes are fixed here.
    public static func categoryCode(type: String, name: String) -> Int? {
        switch type {
        case "sleep_analysis":
            return ["in_bed": 0, "asleep_unspecified": 1, "asleep": 1, "awake": 2, "asleep_core": 3,
                    "asleep_deep": 4, "asleep_rem": 5][name]
        case "apple_stand_hour":
            return ["stood": 0, "idle": 1][name]
        default:
            return nil
        }
    }
}

/// An app's summary of a night (Health Auto Export's aggregated sleep: a `summary` record of
/// `sleep_analysis`), its figures in minutes. The fields are as the app sent them, in the
/// record's unit (hours unless it says `min` or `s`). Asleep is `totalSleep`, else the sum of
/// `asleep` (sleep with no stage) and the stages. The postgres sink's `sleep_nights` view reads
/// the same fields the same way.
public struct SleepSummary: Equatable, Sendable {
    public var asleep: Double?
    public var inBed: Double?
    public var awake: Double?
    public var core: Double?
    public var deep: Double?
    public var rem: Double?

    public init?(_ r: CanonicalRecord) {
        guard r.type == "sleep_analysis", r.kind == "summary" else { return nil }
        let perMinute: Double = r.unit == "min" ? 1 : r.unit == "s" ? 1.0 / 60 : 60
        func minutes(_ name: String) -> Double? {
            guard let v = r.fields.first(where: { $0.name == name })?.value.number, v >= 0 else { return nil }
            return v * perMinute
        }
        core = minutes("core")
        deep = minutes("deep")
        rem = minutes("rem")
        inBed = minutes("inBed")
        awake = minutes("awake")
        let parts = [minutes("asleep"), core, deep, rem].compactMap { $0 }
        asleep = minutes("totalSleep") ?? (parts.isEmpty ? nil : parts.reduce(0, +))
    }
}

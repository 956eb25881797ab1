import HealthgateCore
import Posix
@testable import SinkMQTT
import Testing

/// The states the Home Assistant sink will publish, computed from records: today's totals that
/// stay right through resends and deletions, newest values by sample time, last night's sleep,
/// the last workout, local midnight, and state that survives a restart.
@Suite struct HAStateBookTests {
    /// 2026-12-01T12:00:00Z, a Tuesday; the phone is in Budapest (UTC+1 in winter).
    static let noon: Int64 = 1_796_126_400
    static let cet = 3600

    func book(timeZone: String? = nil) -> HAStateBook {
        HAStateBook(entities: HACatalog.all, timeZone: timeZone, timeZones: SystemTimeZones())
    }

    static func sample(
        _ uuid: String, _ type: String, _ value: Double, at t: Int64, offset: Int? = cet,
        unit: String? = nil, device: String = "phone-1"
    ) -> CanonicalRecord {
        CanonicalRecord(
            kind: "quantity", device: device, receiver: "phone", uuid: uuid, type: type, start: Timestamp(seconds: t),
            end: Timestamp(seconds: t + 60), utcOffset: offset, value: .number(value), unit: unit ?? HealthTypes.named(type)?.unit,
            source: RecordSource(app: "com.apple.Health", device: "Apple Watch"))
    }

    static func deletion(_ uuid: String, _ type: String) -> CanonicalRecord {
        CanonicalRecord(op: .delete, kind: "quantity", device: "phone-1", receiver: "r", uuid: uuid, type: type)
    }

    var now: Timestamp { Timestamp(seconds: Self.noon) }

    func state(_ updates: [HAUpdate], _ object: String) -> String? {
        updates.last { $0.entity.objectID == object }?.state
    }

    @Test func todaysTotalCountsEachSampleOnceAndFollowsDeletions() {
        let b = book()
        let batch = [Self.sample("s1", "steps", 1200, at: Self.noon - 3600), Self.sample("s2", "steps", 800, at: Self.noon - 1800)]
        #expect(state(b.apply(batch, now: now), "steps_today") == "2000")
        // The phone sends the same samples again: nothing changes, nothing to publish.
        #expect(b.apply(batch, now: now).isEmpty)
        // A sample resent with a corrected value replaces its own contribution.
        #expect(state(b.apply([Self.sample("s2", "steps", 500, at: Self.noon - 1800)], now: now), "steps_today") == "1700")
        #expect(state(b.apply([Self.deletion("s1", "steps")], now: now), "steps_today") == "500")
        let u = b.apply([Self.sample("s3", "steps", 1, at: Self.noon - 60)], now: now).first
        #expect(u?.attribute("last_reset") == .string("2026-12-01T00:00:00+01:00"))
        #expect(u?.attribute("measured_at") == .string("2026-12-01T12:59:00+01:00"))
        #expect(u?.attribute("source_app") == .string("com.apple.Health"))
        #expect(u?.attribute("samples") == .integer(2))
    }

    @Test func yesterdaysSamplesLeaveTodaysTotalAlone() {
        let b = book()
        _ = b.apply([Self.sample("t", "steps", 100, at: Self.noon - 600)], now: now)
        // 23:30 local yesterday (22:30Z), arriving late: history, not today.
        #expect(b.apply([Self.sample("y", "steps", 5000, at: Self.noon - 13 * 3600 - 1800)], now: now).isEmpty)
        // 00:30 local today is 23:30Z yesterday: it counts today.
        #expect(state(b.apply([Self.sample("m", "steps", 7, at: Self.noon - 12 * 3600 - 1800)], now: now), "steps_today") == "107")
    }

    @Test func aLateOlderValueNeverReplacesANewerOne() {
        let b = book()
        #expect(state(b.apply([Self.sample("h2", "heart_rate", 72, at: Self.noon - 60)], now: now), "heart_rate") == "72")
        #expect(b.apply([Self.sample("h1", "heart_rate", 58, at: Self.noon - 7200)], now: now).isEmpty)
        #expect(state(b.apply([Self.sample("h3", "heart_rate", 80, at: Self.noon - 30)], now: now), "heart_rate") == "80")
        // Deleting the newest falls back to the one before it.
        #expect(state(b.apply([Self.deletion("h3", "heart_rate")], now: now), "heart_rate") == "72")
    }

    @Test func thirtyDaysOfHistoryEndInOneStatePerEntity() {
        let b = book()
        var history: [CanonicalRecord] = []
        for day in 0..<30 {
            let t = Self.noon - Int64(day) * 86_400
            history.append(Self.sample("hr-\(day)", "heart_rate", Double(60 + day), at: t - 300))
            history.append(Self.sample("w-\(day)", "body_mass", 80 - Double(day) / 10, at: t - 40_000))
            history.append(Self.sample("st-\(day)", "steps", 1000, at: t - 900))
        }
        let updates = b.apply(history.shuffled(), now: now)
        #expect(updates.count == 3, "\(updates.map(\.entity.objectID))")
        #expect(state(updates, "heart_rate") == "60")
        #expect(state(updates, "weight") == "80")
        #expect(state(updates, "steps_today") == "1000")
    }

    @Test func localMidnightResetsTheTotalsInThePhonesTimeZone() {
        let b = book(timeZone: "Europe/Budapest")
        _ = b.apply([Self.sample("s", "steps", 4321, at: Self.noon - 600, offset: nil)], now: now)
        // 23:59:59 local: still today.
        let beforeMidnight = Timestamp(seconds: Self.noon + 11 * 3600 - 1)
        #expect(b.tick(now: beforeMidnight).isEmpty)
        let afterMidnight = Timestamp(seconds: Self.noon + 11 * 3600 + 1)
        let reset = b.tick(now: afterMidnight)
        #expect(state(reset, "steps_today") == "0")
        #expect(reset.first?.attribute("last_reset") == .string("2026-12-02T00:00:00+01:00"))
        #expect(b.tick(now: afterMidnight).isEmpty)
        // A phone whose records carry their offset (Tokyo, UTC+9) is reset at its own midnight,
        // whatever the sink's time_zone says: 15:00Z is midnight there.
        let tokyo = book(timeZone: "Europe/Budapest")
        _ = tokyo.apply([Self.sample("t", "steps", 99, at: Self.noon, offset: 9 * 3600)], now: now)
        #expect(tokyo.tick(now: Timestamp(seconds: Self.noon + 3 * 3600 - 1)).isEmpty)
        #expect(state(tokyo.tick(now: Timestamp(seconds: Self.noon + 3 * 3600 + 1)), "steps_today") == "0")
    }

    @Test func unitsAsPeopleReadThem() {
        let b = book()
        let u = b.apply(
            [
                Self.sample("o", "oxygen_saturation", 0.97, at: Self.noon - 60),
                Self.sample("d", "distance_walking_running", 1234.5, at: Self.noon - 60),
                Self.sample("v", "walking_speed", 1.25, at: Self.noon - 60),
                Self.sample("t", "body_temperature", 36.6, at: Self.noon - 60)
            ], now: now)
        #expect(state(u, "blood_oxygen") == "97")
        #expect(state(u, "walking_running_distance_today") == "1.23")
        #expect(state(u, "walking_speed") == "4.5")
        #expect(state(u, "body_temperature") == "36.6")
        let bp = HACatalog.entity(forType: "blood_pressure_systolic")
        #expect(bp?.deviceClass == "pressure" && bp?.unit == "mmHg" && bp?.stateClass == "measurement")
        #expect(HACatalog.entity(forType: "heart_rate")?.deviceClass == nil)
        #expect(HACatalog.entity(forType: "steps")?.reading == .todayTotal)
    }

    @Test func lastNightsSleepAndTheLastWorkout() {
        let b = book()
        func stage(_ uuid: String, _ name: String, from: Int64, minutes: Int64) -> CanonicalRecord {
            CanonicalRecord(
                kind: "category", device: "phone-1", receiver: "r", uuid: uuid, type: "sleep_analysis",
                start: Timestamp(seconds: from), end: Timestamp(seconds: from + minutes * 60), utcOffset: Self.cet,
                value: .string(name), source: RecordSource(app: "com.apple.Health", device: "Apple Watch"))
        }
        // Last night, 22:00–06:30 local (21:00Z–05:30Z).
        let bed = Self.noon - 15 * 3600
        let night = [
            stage("n1", "in_bed", from: bed, minutes: 510), stage("n2", "asleep_core", from: bed + 600, minutes: 240),
            stage("n3", "asleep_deep", from: bed + 15_000, minutes: 90), stage("n4", "awake", from: bed + 20_400, minutes: 10),
            stage("n5", "asleep_rem", from: bed + 21_000, minutes: 120)
        ]
        let u = b.apply(night, now: now)
        #expect(state(u, "sleep_last_night") == "7.5")
        let s = u.first { $0.entity.objectID == "sleep_last_night" }
        #expect(s?.attribute("asleep_deep_min") == .number(90))
        #expect(s?.attribute("bedtime") == .string("2026-11-30T22:00:00+01:00"))
        // The night before does not replace it.
        #expect(b.apply([stage("o1", "asleep_core", from: bed - 86_400, minutes: 400)], now: now).isEmpty)
        let run = CanonicalRecord(
            kind: "workout", device: "phone-1", receiver: "r", uuid: "wk", type: "workout",
            start: Timestamp(seconds: Self.noon - 3600), end: Timestamp(seconds: Self.noon - 1800),
            utcOffset: Self.cet, activity: "running", durationS: 1800, energyKcal: 310.4, distanceM: 5012)
        let w = b.apply([run], now: now).first
        #expect(w?.state == "running")
        #expect(w?.attribute("duration_min") == .number(30))
        #expect(w?.attribute("distance_km") == .number(5.01))
    }

    /// Issue 52: a night from a watch and a phone that overlap counts each moment once; the sleep
    /// day runs from 18:00 to 18:00 local (an afternoon nap belongs to the night before it).
    @Test func aNightFromTwoSourcesCountsEachMomentOnce() {
        let b = book()
        func stage(_ uuid: String, _ name: String, from: Int64, minutes: Int64, by device: String) -> CanonicalRecord {
            CanonicalRecord(
                kind: "category", device: "phone-1", receiver: "r", uuid: uuid, type: "sleep_analysis",
                start: Timestamp(seconds: from), end: Timestamp(seconds: from + minutes * 60), utcOffset: Self.cet,
                value: .string(name), source: RecordSource(app: "com.apple.Health", device: device))
        }
        // 22:30 local (21:30Z) the night before noon.
        let bed = Self.noon - 14 * 3600 - 1800
        let night = [
            stage("p1", "asleep_unspecified", from: bed, minutes: 450, by: "iPhone"), // 22:30–06:00
            stage("p0", "in_bed", from: bed - 600, minutes: 480, by: "iPhone"), // 22:20–06:20
            stage("w1", "asleep_core", from: bed + 1800, minutes: 240, by: "Apple Watch"), // 23:00–03:00
            stage("w2", "asleep_deep", from: bed + 16_200, minutes: 60, by: "Apple Watch"), // 03:00–04:00
            stage("w3", "awake", from: bed + 19_800, minutes: 10, by: "Apple Watch"), // 04:00–04:10 (the phone says asleep)
            stage("w4", "asleep_rem", from: bed + 20_400, minutes: 120, by: "Apple Watch") // 04:10–06:10
        ]
        let s = b.apply(night, now: now).first { $0.entity.objectID == "sleep_last_night" }
        // Asleep 22:30–06:10 by one source or the other: 460 min, not 450 + 420.
        #expect(s?.state == "7.67")
        #expect(s?.attribute("asleep_unspecified_min") == .number(40))
        #expect(s?.attribute("asleep_core_min") == .number(240))
        #expect(s?.attribute("awake_min") == .number(0))
        #expect(s?.attribute("in_bed_min") == .number(480))
        #expect(s?.attribute("bedtime") == .string("2026-11-30T22:20:00+01:00"))
        #expect(s?.attribute("wake_time") == .string("2026-12-01T06:10:00+01:00"))
        #expect(s?.attribute("sources") == .string("Apple Watch, iPhone"))
        // A nap at 14:00 is the same sleep day; at 19:00 a new one begins.
        let nap = b.apply([stage("n1", "asleep_unspecified", from: Self.noon + 3600, minutes: 30, by: "Apple Watch")], now: now)
        #expect(state(nap, "sleep_last_night") == "8.17")
        let evening = b.apply([stage("e1", "asleep_unspecified", from: Self.noon + 6 * 3600, minutes: 30, by: "Apple Watch")], now: now)
        #expect(state(evening, "sleep_last_night") == "0.5")
        // Configured to begin at noon, the nap is a day of its own.
        let noonDay = HAStateBook(entities: HACatalog.all, timeZone: nil, timeZones: SystemTimeZones(), sleepDayStart: 12 * 3600)
        _ = noonDay.apply(night, now: now)
        #expect(
            state(
                noonDay.apply([stage("n1", "asleep_unspecified", from: Self.noon + 3600, minutes: 30, by: "x")], now: now),
                "sleep_last_night") == "0.5")
    }

    /// Issue 52: the last workout's figures as sensors of their own, and one event per new
    /// workout — not for a resend, an older one, or each of a backfill's.
    @Test func workoutsHaveFigureSensorsAndFireOneEventEach() {
        let b = book()
        func run(_ uuid: String, endingAgo ago: Int64, km: Double? = 5.012) -> CanonicalRecord {
            CanonicalRecord(
                kind: "workout", device: "phone-1", receiver: "r", uuid: uuid, type: "workout",
                start: Timestamp(seconds: Self.noon - ago - 1800), end: Timestamp(seconds: Self.noon - ago),
                utcOffset: Self.cet, activity: "running", durationS: 1800, energyKcal: 310.4, distanceM: km.map { $0 * 1000 })
        }
        let u = b.apply([run("r1", endingAgo: 3600)], now: now)
        #expect(state(u, "last_workout_duration") == "30")
        #expect(state(u, "last_workout_energy") == "310")
        #expect(state(u, "last_workout_distance") == "5.01")
        #expect(state(u, "last_workout_heart_rate") == "None") // none known: not announced until it is
        #expect(u.first { $0.entity.objectID == "last_workout" }?.attribute("start") == .string("2026-12-01T11:30:00+01:00"))
        let events = b.takeWorkoutEvents(now: now)
        #expect(events.count == 1 && events.first?.attribute("activity") == .string("running"))
        #expect(events.first?.attribute("ended_at") == .string("2026-12-01T12:00:00+01:00"))
        // Sent again, or an older one: no event.
        _ = b.apply([run("r1", endingAgo: 3600), run("r0", endingAgo: 86_400)], now: now)
        #expect(b.takeWorkoutEvents(now: now).isEmpty)
        // Three new ones in one batch (a backfill): one event, for the last.
        _ = b.apply([run("r2", endingAgo: 3000), run("r4", endingAgo: 1000), run("r3", endingAgo: 2000, km: nil)], now: now)
        let backfill = b.takeWorkoutEvents(now: now)
        #expect(backfill.count == 1 && backfill.first?.attribute("ended_at") == .string("2026-12-01T12:43:20+01:00"))
        #expect(state(b.apply([Self.deletion("r4", "workout")], now: now), "last_workout_distance") == "None")
    }

    /// A workout's heart rate: its own when it carries one (Health Auto Export, HealthSync), else
    /// from the heart-rate samples in its window, whichever arrives first, each counted once.
    @Test func theLastWorkoutHasItsHeartRate() throws {
        let b = book()
        let start = Self.noon - 3600, end = Self.noon - 1800
        func workout(_ uuid: String, fields: [RecordField] = [], metadata: String? = nil) -> CanonicalRecord {
            var w = CanonicalRecord(
                kind: "workout", device: "phone-1", receiver: "r", uuid: uuid, type: "workout",
                start: Timestamp(seconds: start), end: Timestamp(seconds: end), utcOffset: Self.cet,
                activity: "cycling", durationS: 1800, metadata: metadata.map { RawJSON(encoded: Array($0.utf8)) })
            w.fields = fields
            return w
        }
        func hr(_ uuid: String, _ bpm: Double, at t: Int64) -> CanonicalRecord { Self.sample(uuid, "heart_rate", bpm, at: t) }
        func attributes(_ u: [HAUpdate]) -> (RawJSON?, RawJSON?) {
            let w = u.last { $0.entity.objectID == "last_workout" }
            return (w?.attribute("heart_rate_avg"), w?.attribute("heart_rate_max"))
        }
        // Samples before the workout arrives, one of them outside its window.
        _ = b.apply([hr("h1", 120, at: start + 60), hr("out", 190, at: start - 600)], now: now)
        let first = attributes(b.apply([workout("w1"), hr("h2", 150, at: start + 900)], now: now))
        #expect(first.0 == .number(135) && first.1 == .number(150))
        // A resend counts once; a later sample in the window moves it; a deletion corrects it.
        #expect(attributes(b.apply([hr("h2", 150, at: start + 900)], now: now)).0 == nil)
        #expect(attributes(b.apply([hr("h3", 165, at: end - 10)], now: now)) == (.number(145), .number(165)))
        #expect(attributes(b.apply([Self.deletion("h3", "heart_rate")], now: now)) == (.number(135), .number(150)))
        // A newer workout with its own figures (Health Auto Export) uses them.
        let hae = workout(
            "w2",
            fields: [
                RecordField("avgHeartRate", RawJSON(#"{"qty":141.6,"units":"bpm"}"#)),
                RecordField("maxHeartRate", RawJSON(#"{"qty":172,"units":"bpm"}"#))
            ])
        var later = hae
        later.start = Timestamp(seconds: end + 60); later.end = Timestamp(seconds: end + 1860)
        #expect(attributes(b.apply([later], now: now)) == (.number(142), .number(172)))
        // HealthSync's metadata; a workout without any heart rate has none.
        #expect(
            HAStateBook.ownHeartRate(workout("w3", metadata: #"{"average_heart_rate_bpm":128.2,"max_heart_rate_bpm":151}"#))
                == (128.2, 151))
        #expect(HAStateBook.ownHeartRate(workout("w4")) == (nil, nil))
        // Kept across a restart.
        let again = book()
        try again.restoreState(b.saveState())
        #expect(again.saveState() == b.saveState())
    }

    /// The labels routes add (`tag`) are attributes of the phone's states, and stay after a restart.
    @Test func labelsAreAttributes() throws {
        let b = book()
        var r = Self.sample("h", "heart_rate", 64, at: Self.noon - 60)
        r.tags = [RecordTag("person", "anna"), RecordTag("measured_at", "not ours")]
        let u = b.apply([r], now: now).first
        #expect(u?.attribute("person") == .string("anna"))
        #expect(u?.attribute("measured_at") != .string("not ours")) // our own attributes win
        let again = book()
        try again.restoreState(b.saveState())
        #expect(again.all(now: now).first?.attribute("person") == .string("anna"))
    }

    /// A fleet worker saves each partition's devices apart and, claiming a partition again,
    /// replaces what it had of those devices (perhaps from before another worker held them).
    @Test func aScopedStateHoldsItsDevicesAndReplacesOnlyThem() throws {
        let b = book()
        _ = b.apply(
            [
                Self.sample("a1", "steps", 100, at: Self.noon - 3600, device: "anna"),
                Self.sample("b1", "steps", 200, at: Self.noon - 3600, device: "ben")
            ], now: now)
        let annas = b.saveState(of: DeviceScope { $0 == "anna" })
        #expect(String(decoding: annas, as: UTF8.self).contains("anna") && !String(decoding: annas, as: UTF8.self).contains("ben"))

        // Another worker went on with anna: 100 + 50.
        let other = book()
        try other.restoreState(annas, of: DeviceScope { $0 == "anna" })
        _ = other.apply([Self.sample("a2", "steps", 50, at: Self.noon - 1800, device: "anna")], now: now)
        // This one claims anna's partition again: anna is the other's, ben stays its own.
        _ = b.apply([Self.sample("b2", "steps", 1, at: Self.noon - 1800, device: "ben")], now: now)
        try b.restoreState(other.saveState(of: DeviceScope { $0 == "anna" }), of: DeviceScope { $0 == "anna" })
        let states = b.all(now: now)
        #expect(states.last { $0.device == "anna" && $0.entity.objectID == "steps_today" }?.state == "150")
        #expect(states.last { $0.device == "ben" && $0.entity.objectID == "steps_today" }?.state == "201")
        // No saved state of a partition: what it had of its devices is forgotten.
        try b.restoreState([], of: DeviceScope { $0 == "ben" })
        #expect(!b.all(now: now).contains { $0.device == "ben" })
    }

    @Test func theStateSurvivesARestart() throws {
        let b = book()
        _ = b.apply(
            [Self.sample("s1", "steps", 1200, at: Self.noon - 3600), Self.sample("h", "heart_rate", 64, at: Self.noon - 60)],
            now: now)
        let saved = b.saveState()
        let again = book()
        try again.restoreState(saved)
        #expect(again.saveState() == saved)
        // A resend after the restart still counts once.
        #expect(again.apply([Self.sample("s1", "steps", 1200, at: Self.noon - 3600)], now: now).isEmpty)
        #expect(state(again.all(now: now), "steps_today") == "1200")
        #expect(state(again.all(now: now), "heart_rate") == "64")
        #expect(throws: TransformStateError.self) { try again.restoreState(Array("7:garbage".utf8)) }
    }
}

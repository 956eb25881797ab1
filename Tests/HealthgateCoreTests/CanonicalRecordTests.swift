import Testing
@testable import HealthgateCore

/// The record's out-of-line fields (part, parts, code, activity, workout totals) behave as the
/// inline ones: a copy is a value, and records with the same fields are equal however made.
@Suite struct CanonicalRecordTests {
    static func workout() -> CanonicalRecord {
        CanonicalRecord(
            kind: "workout", device: "d", receiver: "r", uuid: "u", type: "workout", activity: "running",
            durationS: 1800, energyKcal: 320.5, distanceM: 5000)
    }

    @Test func aCopyChangedLeavesTheOriginal() {
        let original = Self.workout()
        var copy = original
        copy.activity = "cycling"
        copy.distanceM = nil
        copy.code = 3
        #expect(original.activity == "running")
        #expect(original.distanceM == 5000)
        #expect(original.code == nil)
        #expect(copy.activity == "cycling" && copy.distanceM == nil && copy.code == 3 && copy.durationS == 1800)
        #expect(copy != original)
    }

    @Test func equalHoweverMade() {
        var built = CanonicalRecord(kind: "workout", device: "d", receiver: "r", uuid: "u", type: "workout")
        built.activity = "running"
        built.durationS = 1800
        built.energyKcal = 320.5
        built.distanceM = 5000
        #expect(built == Self.workout())

        // Every out-of-line field set, then taken back: the same as a record that never had one.
        var plain = CanonicalRecord(kind: "quantity", device: "d", receiver: "r", uuid: "u", type: "heart_rate")
        let untouched = plain
        plain.part = 1
        plain.parts = 2
        plain.code = 0
        #expect(plain != untouched)
        plain.part = nil
        plain.parts = nil
        plain.code = nil
        #expect(plain == untouched)
        #expect(plain.rare == nil)
    }

    @Test func eachFieldKeepsItsOwnValue() {
        var r = CanonicalRecord(
            kind: "category", device: "d", receiver: "r", uuid: "u", type: "sleep_analysis",
            part: 2, parts: 5, code: 4)
        #expect(r.part == 2 && r.parts == 5 && r.code == 4 && r.activity == nil)
        r.parts = 6
        #expect(r.part == 2 && r.parts == 6 && r.code == 4)
        #expect(MemoryLayout<CanonicalRecord>.stride <= 248)
    }
}

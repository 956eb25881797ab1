import FastJSON
import Foundation
import HealthgateCore
@testable import SinkHomeAssistant
import Testing

/// The homeassistant sink's hours, apart from Home Assistant: sums from 0, a late sample and a
/// deletion rewriting their hour and the sums after it, a resend counted once, the window, the
/// state across a restart, and ids in the form Home Assistant demands.
struct HourlyBookTests {
    static let now: Int64 = 1_796_000_000 // 2026-11-29T…Z
    static let h = HourlyBook.hour(now)

    static func q(_ uuid: String, _ type: String, _ value: Double, at t: Int64, device: String = "anna", unit: String? = nil)
        -> CanonicalRecord
    {
        var r = CanonicalRecord(kind: RecordKind.quantity, device: device, receiver: "phone", uuid: uuid, type: type)
        r.start = Timestamp(seconds: t)
        r.end = Timestamp(seconds: t + 60)
        r.value = .number(value)
        r.unit = unit ?? HealthTypes.named(type)?.unit
        return r
    }

    static func delete(_ uuid: String, _ type: String, device: String = "anna") -> CanonicalRecord {
        var r = CanonicalRecord(kind: RecordKind.quantity, device: device, receiver: "phone", uuid: uuid, type: type)
        r.op = .delete
        return r
    }

    static let steps = HourlyBook.SeriesID(device: "anna", type: "steps")
    static let heart = HourlyBook.SeriesID(device: "anna", type: "heart_rate")

    func written(_ book: HourlyBook, _ id: HourlyBook.SeriesID) -> [HourlyBook.Row] {
        defer { book.written(id) }
        return book.changedRows(of: id)
    }

    @Test func sumsStartAtZeroAndALateSampleRewritesItsHourAndTheSumsAfter() {
        let book = HourlyBook(window: 2 * 86_400)
        let h = Self.h
        book.apply(
            [
                Self.q("a", "steps", 100, at: h - 5 * 3600 + 600), Self.q("b", "steps", 50, at: h - 5 * 3600 + 2400),
                Self.q("c", "steps", 200, at: h - 3 * 3600)
            ], now: Self.now)
        #expect(written(book, Self.steps) == [.init(start: h - 5 * 3600, sum: 150), .init(start: h - 3 * 3600, sum: 350)])

        // Resent as it was: nothing to write.
        book.apply([Self.q("a", "steps", 100, at: h - 5 * 3600 + 600)], now: Self.now)
        #expect(written(book, Self.steps) == [.init(start: h - 5 * 3600, sum: 150), .init(start: h - 3 * 3600, sum: 350)])
        #expect(book.rows(of: Self.steps).map(\.sum) == [150, 350], "a resend counted twice")

        // A late sample before every hour: its hour, and every sum after it.
        book.apply([Self.q("z", "steps", 25, at: h - 6 * 3600)], now: Self.now)
        #expect(written(book, Self.steps).map(\.sum) == [25, 175, 375])

        // A sample edited to another hour leaves the first; a deletion empties an hour, which
        // is written again (its sum unchanged) so that its row does not keep the old sum.
        book.apply([Self.q("c", "steps", 200, at: h - 1 * 3600), Self.delete("a", "steps")], now: Self.now)
        #expect(
            written(book, Self.steps)
                == [.init(start: h - 5 * 3600, sum: 75), .init(start: h - 3 * 3600, sum: 75), .init(start: h - 3600, sum: 275)])
        #expect(book.dirty.isEmpty)
    }

    @Test func meanTypesKeepTheirSamplesSoADeletionRecomputesMinAndMax() {
        let book = HourlyBook(window: 2 * 86_400)
        let h = Self.h
        book.apply(
            [
                Self.q("1", "heart_rate", 60, at: h - 7200 + 60), Self.q("2", "heart_rate", 80, at: h - 7200 + 120),
                Self.q("3", "heart_rate", 70, at: h - 7200 + 180), Self.q("4", "heart_rate", 90, at: h - 3600)
            ], now: Self.now)
        #expect(
            written(book, Self.heart)
                == [.init(start: h - 7200, mean: 70, min: 60, max: 80), .init(start: h - 3600, mean: 90, min: 90, max: 90)])
        book.apply([Self.delete("2", "heart_rate"), Self.delete("4", "heart_rate")], now: Self.now)
        // The emptied hour goes out with no values (Home Assistant keeps an empty row).
        #expect(written(book, Self.heart) == [.init(start: h - 7200, mean: 65, min: 60, max: 70), .init(start: h - 3600)])
        #expect(book.rows(of: Self.heart).count == 1)
    }

    @Test func unitsAreHomeAssistantsAndOtherKindsAreLeftOut() {
        let book = HourlyBook(window: 86_400)
        var sleep = Self.q("s", "sleep_analysis", 0, at: Self.h - 3600)
        sleep.kind = RecordKind.category
        sleep.value = .string("asleep_core")
        book.apply(
            [
                Self.q("d", "distance_walking_running", 1830, at: Self.h - 3600),
                Self.q("o", "oxygen_saturation", 0.97, at: Self.h - 3600),
                Self.q("m", "body_mass", 135.4, at: Self.h - 3600, unit: "lb"), sleep
            ], now: Self.now)
        #expect(book.rows(of: .init(device: "anna", type: "distance_walking_running")).map(\.sum) == [1.83])
        #expect(book.rows(of: .init(device: "anna", type: "oxygen_saturation")).map(\.mean) == [97])
        let kg = book.rows(of: .init(device: "anna", type: "body_mass")).first?.mean ?? 0
        #expect(abs(kg - 61.416) < 0.01, "\(kg)")
        #expect(book.series.count == 3)
        #expect(HAStatisticKind.of(type: "distance_walking_running")?.unit == "km")
        #expect(HAStatisticKind.of(type: "heart_rate")?.unit == "bpm")
        #expect(HAStatisticKind.of(type: "steps")?.unit == "steps")
        #expect(HAStatisticKind.of(type: "sleep_analysis") == nil)
    }

    @Test func samplesOlderThanTheWindowAreNeverWrittenAndLeavingHoursFoldIntoTheBase() {
        let book = HourlyBook(window: 86_400)
        let h = Self.h
        book.apply(
            [
                Self.q("old", "steps", 999, at: Self.now - 86_400 - 60), Self.q("a", "steps", 10, at: h - 20 * 3600),
                Self.q("b", "steps", 5, at: h - 3600)
            ], now: Self.now)
        #expect(written(book, Self.steps).map(\.sum) == [10, 15])
        // Five hours on, the first hour left the window: its 10 stays in the sums after it.
        let later = Self.now + 5 * 3600
        book.prune(now: later)
        book.apply([Self.q("c", "steps", 1, at: h - 3600 + 60)], now: later)
        #expect(written(book, Self.steps) == [.init(start: h - 3600, sum: 16)])
        #expect(book.series[Self.steps]?.base == 10)
    }

    @Test func theStateComesBackWholeAndOnlyForTheDevicesAsked() throws {
        let book = HourlyBook(window: 86_400)
        book.apply(
            [
                Self.q("a", "steps", 10, at: Self.h - 3600), Self.q("b", "heart_rate", 61, at: Self.h - 3600),
                Self.q("c", "steps", 7, at: Self.h - 3600, device: "ben")
            ], now: Self.now)
        let saved = book.save(of: .all)
        let again = HourlyBook(window: 86_400)
        try again.restore(saved, of: .all)
        #expect(again.rows(of: Self.steps) == book.rows(of: Self.steps))
        #expect(again.rows(of: Self.heart) == book.rows(of: Self.heart))
        #expect(again.receivers["anna"] == "phone")
        // A deletion after the restart finds its sample.
        again.apply([Self.delete("a", "steps")], now: Self.now)
        #expect(again.changedRows(of: Self.steps).map(\.sum) == [0])

        // Ben's partition alone: Anna's series stay as they are.
        let onlyBen = book.save(of: DeviceScope { $0 == "ben" })
        try again.restore(onlyBen, of: DeviceScope { $0 == "ben" })
        #expect(again.series.count == 3)
        #expect(throws: TransformStateError.self) { try again.restore(Array(saved.dropLast(5)), of: .all) }
    }

    @Test func idsFollowHomeAssistantsRuleAndTwoDevicesStayTwo() throws {
        let rule = try NSRegularExpression(pattern: #"^(?!.+__)(?!_)[\da-z_]+(?<!_):(?!_)[\da-z_]+(?<!_)$"#)
        func fits(_ s: String) -> Bool { rule.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil }
        let devices = [
            "anna", "d_zsOZnTQUz_juWFVljuOOBQ", "Anna", "bens-iphone", "__x__", "日本", "", "a__b", String(repeating: "x", count: 200)
        ]
        var ids = Set<String>()
        for d in devices {
            let id = HAStatisticIDs.id(device: d, type: "heart_rate")
            #expect(fits(id), "\(id)")
            ids.insert(id)
        }
        #expect(ids.count == devices.count)
        #expect(HAStatisticIDs.id(device: "anna", type: "steps") == "healthgate:anna_steps")
        #expect(HAStatisticIDs.title("heart_rate") == "Heart rate")
    }

    @Test func metadataIsWhatEachHomeAssistantVersionTakes() throws {
        func metadata(_ version: String, _ type: String) throws -> [String: Any] {
            var w = JSONWriter()
            HAStatisticKind.of(type: type)!.writeMetadata(id: "healthgate:anna_\(type)", name: "x", haVersion: version, to: &w)
            return try JSONSerialization.jsonObject(with: Data(w.bytes)) as? [String: Any] ?? [:]
        }
        let old = try metadata("2024.3.3", "heart_rate")
        #expect(old["has_mean"] as? Bool == true && old["mean_type"] == nil && old["unit_class"] == nil)
        let new = try metadata("2026.11.2", "heart_rate")
        #expect(new["mean_type"] as? Int == 1 && new.keys.contains("unit_class") && new["has_mean"] == nil)
        let steps = try metadata("2025.11.0", "steps")
        #expect(steps["mean_type"] as? Int == 0 && steps["has_sum"] as? Bool == true && steps["unit_of_measurement"] as? String == "steps")
        #expect(try metadata("2026.12.0.dev0", "body_mass")["unit_class"] as? String == "mass")
        #expect(!HAStatisticKind.wantsMeanType(haVersion: "2025.10.4"))
    }
}

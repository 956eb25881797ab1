import Foundation
@testable import HealthgateTesting
@testable import SinkInfluxDB
import Storage
import Testing

/// The InfluxDB sink's point index driven with generated record sets and checked against a
/// plain dictionary of what was written: uuids that share their first bytes (sequential, the
/// shape that crashed the release build's seal), all equal, random, text uuids, one time for
/// all, runs of one to 1,500 points, deletes of what is not there, reopens — in the suites `make test`
/// also runs built with `-c release` under AddressSanitizer.
@Suite struct PointIndexStressTests {
    /// A small deterministic generator (xorshift64*).
    struct Rand {
        var x: UInt64
        mutating func next() -> UInt64 {
            x ^= x >> 12; x ^= x << 25; x ^= x >> 27
            return x &* 0x2545_F491_4F6C_DD1D
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    enum Keys: CaseIterable { case front, sequential, equal, random, text, mixed }

    static func uuid(_ i: Int, _ keys: Keys, _ r: inout Rand) -> String {
        switch keys {
        case .front: return String(format: "%08X-0000-4000-8000-000000000001", i) // sort keys apart in a few low bytes
        case .sequential: return String(format: "5E1D0000-0000-4000-8000-%012X", i)
        case .equal: return "5E1D0000-0000-4000-8000-000000000001"
        case .random:
            var g = Rand(x: UInt64(i) &* 0x9E37_79B9_7F4A_7C15 | 1)
            return String(
                format: "%08X-%04X-4%03X-8%03X-%012llX", UInt32(truncatingIfNeeded: g.next()), UInt16(truncatingIfNeeded: g.next()),
                Int(g.next() % 0x1000), Int(g.next() % 0x1000), g.next() & 0xFFFF_FFFF_FFFF)
        case .text: return "hae-\(i % 997)-\(i)"
        case .mixed: return uuid(i, [.front, .sequential, .random, .text][r.below(4)], &r)
        }
    }

    typealias Point = PointIndex.Point

    /// Writes, deletes and reopens at random against a reference; every key's points are
    /// compared at the end (and some along the way).
    func exercise(keys: Keys, seed: UInt64, chunkRows: Int, operations: Int, oneTime: Bool) throws {
        var r = Rand(x: seed)
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        var index = PointIndex(path: path, chunkRows: chunkRows)
        let series = ["steps,phone=a,unit=count", "heart_rate,phone=a,unit=count/min", "sleep_analysis,phone=a,source=x\\ y"]
        var reference: [String: [Point]] = [:] // "device\u{1F}uuid" -> points, oldest first, each once
        var written = 0
        func key(_ device: String, _ uuid: String) -> String { device + "\u{1F}" + uuid }
        for _ in 0..<operations {
            switch r.below(10) {
            case 0: // a delete, of something written or of what is not there
                let device = ["d1", "d2", "nobody"][r.below(3)]
                let u = Self.uuid(r.below(max(1, written + 10)), keys, &r)
                try index.remove(device: device, uuid: u)
                reference[key(device, u)] = nil
            case 1:
                index.close()
                index = PointIndex(path: path, chunkRows: chunkRows)
            default: // one to three runs of up to 5,000 points in one transaction
                var runs: [PointIndex.Run] = []
                for _ in 0..<(1 + r.below(3)) {
                    let n = r.below(12) == 0 ? 1_500 : 1 + r.below(40)
                    var rows: [PointIndex.Row] = []
                    for _ in 0..<n {
                        written += 1
                        let device = r.below(4) == 0 ? "d2" : "d1"
                        let u = Self.uuid(r.below(4) == 0 ? r.below(written) : written, keys, &r)
                        let s = series[r.below(series.count)]
                        let t: Int64 = oneTime ? 1_700_000_000_000_000_000 : Int64(written) * 1_000_000_000
                        let part: Int? = r.below(8) == 0 ? r.below(3) : nil
                        rows.append(PointIndex.Row(device: device, uuid: u, part: part, series: ArraySlice(Array(s.utf8)), timeNanos: t))
                        let p = PointIndex.parseSeries(ArraySlice(Array(s.utf8)))
                        let point = Point(measurement: p.measurement, tags: p.tags, timeNanos: t)
                        if !(reference[key(device, u)] ?? []).contains(point) { reference[key(device, u), default: []].append(point) }
                    }
                    runs.append(PointIndex.Run(rows))
                }
                try index.record(runs: runs)
            }
        }
        var mismatches: [String] = []
        // At most 120 keys looked up (one in every few): uuids that share their first bytes
        // share their sort key, so each lookup reads every point of them.
        let all = reference.keys.sorted()
        for k in stride(from: 0, to: all.count, by: max(1, all.count / 120)).map({ all[$0] }) {
            let expected = reference[k]!
            let parts = k.split(separator: "\u{1F}", maxSplits: 1).map(String.init)
            let found = try index.points(device: parts[0], uuid: parts[1])
            if Set(found.map { "\($0.measurement) \($0.tags) \($0.timeNanos)" })
                != Set(expected.map { "\($0.measurement) \($0.tags) \($0.timeNanos)" })
                || found.count != expected.count
            {
                mismatches.append("\(k): \(found.count) found, \(expected.count) written")
            }
        }
        #expect(mismatches.isEmpty, "\(keys) seed \(seed): \(mismatches.prefix(5))")
        index.close()
    }

    @Test(arguments: Keys.allCases)
    func generatedRecordSetsAgreeWithAPlainReference(keys: Keys) throws {
        try exercise(keys: keys, seed: 0x5EED_0001, chunkRows: 97, operations: 120, oneTime: false)
        try exercise(keys: keys, seed: 0x5EED_0002, chunkRows: 2_000, operations: 60, oneTime: true)
    }

    /// The report's load: 160,000 points of uuids that count up in their first group, in runs
    /// of 5,000 as the sink hands them over, through three seals of the default chunk (the
    /// second chunk's sort keys differ in three bytes: an odd number of radix passes, where the
    /// release build's sort returned a garbage error); each found, one removed.
    @Test func sequentialUUIDsThroughSeveralSeals() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        let index = PointIndex(path: path)
        let series = Array("steps,device=Apple\\ Watch,phone=d_x,source=com.apple.Health,unit=count".utf8)
        var r = Rand(x: 1)
        var i = 1
        while i <= 160_000 {
            let n = min(5_000, 160_001 - i)
            let rows = (i..<(i + n)).map {
                PointIndex.Row(device: "d_x", uuid: Self.uuid($0, .front, &r), part: nil, series: series[...], timeNanos: Int64($0))
            }
            try index.record(runs: [PointIndex.Run(rows)])
            i += n
        }
        #expect(try InfluxDBSinkTests.sealedChunks(path).count == 3)
        for k in [1, 49_999, 77_777, 160_000] {
            #expect(try index.points(device: "d_x", uuid: Self.uuid(k, .front, &r)).map(\.timeNanos) == [Int64(k)])
        }
        try index.remove(device: "d_x", uuid: Self.uuid(77_777, .front, &r))
        #expect(try index.points(device: "d_x", uuid: Self.uuid(77_777, .front, &r)).isEmpty)
        #expect(try index.points(device: "d_x", uuid: Self.uuid(77_778, .front, &r)).map(\.timeNanos) == [77_778])
        index.close()
    }

    /// A seal that fails leaves the points noted (found in the open chunk) and says so as its
    /// own error; the next write seals.
    @Test func aFailedSealKeepsThePointsAndIsTriedAgain() throws {
        let path = ServeProcess.makeTempDir("pi") + "/points.sqlite"
        let index = PointIndex(path: path, chunkRows: 10)
        let series = Array("steps,unit=count".utf8)
        var r = Rand(x: 1)
        func rows(_ range: Range<Int>) -> PointIndex.Run {
            PointIndex.Run(
                range.map {
                    PointIndex.Row(device: "d", uuid: Self.uuid($0, .sequential, &r), part: nil, series: series[...], timeNanos: Int64($0))
                })
        }
        try index.record(runs: [rows(0..<1)])
        let other = try SQLite(path: path)
        try other.execute("ALTER TABLE psealed RENAME TO psealed_away")
        do {
            try index.record(runs: [rows(1..<20)])
            Issue.record("the seal did not fail")
        } catch let e as PointIndex.SealFailure {
            #expect("\(e)".contains("psealed") && "\(e)".contains("noted the points"), "\(e)")
        }
        #expect(try index.points(device: "d", uuid: Self.uuid(15, .sequential, &r)).map(\.timeNanos) == [15])
        try other.execute("ALTER TABLE psealed_away RENAME TO psealed")
        try index.record(runs: [rows(20..<21)])
        #expect(try InfluxDBSinkTests.sealedChunks(path) == [1])
        for k in [0, 15, 20] { #expect(try index.points(device: "d", uuid: Self.uuid(k, .sequential, &r)).map(\.timeNanos) == [Int64(k)]) }
        index.close()
    }
}

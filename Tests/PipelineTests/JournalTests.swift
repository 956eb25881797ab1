import Foundation
@testable import Pipeline
import HealthgateCore
import Posix
import Testing

@Suite struct JournalTests {
    let logger = Logger(component: "test", sink: MemoryLogSink())

    func payload(_ i: Int, size: Int = 40) -> [UInt8] {
        Array("{\"entry\":\(i),\"pad\":\"\(String(repeating: "x", count: size))\"}\n".utf8)
    }

    @Test func appendsAndReadsBackInOrder() throws {
        let dir = tempDir("journal")
        let j = try Journal(directory: dir, logger: logger)
        for i in 1...10 {
            let seq = try j.append(payload: payload(i), count: 1, time: Timestamp(seconds: Int64(i)))
            #expect(seq == UInt64(i))
        }
        let entries = j.makeReader(from: 1).read(maxEntries: 100)
        #expect(entries.map(\.seq) == Array(1...10))
        #expect(entries[3].payload == payload(4))
        #expect(entries[3].timeNanos == 4_000_000_000)
        #expect(j.makeReader(from: 7).read(maxEntries: 100).map(\.seq) == [7, 8, 9, 10])
    }

    /// The journal's checksum is the CRC-32 it has always been (zlib's, the ISO-HDLC one): entries
    /// written before the checksum came from libdeflate still read.
    @Test func theChecksumIsZlibsCRC32() {
        #expect(Journal.crc(Array("123456789".utf8)) == 0xCBF4_3926) // the polynomial's check value
        #expect(Journal.crc([UInt8]()) == 0)
        // Long enough for the carry-less multiply path, compared with the bitwise definition.
        let bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 7) }
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            c ^= UInt32(b)
            for _ in 0..<8 { c = c & 1 == 1 ? (c >> 1) ^ 0xEDB8_8320 : c >> 1 }
        }
        #expect(Journal.crc(bytes) == ~c)
    }

    /// A big request is several bounded entries, cut at record boundaries.
    @Test func aBigRequestIsSplitAtRecordBoundaries() throws {
        var big: [UInt8] = []
        for i in 0..<100 { big += payload(i, size: 100) } // 100 lines of ~115 bytes
        let parts = Journal.parts(of: big, count: 100, limit: 1000)
        #expect(parts.allSatisfy { $0.range.count <= 1000 })
        #expect(parts.map(\.count).reduce(0, +) == 100)
        #expect(parts.map(\.range.count).reduce(0, +) == big.count)
        #expect(parts.allSatisfy { big[$0.range.upperBound - 1] == 0x0A })
        // A line longer than the limit is an entry of its own.
        let long = payload(1, size: 3000) + payload(2)
        #expect(Journal.parts(of: long, count: 2, limit: 1000).map(\.count) == [1, 1])
        let dir = tempDir("journal")
        let j = try Journal(directory: dir, logger: logger)
        let last = try j.append(payload: big, parts: parts, time: Timestamp(seconds: 5))
        #expect(last == UInt64(parts.count))
        let entries = j.makeReader(from: 1).read(maxEntries: 100)
        #expect(entries.count == parts.count)
        #expect(entries.flatMap(\.payload) == big)
        #expect(entries.map(\.count) == parts.map(\.count))
    }

    /// A crash that left only some entries of a split request: recovery cuts all of them (the
    /// request was never acknowledged), and keeps the whole request before it.
    @Test func recoveryCutsASplitRequestThatIsNotWhole() throws {
        let dir = tempDir("journal")
        var big: [UInt8] = []
        for i in 0..<30 { big += payload(i, size: 100) }
        do {
            let j = try Journal(directory: dir, logger: logger)
            try j.append(payload: payload(0), count: 1, time: Timestamp(seconds: 1))
            try j.append(payload: big, parts: Journal.parts(of: big, count: 30, limit: 1000), time: Timestamp(seconds: 2))
        }
        let seg = dir + "/" + Journal.segmentName(1)
        let size = try #require(FileIO.fileSize(seg))
        // Cut the file just after the second part of the big request ends: whole entries, one request not whole.
        let j1 = try Journal(directory: dir, logger: logger)
        let entries = j1.makeReader(from: 1).read(maxEntries: 100)
        #expect(entries.count == 1 + Journal.parts(of: big, count: 30, limit: 1000).count)
        let keep = Journal.headerSize * 3 + entries[0].payload.count + entries[1].payload.count + entries[2].payload.count
        #expect(truncate(seg, off_t(keep)) == 0 && keep < size)
        let sink = MemoryLogSink()
        let j2 = try Journal(directory: dir, logger: Logger(component: "t", sink: sink))
        #expect(j2.lastDurableSeq == 1)
        #expect(j2.makeReader(from: 1).read(maxEntries: 100).map(\.seq) == [1])
        #expect(sink.all.contains { $0.message.contains("split in several entries and only 2 of them are complete") })
        #expect(FileIO.fileSize(seg) == Journal.headerSize + entries[0].payload.count)
        // The sequence goes on from there.
        #expect(try j2.append(payload: payload(9), count: 1, time: Timestamp(seconds: 3)) == 2)
    }

    @Test func concurrentAppendsShareSyncsAndLoseNothing() throws {
        let dir = tempDir("journal")
        let j = try Journal(directory: dir, logger: logger)
        let threads = 8, perThread = 200
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in 0..<perThread {
                _ = try? j.append(payload: payload(t * 1000 + i), count: 1, time: Timestamp(seconds: 0))
            }
        }
        let entries = j.makeReader(from: 1).read(maxEntries: 10_000)
        #expect(entries.count == threads * perThread)
        #expect(entries.map(\.seq) == Array(1...UInt64(threads * perThread)))
        let ids = Set(entries.map { String(decoding: $0.payload, as: UTF8.self) })
        #expect(ids.count == threads * perThread)
    }

    @Test func startsNewSegmentsAndReadsAcrossThem() throws {
        let dir = tempDir("journal")
        let j = try Journal(directory: dir, segmentBytes: 1000, logger: logger)
        for i in 1...30 { try j.append(payload: payload(i, size: 100), count: 1, time: Timestamp(seconds: 0)) }
        #expect(j.segmentFirstSeqs.count > 3)
        #expect(j.makeReader(from: 1).read(maxEntries: 100).map(\.seq) == Array(1...30))
        // A reader starting in the middle of a later segment.
        #expect(j.makeReader(from: 25).read(maxEntries: 100).map(\.seq) == Array(25...30))
        // Deleting what every reader has passed keeps the rest readable.
        j.deleteSegments(below: 20)
        #expect(j.segmentFirstSeqs.first! <= 20)
        #expect(j.makeReader(from: 20).read(maxEntries: 100).map(\.seq) == Array(20...30))
        // And a restart continues the sequence.
        let j2 = try Journal(directory: dir, segmentBytes: 1000, logger: logger)
        #expect(try j2.append(payload: payload(31), count: 1, time: Timestamp(seconds: 0)) == 31)
    }

    /// Entries every reader has passed leave the page cache (a segment kept for `retention`
    /// whole, the one being written up to the slowest cursor); the rest stays cached for the
    /// readers still to come, and everything still reads.
    @Test func passedEntriesLeaveThePageCache() throws {
        // Under the package's .build, not TMPDIR: a tmpfs keeps its pages (they are the file).
        let dir = FileManager.default.currentDirectoryPath + "/.build/journal-cache-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let j = try Journal(directory: dir, segmentBytes: 4 << 20, logger: logger)
        let entry = payload(0, size: 64 << 10)
        for _ in 1...160 { try j.append(payload: entry, count: 1, time: Timestamp(seconds: 1_000)) }
        let segments = j.segmentFirstSeqs
        #expect(segments.count == 3)
        func cached(_ start: UInt64) throws -> (cached: Int, pages: Int) {
            try #require(FileIO.cachedPages(dir + "/" + Journal.segmentName(start)))
        }
        let newest = try #require(segments.last)
        #expect(try cached(newest).cached > 200) // just written: in the cache
        // Retention keeps every segment (their entries are not old enough); all are passed but
        // the newest segment's last 10 entries.
        j.deleteSegments(below: 151, lastEntryBefore: 500)
        #expect(j.segmentFirstSeqs == segments)
        for start in segments.dropLast() { #expect(try cached(start).cached == 0) }
        // The newest: what is below entry 151 is let go, its last 10 entries (640 KiB) stay.
        let tail = try cached(newest)
        #expect(tail.cached >= 155 && tail.cached <= 170, "\(tail.cached) of \(tail.pages) pages cached")
        // Nothing more is passed: nothing more is let go, and the newest entries still read.
        j.deleteSegments(below: 151, lastEntryBefore: 500)
        #expect(try cached(newest).cached == tail.cached)
        #expect(j.makeReader(from: 1).read(maxEntries: 200).map(\.seq) == Array(1...160))
    }

    /// Power loss at any byte of the last write: restart keeps every entry before the torn
    /// one, cuts the rest, and appends continue with the next sequence number.
    @Test func cutsATornTailAtEveryByteOffset() throws {
        let dir = tempDir("journal")
        do {
            let j = try Journal(directory: dir, logger: logger)
            for i in 1...3 { try j.append(payload: payload(i), count: 1, time: Timestamp(seconds: 0)) }
        }
        let segment = dir + "/" + Journal.segmentName(1)
        let full = try FileIO.readAll(segment)
        // Where each entry ends: a cut anywhere keeps exactly the entries that end before it.
        var ends: [Int] = []
        var at = 0
        for i in 1...3 {
            at += Journal.headerSize + payload(i).count
            ends.append(at)
        }
        #expect(ends.last == full.count)
        for cut in 0..<full.count {
            let copy = tempDir("torn")
            try Data(full[0..<cut]).write(to: URL(fileURLWithPath: copy + "/" + Journal.segmentName(1)))
            let j = try Journal(directory: copy, logger: logger)
            let whole = ends.filter { $0 <= cut }.count
            let goodLength = whole == 0 ? 0 : ends[whole - 1]
            #expect(j.lastDurableSeq == UInt64(whole), "cut at \(cut)")
            #expect(j.truncatedBytes == cut - goodLength)
            #expect(FileIO.fileSize(copy + "/" + Journal.segmentName(1)) == goodLength)
            #expect(try j.append(payload: payload(9), count: 1, time: Timestamp(seconds: 0)) == UInt64(whole + 1))
            var expected: [[UInt8]] = (0..<whole).map { payload($0 + 1) }
            expected.append(payload(9))
            let readBack: [[UInt8]] = j.makeReader(from: 1).read(maxEntries: 10).map(\.payload)
            #expect(readBack == expected)
            try? FileManager.default.removeItem(atPath: copy)
        }
    }

    @Test func aFlippedBitInTheTailIsCutNotServed() throws {
        let dir = tempDir("journal")
        do {
            let j = try Journal(directory: dir, logger: logger)
            for i in 1...3 { try j.append(payload: payload(i), count: 1, time: Timestamp(seconds: 0)) }
        }
        let segment = dir + "/" + Journal.segmentName(1)
        var bytes = try FileIO.readAll(segment)
        bytes[bytes.count - 5] ^= 0x10
        try FileIO.writeAtomically(segment, bytes)
        let j = try Journal(directory: dir, logger: logger)
        #expect(j.lastDurableSeq == 2)
        #expect(j.makeReader(from: 1).read(maxEntries: 10).count == 2)
    }

    @Test func readersWaitForNewEntries() throws {
        let dir = tempDir("journal")
        let j = try Journal(directory: dir, logger: logger)
        #expect(!j.waitForEntries(after: 0, timeout: 0.05))
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) {
            _ = try? j.append(payload: Array("{}\n".utf8), count: 1, time: Timestamp(seconds: 0))
        }
        #expect(j.waitForEntries(after: 0, timeout: 5))
    }
}

@Suite struct JournalDamageTests {
    let logger = Logger(component: "test", sink: MemoryLogSink())

    func payload(_ i: Int) -> [UInt8] { Array("{\"entry\":\(i)}\n".utf8) }

    /// A bit flipped in the middle of the newest segment is damage, not a torn tail: the
    /// entries after it are acknowledged and must survive a restart; readers skip only the
    /// damaged entry and go on reading new ones.
    @Test func damageInTheMiddleLosesOnlyTheDamagedEntry() throws {
        let dir = tempDir("journal")
        let sizes: [Int]
        do {
            let j = try Journal(directory: dir, logger: logger)
            for i in 1...3 { try j.append(payload: payload(i), count: 1, time: Timestamp(seconds: 0)) }
            sizes = (1...3).map { Journal.headerSize + payload($0).count }
        }
        let segment = dir + "/" + Journal.segmentName(1)
        var bytes = try FileIO.readAll(segment)
        bytes[sizes[0] + Journal.headerSize + 3] ^= 0x20 // inside entry 2's payload
        try FileIO.writeAtomically(segment, bytes)

        let j = try Journal(directory: dir, logger: logger)
        #expect(j.lastDurableSeq == 3)
        #expect(j.damagedEntries == 1)
        #expect(j.truncatedBytes == 0)
        var reports: [String] = []
        let reader = j.makeReader(from: 1)
        #expect(reader.read(maxEntries: 10, corrupt: { reports.append($0) }).map(\.seq) == [1, 3])
        #expect(reports.count == 1)
        #expect(try j.append(payload: payload(4), count: 1, time: Timestamp(seconds: 0)) == 4)
        #expect(reader.read(maxEntries: 10).map(\.seq) == [4])
    }
}

/// A new directory under `$TMPDIR` (`make test` gives the run one of its own), else /tmp.
func tempDir(_ tag: String) -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) }.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? "/tmp"
    var template = Array("\(base)/\(tag)-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}

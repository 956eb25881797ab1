import CDeflate
import Glibc
import Posix
import HealthgateCore
import CanonicalJSON

public struct JournalError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// True when the cause is a full disk or quota: the client should retry later.
    public var isNoSpace: Bool

    public init(_ message: String, isNoSpace: Bool = false) {
        self.message = message
        self.isNoSpace = isNoSpace
    }

    init(_ io: IOError) {
        self.init(io.description, isNoSpace: io.isNoSpace)
    }

    public var description: String { message }
}

/// One durable entry: the records of one request.
public struct JournalEntry: Sendable {
    public var seq: UInt64
    public var timeNanos: Int64
    public var count: Int
    public var payload: [UInt8]
}

/// The append-only, fsynced log every accepted request goes into first. See JOURNAL.md.
public final class Journal: @unchecked Sendable {
    static let headerSize = 40
    static let magic: UInt32 = 0x314A_4748 // "HGJ1" little-endian

    public let directory: String
    let segmentBytes: Int
    private let logger: Logger
    private let monitor = Monitor()

    // Guarded by `monitor`.
    private var queue: [Pending] = []
    private var syncing = false
    private var durableSeq: UInt64 = 0
    /// Where the newest durable entry ends: its segment and that segment's durable length.
    private var durableEnd: (segment: UInt64, size: Int) = (1, 0)
    private var closed = false
    private var segmentStarts: [UInt64] = []
    /// One row per entry on disk, oldest first, for sinks' backlog figures.
    private var index = BacklogIndex()
    /// Below where the cached pages of passed entries were let go: a segment, and the offset in
    /// it (`releaseCache(below:)`).
    private var releasedTo: (segment: UInt64, offset: Int) = (0, 0)

    // Owned by the group-commit leader (the one thread with `syncing == true`).
    private var fd: Int32 = -1
    private var segmentFirstSeq: UInt64 = 1
    private var segmentSize: Int = 0
    private var nextSeq: UInt64 = 1
    /// Set when a failed group could not be cut back off the segment: nothing is appended
    /// until it is, or the half-written entries would sit between good ones.
    private var tailToCut: Int?

    /// What start-up recovery found, for the log and for tests.
    public private(set) var recoveredEntries = 0
    public private(set) var truncatedBytes = 0
    public private(set) var damagedEntries = 0

    public init(directory: String, segmentBytes: Int = 64 << 20, logger: Logger) throws(JournalError) {
        self.directory = directory
        self.segmentBytes = segmentBytes
        self.logger = logger
        do {
            try FileIO.makeDirectories(directory, mode: 0o700)
            try recover()
        } catch let e as IOError {
            throw JournalError(e)
        } catch let e as JournalError {
            throw e
        } catch {
            throw JournalError("\(error)")
        }
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
    }

    static func segmentName(_ firstSeq: UInt64) -> String {
        let digits = String(firstSeq)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".seg"
    }

    func segmentPath(_ firstSeq: UInt64) -> String { FileIO.join(directory, Journal.segmentName(firstSeq)) }

    // MARK: recovery

    private func recover() throws {
        let starts = try FileIO.list(directory).compactMap { name -> UInt64? in
            guard name.hasSuffix(".seg"), name.count == 24 else { return nil }
            return UInt64(name.dropLast(4))
        }.sorted()
        if starts.isEmpty {
            try createSegment(firstSeq: 1)
            segmentStarts = [1]
            return
        }
        segmentStarts = starts
        // Sealed segments: their headers alone, for the backlog index.
        for start in starts.dropLast() { indexHeaders(ofSegment: start) }
        let last = starts[starts.count - 1]
        let path = segmentPath(last)
        let rfd = open(path, O_RDWR | O_CLOEXEC)
        if rfd < 0 { throw IOError("open", path) }
        let size = Int(lseek(rfd, 0, SEEK_END))
        var offset = 0
        var expected = last
        var header = [UInt8](repeating: 0, count: Journal.headerSize)
        // The entries of a request split in several are kept only all together: those of a
        // request still open when the scan ends are cut with the torn tail.
        var group: [(seq: UInt64, records: Int, bytes: Int, time: Int64)] = []
        var groupStart = 0
        while offset + Journal.headerSize <= size {
            guard Journal.readExact(rfd, &header, count: Journal.headerSize, at: offset),
                let h = Journal.decodeHeader(header), h.seq == expected,
                offset + Journal.headerSize + h.length <= size
            else { break }
            guard let payload = Journal.readPayload(rfd, count: h.length, at: offset + Journal.headerSize) else { break }
            if Journal.crc(payload) != h.payloadCRC {
                // A torn tail is the end of the file; a bad entry followed by the next good one is
                // damage in the middle, and cutting there would throw away acknowledged entries.
                let next = offset + Journal.headerSize + h.length
                guard Journal.readExact(rfd, &header, count: Journal.headerSize, at: next),
                    let following = Journal.decodeHeader(header), following.seq == expected + 1
                else { break }
                logger.error(
                    "journal entry \(expected) in \(Journal.segmentName(last)) fails its checksum (disk damage); "
                        + "the entries after it are kept, readers skip it")
                damagedEntries += 1
            }
            if group.isEmpty { groupStart = offset }
            offset += Journal.headerSize + h.length
            expected += 1
            group.append((h.seq, h.count, Journal.headerSize + h.length, h.timeNanos))
            if h.following == 0 {
                for e in group { index.append(seq: e.seq, records: e.records, bytes: e.bytes, time: e.time) }
                recoveredEntries += group.count
                group.removeAll()
            }
        }
        if !group.isEmpty {
            logger.warning(
                "journal: the last request in \(Journal.segmentName(last)) was split in several entries and only "
                    + "\(group.count) of them are complete; cutting them (it was never acknowledged)")
            offset = groupStart
            expected = group[0].seq
        }
        if offset < size {
            truncatedBytes = size - offset
            logger.warning(
                "journal segment \(Journal.segmentName(last)) has a torn tail of \(size - offset) bytes "
                    + "after \(recoveredEntries) good entries; cutting it (it was never acknowledged)")
            if ftruncate(rfd, off_t(offset)) != 0 || fsync(rfd) != 0 {
                let e = IOError("truncate", path)
                Glibc.close(rfd)
                throw e
            }
        }
        fd = rfd
        segmentFirstSeq = last
        segmentSize = offset
        nextSeq = expected
        durableSeq = expected - 1
        durableEnd = (last, offset)
    }

    private func createSegment(firstSeq: UInt64) throws(IOError) {
        let path = segmentPath(firstSeq)
        let nfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if nfd < 0 { throw IOError("create", path) }
        do {
            try FileIO.syncDirectory(directory)
        } catch {
            Glibc.close(nfd)
            unlink(path)
            throw error
        }
        if fd >= 0 { Glibc.close(fd) }
        fd = nfd
        segmentFirstSeq = firstSeq
        segmentSize = 0
        nextSeq = firstSeq
    }

    // MARK: append (group commit)

    private final class Pending {
        let payload: ArraySlice<UInt8>
        let count: Int
        let timeNanos: Int64
        let payloadCRC: UInt32
        /// Entries of the same request queued after this one.
        let following: Int
        var seq: UInt64 = 0
        var error: JournalError?
        var done = false

        init(payload: ArraySlice<UInt8>, count: Int, timeNanos: Int64, following: Int) {
            self.payload = payload
            self.count = count
            self.timeNanos = timeNanos
            self.following = following
            self.payloadCRC = payload.withUnsafeBytes { Journal.crc($0) }
        }
    }

    /// The largest payload one entry holds; a bigger request is split into several entries at
    /// record boundaries, written together and kept or cut together (see JOURNAL.md).
    public static let maxEntryPayload = ReceivedBatch.entryBytes

    /// Where to cut `payload` (NDJSON, one record a line) into entries of at most `limit`
    /// bytes each (a single longer line is an entry of its own), with each part's record count.
    public static func parts(of payload: [UInt8], count: Int, limit: Int = Journal.maxEntryPayload) -> [(range: Range<Int>, count: Int)] {
        if payload.count <= limit { return [(0..<payload.count, count)] }
        var cuts = EntryCuts(limit: limit) // the cut `ReceivedBatch` makes as it writes the lines
        payload.withUnsafeBytes { b in
            guard let base = b.baseAddress else { return }
            // Line feed to line feed with memchr, not byte by byte: this runs on every request.
            var from = 0
            while from < b.count, let hit = memchr(base + from, 0x0A, b.count - from) {
                let end = base.distance(to: UnsafeRawPointer(hit)) + 1
                cuts.add(lineFrom: from, to: end)
                from = end
            }
        }
        return cuts.parts(total: payload.count)
    }

    /// Appends one entry and returns once it is durable (written and fsynced), with its sequence
    /// number. Concurrent callers share one fsync. Throws when the entry could not be made
    /// durable; then nothing of it is kept.
    @discardableResult
    public func append(payload: [UInt8], count: Int, time: Timestamp) throws(JournalError) -> UInt64 {
        try append(payload: payload, parts: [(0..<payload.count, count)], time: time)
    }

    /// Appends one request as one entry per part (`Journal.parts`), queued together so one
    /// leader writes and syncs them together: durable together, or failed together, and cut
    /// together by recovery when a crash left only some of them. Returns the last sequence.
    @discardableResult
    public func append(payload: [UInt8], parts: [(range: Range<Int>, count: Int)], time: Timestamp) throws(JournalError) -> UInt64 {
        let nanos = time.unixNanoseconds
        let all = parts.enumerated().map { i, p in
            Pending(payload: payload[p.range], count: p.count, timeNanos: nanos, following: parts.count - 1 - i)
        }
        guard let pending = all.last else { return lastDurableSeq }
        monitor.lock()
        if closed {
            monitor.unlock()
            throw JournalError("the journal is closed (shutting down)")
        }
        queue.append(contentsOf: all)
        while !pending.done {
            if syncing {
                monitor.wait()
                continue
            }
            syncing = true
            let group = queue
            queue.removeAll(keepingCapacity: true)
            monitor.unlock()
            let result = writeGroup(group)
            monitor.lock()
            for p in group {
                p.done = true
                if case .failure(let e) = result { p.error = e }
            }
            if case .success = result {
                durableSeq = group[group.count - 1].seq
                durableEnd = (segmentFirstSeq, segmentSize)
                for p in group {
                    index.append(seq: p.seq, records: p.count, bytes: Journal.headerSize + p.payload.count, time: p.timeNanos)
                }
            }
            syncing = false
            monitor.broadcast()
        }
        monitor.unlock()
        if let e = pending.error { throw e }
        return pending.seq
    }

    /// Writes a group with one pwritev series and one fdatasync. Leader only.
    private func writeGroup(_ group: [Pending]) -> Result<Void, JournalError> {
        if let cut = tailToCut {
            let path = segmentPath(segmentFirstSeq)
            guard ftruncate(fd, off_t(cut)) == 0, fdatasync(fd) == 0 else {
                let e = IOError("ftruncate", path)
                logger.error("journal: still cannot cut \(path) back to \(cut) bytes (\(e)); refusing appends until it can")
                return .failure(JournalError(e))
            }
            tailToCut = nil
        }
        var total = 0
        for p in group { total += Journal.headerSize + p.payload.count }
        if segmentSize > 0 && segmentSize + total > segmentBytes {
            do {
                try createSegment(firstSeq: nextSeq)
                let start = nextSeq
                monitor.withLock { segmentStarts.append(start) }
            } catch {
                logger.error("journal: cannot start a new segment: \(error)")
                return .failure(JournalError(error))
            }
        }
        let startSize = segmentSize
        var headers = [UInt8](repeating: 0, count: Journal.headerSize * group.count)
        var seq = nextSeq
        for (i, p) in group.enumerated() {
            p.seq = seq
            Journal.encodeHeader(
                into: &headers, at: i * Journal.headerSize, length: p.payload.count,
                count: p.count, seq: seq, timeNanos: p.timeNanos, payloadCRC: p.payloadCRC,
                following: p.following)
            seq += 1
        }
        let path = segmentPath(segmentFirstSeq)
        var failure: IOError?
        headers.withUnsafeBytes { hp in
            var iov = [iovec]()
            iov.reserveCapacity(group.count * 2)
            // Keep every payload's storage alive and pinned while its pointer is in `iov`.
            withExtendedLifetime(group) {
                for (i, p) in group.enumerated() {
                    iov.append(
                        iovec(
                            iov_base: UnsafeMutableRawPointer(mutating: hp.baseAddress! + i * Journal.headerSize),
                            iov_len: Journal.headerSize))
                    if !p.payload.isEmpty {
                        p.payload.withUnsafeBytes { pp in
                            iov.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: pp.baseAddress!), iov_len: pp.count))
                        }
                    }
                }
                failure = Journal.pwritevAll(fd, &iov, offset: startSize, path: path)
            }
        }
        if failure == nil, fdatasync(fd) != 0 { failure = IOError("fdatasync", path) }
        if let failure {
            // Cut back to the last durable length so no half-written entry stays behind.
            if ftruncate(fd, off_t(startSize)) != 0 || fdatasync(fd) != 0 {
                logger.error("journal: cannot cut \(path) back after a failed write: \(IOError("ftruncate", path))")
                tailToCut = startSize
            }
            logger.error("journal: \(failure); \(group.count) request(s) answered 503, nothing of them kept")
            return .failure(JournalError(failure))
        }
        segmentSize = startSize + total
        nextSeq = seq
        return .success(())
    }

    /// The payload arrays are pinned by `withUnsafeBytes` only inside that call; Swift arrays
    /// with contiguous storage keep the same address while unmodified and alive, which
    /// `withExtendedLifetime(group)` guarantees.
    private static func pwritevAll(_ fd: Int32, _ iov: inout [iovec], offset: Int, path: String) -> IOError? {
        var index = 0
        var off = offset
        while index < iov.count {
            let n = min(iov.count - index, 1024)
            let written = iov.withUnsafeMutableBufferPointer { buf in
                pwritev(fd, buf.baseAddress! + index, Int32(n), off_t(off))
            }
            if written < 0 {
                if errno == EINTR { continue }
                return IOError("write", path)
            }
            if written == 0 { return IOError("write", path, code: EIO) }
            off += written
            var left = written
            while left > 0 && index < iov.count {
                if left >= iov[index].iov_len {
                    left -= iov[index].iov_len
                    index += 1
                } else {
                    iov[index].iov_base += left
                    iov[index].iov_len -= left
                    left = 0
                }
            }
        }
        return nil
    }

    // MARK: reading

    /// The sequence number of the newest durable entry (0 when there is none).
    public var lastDurableSeq: UInt64 { monitor.withLock { durableSeq } }

    /// Blocks until an entry after `seq` is durable, the journal closes, or `timeout` passes.
    /// Returns true when there is something to read.
    @discardableResult
    public func waitForEntries(after seq: UInt64, timeout: Double) -> Bool {
        monitor.lock()
        defer { monitor.unlock() }
        if durableSeq > seq || closed { return durableSeq > seq }
        let deadline = monotonicSeconds() + timeout
        while durableSeq <= seq && !closed {
            let left = deadline - monotonicSeconds()
            if left <= 0 { break }
            monitor.wait(seconds: left)
        }
        return durableSeq > seq
    }

    /// The newest durable entry's sequence number, segment and the segment's durable length.
    var durablePosition: (seq: UInt64, segment: UInt64, size: Int) {
        monitor.withLock { (durableSeq, durableEnd.segment, durableEnd.size) }
    }

    /// What waits for a reader whose cursor is `seq` with `skip` records of it done: records,
    /// bytes of journal, and the receive time (Unix ns) of the oldest waiting entry.
    public func backlog(fromSeq seq: UInt64, skip: Int) -> (records: Int, bytes: Int, oldestNanos: Int64?) {
        monitor.withLock { index.backlog(from: seq, skip: skip) }
    }

    /// The first entry to keep so that at most `maxBytes` of journal wait from it to the end
    /// (for a sink that drops its oldest records when over its limit).
    public func seqKeeping(lastBytes maxBytes: Int) -> UInt64 {
        monitor.withLock { index.seqKeeping(lastBytes: maxBytes) }
    }

    /// Journal bytes on disk in all segments.
    public var bytesOnDisk: Int { monitor.withLock { index.totalBytes } }

    /// Records the headers of a sealed segment in the index (a pread per entry, no payloads).
    private func indexHeaders(ofSegment start: UInt64) {
        let path = segmentPath(start)
        let rfd = open(path, O_RDONLY | O_CLOEXEC)
        guard rfd >= 0 else { return }
        defer { Glibc.close(rfd) }
        var header = [UInt8](repeating: 0, count: Journal.headerSize)
        var offset = 0
        while Journal.readExact(rfd, &header, count: Journal.headerSize, at: offset), let h = Journal.decodeHeader(header) {
            index.append(seq: h.seq, records: h.count, bytes: Journal.headerSize + h.length, time: h.timeNanos)
            offset += Journal.headerSize + h.length
        }
    }

    /// First sequence numbers of the segments on disk, oldest first.
    public var segmentFirstSeqs: [UInt64] { monitor.withLock { segmentStarts } }

    /// Deletes every segment all of whose entries are below `seq`; never the newest segment.
    /// With `lastEntryBefore` (Unix seconds), only segments whose newest entry came before it.
    /// What is below `seq` and stays on disk leaves the page cache (`releaseCache(below:)`).
    public func deleteSegments(below seq: UInt64, lastEntryBefore: Int64? = nil) {
        let victims: [UInt64] = monitor.withLock {
            var out: [UInt64] = []
            while segmentStarts.count > 1 && segmentStarts[1] <= seq {
                if let cutoff = lastEntryBefore,
                    let newest = index.time(ofSeq: segmentStarts[1] - 1), newest / 1_000_000_000 >= cutoff
                {
                    break
                }
                out.append(segmentStarts.removeFirst())
            }
            if let first = segmentStarts.first { index.drop(below: first) }
            return out
        }
        if !victims.isEmpty {
            for start in victims {
                if unlink(segmentPath(start)) != 0 {
                    logger.warning("journal: cannot delete \(Journal.segmentName(start)): \(IOError("unlink", segmentPath(start)))")
                }
            }
            try? FileIO.syncDirectory(directory)
        }
        releaseCache(below: seq)
    }

    /// Lets the kernel drop the cached pages of the entries below `seq`, which every reader has
    /// passed (`FileIO.releaseCache`): a segment kept for `retention`, and the passed part of the
    /// one being written, by at least a MiB at a time. The readers read entries soon after they
    /// are written, from the cache; once passed they are read again only by a restart or
    /// `replay --journal`, from the disk. So the journal holds in the page cache about what its
    /// slowest sink has still to read, and its new pages are the ones it let go, not new memory
    /// (on this project's VM, writing into new memory cost 2–6 times the CPU).
    private func releaseCache(below seq: UInt64) {
        let ranges: [(segment: UInt64, from: Int, to: Int?)] = monitor.withLock {
            var out: [(segment: UInt64, from: Int, to: Int?)] = []
            for (k, start) in segmentStarts.enumerated() where start < seq && start >= releasedTo.segment {
                let from = start == releasedTo.segment ? releasedTo.offset : 0
                if k + 1 < segmentStarts.count && segmentStarts[k + 1] <= seq {
                    out.append((start, from, nil)) // passed whole: to its end
                    releasedTo = (segmentStarts[k + 1], 0)
                } else if let to = index.bytes(from: start, to: seq), to - from >= 1 << 20 {
                    out.append((start, from, to))
                    releasedTo = (start, to)
                }
            }
            return out
        }
        for r in ranges {
            let rfd = open(segmentPath(r.segment), O_RDONLY | O_CLOEXEC)
            guard rfd >= 0 else { continue } // deleted meanwhile
            FileIO.releaseCache(rfd, offset: r.from, count: r.to.map { $0 - r.from } ?? 0)
            Glibc.close(rfd)
        }
    }

    /// Stops accepting appends and wakes every waiting reader.
    public func close() {
        monitor.withLock {
            closed = true
            monitor.broadcast()
        }
    }

    public var isClosed: Bool { monitor.withLock { closed } }

    /// Reads every intact entry of the journal in `directory` without opening it for writing
    /// (safe while `serve` runs: segments are append-only). Stops at the first entry that is
    /// incomplete (being written, or a torn tail).
    public static func scan(directory: String, visit: (JournalEntry) throws -> Void) throws {
        let starts = try FileIO.list(directory).compactMap { name -> UInt64? in
            guard name.hasSuffix(".seg"), name.count == 24 else { return nil }
            return UInt64(name.dropLast(4))
        }.sorted()
        var header = [UInt8](repeating: 0, count: headerSize)
        for start in starts {
            let path = FileIO.join(directory, segmentName(start))
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            if fd < 0 { continue } // deleted meanwhile
            defer { Glibc.close(fd) }
            var offset = 0
            while readExact(fd, &header, count: headerSize, at: offset), let h = decodeHeader(header) {
                guard let payload = readPayload(fd, count: h.length, at: offset + headerSize) else { break }
                offset += headerSize + h.length
                guard crc(payload) == h.payloadCRC else { continue }
                try visit(JournalEntry(seq: h.seq, timeNanos: h.timeNanos, count: h.count, payload: payload))
            }
        }
    }

    public func makeReader(from seq: UInt64) -> JournalReader {
        JournalReader(journal: self, nextSeq: max(seq, 1))
    }

    // MARK: encoding

    static func crc(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { crc(UnsafeRawBufferPointer($0)) }
    }

    static func crc(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        // zlib's CRC-32 (the polynomial the journal has always used), by libdeflate: ~3.5× zlib's
        // speed here (11 against 3.2 GB/s), and every entry is summed once written and once
        // for each reader.
        return libdeflate_crc32(0, base, bytes.count)
    }

    struct Header {
        var length: Int
        var count: Int
        var seq: UInt64
        var timeNanos: Int64
        var payloadCRC: UInt32
        /// Entries of the same request after this one (0 for the last or only one).
        var following: Int = 0
    }

    static func encodeHeader(
        into buf: inout [UInt8], at o: Int, length: Int, count: Int, seq: UInt64,
        timeNanos: Int64, payloadCRC: UInt32, following: Int = 0
    ) {
        buf.withUnsafeMutableBytes { b in
            b.storeBytes(of: magic.littleEndian, toByteOffset: o, as: UInt32.self)
            b.storeBytes(of: UInt32(length).littleEndian, toByteOffset: o + 8, as: UInt32.self)
            b.storeBytes(of: UInt32(count).littleEndian, toByteOffset: o + 12, as: UInt32.self)
            b.storeBytes(of: seq.littleEndian, toByteOffset: o + 16, as: UInt64.self)
            b.storeBytes(of: timeNanos.littleEndian, toByteOffset: o + 24, as: Int64.self)
            b.storeBytes(of: payloadCRC.littleEndian, toByteOffset: o + 32, as: UInt32.self)
            b.storeBytes(of: UInt32(following).littleEndian, toByteOffset: o + 36, as: UInt32.self)
            let hc = crc(UnsafeRawBufferPointer(rebasing: b[(o + 8)..<(o + headerSize)]))
            b.storeBytes(of: hc.littleEndian, toByteOffset: o + 4, as: UInt32.self)
        }
    }

    static func decodeHeader(_ buf: [UInt8]) -> Header? {
        buf.withUnsafeBytes { b -> Header? in
            guard b.count >= headerSize,
                UInt32(littleEndian: b.loadUnaligned(fromByteOffset: 0, as: UInt32.self)) == magic,
                UInt32(littleEndian: b.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                    == crc(UnsafeRawBufferPointer(rebasing: b[8..<headerSize]))
            else { return nil }
            return Header(
                length: Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: 8, as: UInt32.self))),
                count: Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: 12, as: UInt32.self))),
                seq: UInt64(littleEndian: b.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
                timeNanos: Int64(littleEndian: b.loadUnaligned(fromByteOffset: 24, as: Int64.self)),
                payloadCRC: UInt32(littleEndian: b.loadUnaligned(fromByteOffset: 32, as: UInt32.self)),
                following: Int(UInt32(littleEndian: b.loadUnaligned(fromByteOffset: 36, as: UInt32.self))))
        }
    }

    /// `count` bytes at `offset`, read into an array's room as it is made (not zeroed first: an
    /// entry is up to a MiB, read once for each drainer); nil when the file ends before.
    static func readPayload(_ fd: Int32, count: Int, at offset: Int) -> [UInt8]? {
        guard count > 0 else { return [] }
        var whole = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { room, initialized in
            whole = preadAll(fd, room.baseAddress!, count: count, at: offset)
            initialized = whole ? count : 0
        }
        return whole ? bytes : nil
    }

    static func readExact(_ fd: Int32, _ buf: inout [UInt8], count: Int, at offset: Int) -> Bool {
        buf.withUnsafeMutableBytes { preadAll(fd, $0.baseAddress!, count: count, at: offset) }
    }

    /// Reads `count` bytes at `offset` into `to`, through short reads and interruptions; false
    /// when the file ends before (or a read fails).
    private static func preadAll(_ fd: Int32, _ to: UnsafeMutableRawPointer, count: Int, at offset: Int) -> Bool {
        var got = 0
        while got < count {
            let n = pread(fd, to + got, count - got, off_t(offset + got))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            got += n
        }
        return true
    }
}

/// Reads durable entries in order for one consumer. Not thread-safe: one reader per drainer.
public final class JournalReader: @unchecked Sendable {
    let journal: Journal
    public private(set) var nextSeq: UInt64
    private var fd: Int32 = -1
    private var segmentStart: UInt64 = 0
    private var offset = 0
    private var header = [UInt8](repeating: 0, count: Journal.headerSize)

    init(journal: Journal, nextSeq: UInt64) {
        self.journal = journal
        self.nextSeq = nextSeq
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Reads up to `maxEntries` durable entries from `nextSeq` on (none when there is nothing new).
    /// An entry that fails its checksum (disk corruption) is reported through `corrupt` and skipped
    /// with the rest of its segment.
    public func read(
        maxEntries: Int, maxBytes: Int = 64 << 20,
        corrupt: (String) -> Void = { _ in }
    ) -> [JournalEntry] {
        var out: [JournalEntry] = []
        var bytes = 0
        while out.count < maxEntries && bytes < maxBytes {
            let durable = journal.lastDurableSeq
            guard nextSeq <= durable else { break }
            if fd < 0 && !seek(to: nextSeq, corrupt: corrupt) { break }
            guard Journal.readExact(fd, &header, count: Journal.headerSize, at: offset) else {
                // End of this segment: the entry is in the next one.
                if !moveToNextSegment(corrupt: corrupt) { break }
                continue
            }
            guard let h = Journal.decodeHeader(header), h.seq == nextSeq else {
                if !moveToNextSegment(corrupt: corrupt) {
                    corrupt("journal segment \(Journal.segmentName(segmentStart)) is damaged at byte \(offset)")
                    skipDamaged()
                }
                continue
            }
            guard let payload = Journal.readPayload(fd, count: h.length, at: offset + Journal.headerSize) else {
                corrupt("journal entry \(h.seq) is shorter than its header says; skipping the rest of its segment")
                skipDamaged()
                continue
            }
            guard Journal.crc(payload) == h.payloadCRC else {
                // The header has its own checksum, so its length is good: skip just this entry.
                corrupt("journal entry \(h.seq) (\(h.count) records) fails its checksum (disk damage); it is skipped")
                offset += Journal.headerSize + h.length
                nextSeq += 1
                continue
            }
            out.append(JournalEntry(seq: h.seq, timeNanos: h.timeNanos, count: h.count, payload: payload))
            bytes += h.length
            offset += Journal.headerSize + h.length
            nextSeq += 1
        }
        return out
    }

    /// Opens the segment holding `seq` and scans to it.
    private func seek(to seq: UInt64, corrupt: (String) -> Void) -> Bool {
        let starts = journal.segmentFirstSeqs
        guard let start = starts.last(where: { $0 <= seq }) ?? starts.first else { return false }
        if !open(segment: start) {
            corrupt("cannot open journal segment \(Journal.segmentName(start)): \(IOError("open", journal.segmentPath(start)))")
            return false
        }
        var s = start
        while s < seq {
            guard Journal.readExact(fd, &header, count: Journal.headerSize, at: offset),
                let h = Journal.decodeHeader(header)
            else {
                corrupt("journal segment \(Journal.segmentName(start)) is damaged at byte \(offset), before entry \(seq)")
                close(fd)
                fd = -1
                return false
            }
            offset += Journal.headerSize + h.length
            s = h.seq + 1
        }
        if start > seq {
            corrupt("journal entries \(seq)..<\(start) were deleted before this reader read them")
            nextSeq = start
        }
        return true
    }

    private func open(segment start: UInt64) -> Bool {
        if fd >= 0 { close(fd) }
        fd = Glibc.open(journal.segmentPath(start), O_RDONLY | O_CLOEXEC)
        segmentStart = start
        offset = 0
        return fd >= 0
    }

    private func moveToNextSegment(corrupt: (String) -> Void) -> Bool {
        let starts = journal.segmentFirstSeqs
        guard let next = starts.first(where: { $0 > segmentStart }) else { return false }
        if next > nextSeq {
            // This segment ends early (damage): the entries up to the next segment are gone.
            corrupt("journal entries \(nextSeq)..<\(next) are missing from \(Journal.segmentName(segmentStart)) (disk damage)")
            nextSeq = next
        } else if next < nextSeq {
            return false
        }
        if !open(segment: next) {
            corrupt("cannot open journal segment \(Journal.segmentName(next)): \(IOError("open", journal.segmentPath(next)))")
            return false
        }
        return true
    }

    /// Past damage that cannot be read through: to the next segment, or in the newest one to
    /// its durable end, so that entries appended after the damage are read.
    private func skipDamaged() {
        let starts = journal.segmentFirstSeqs
        if let next = starts.first(where: { $0 > segmentStart }) {
            nextSeq = next
            _ = open(segment: next)
        } else {
            let end = journal.durablePosition
            if end.segment == segmentStart {
                offset = end.size
            }
            nextSeq = end.seq + 1
        }
    }
}

/// Per journal entry on disk: its records, bytes and receive time, as prefix sums so that the
/// backlog of any cursor is two lookups. 24 bytes an entry (one per request), dropped with
/// the segments.
struct BacklogIndex {
    private(set) var firstSeq: UInt64 = 0
    /// recordsBefore[i]: records in the entries before entry firstSeq + i (one more at the end).
    private var recordsBefore: [Int] = [0]
    private var bytesBefore: [Int] = [0]
    private var times: [Int64] = []
    private var dropped = 0

    var count: Int { times.count - dropped }
    var totalBytes: Int { bytesBefore[bytesBefore.count - 1] - bytesBefore[dropped] }

    mutating func append(seq: UInt64, records: Int, bytes: Int, time: Int64) {
        if times.isEmpty && dropped == 0 { firstSeq = seq }
        // Entries come in order; a gap (a damaged entry skipped at recovery) still gets a row.
        guard seq == firstSeq + UInt64(times.count) else {
            if seq > firstSeq + UInt64(times.count) {
                for _ in 0..<(seq - firstSeq - UInt64(times.count)) { appendRow(records: 0, bytes: 0, time: time) }
                appendRow(records: records, bytes: bytes, time: time)
            }
            return
        }
        appendRow(records: records, bytes: bytes, time: time)
    }

    private mutating func appendRow(records: Int, bytes: Int, time: Int64) {
        recordsBefore.append(recordsBefore[recordsBefore.count - 1] + records)
        bytesBefore.append(bytesBefore[bytesBefore.count - 1] + bytes)
        times.append(time)
    }

    /// Forgets the entries below `seq` (their segments are gone).
    mutating func drop(below seq: UInt64) {
        guard seq > firstSeq + UInt64(dropped) else { return }
        dropped = min(times.count, Int(seq - firstSeq))
        // Compact once the dropped rows are the larger part.
        if dropped > 4096 && dropped * 2 > times.count {
            recordsBefore.removeFirst(dropped)
            bytesBefore.removeFirst(dropped)
            times.removeFirst(dropped)
            firstSeq += UInt64(dropped)
            dropped = 0
        }
    }

    /// The bytes of the entries from `a` up to `b` (not included), headers with them: where
    /// entry `b` starts in a segment that starts with `a`. Nil unless both are in the index (`b`
    /// may be one past its newest entry).
    func bytes(from a: UInt64, to b: UInt64) -> Int? {
        guard a >= firstSeq, b >= a else { return nil }
        let i = Int(a - firstSeq), j = Int(b - firstSeq)
        guard i >= dropped, j < bytesBefore.count else { return nil }
        return bytesBefore[j] - bytesBefore[i]
    }

    /// The receive time (Unix ns) of entry `seq`, if it is in the index.
    func time(ofSeq seq: UInt64) -> Int64? {
        guard seq >= firstSeq else { return nil }
        let i = Int(seq - firstSeq)
        return i >= dropped && i < times.count ? times[i] : nil
    }

    /// The oldest entry from which at most `maxBytes` remain to the end.
    func seqKeeping(lastBytes maxBytes: Int) -> UInt64 {
        let end = times.count
        let total = bytesBefore[end]
        // The first i with total - bytesBefore[i] <= maxBytes (bytesBefore grows with i).
        var lo = dropped, hi = end
        while lo < hi {
            let mid = (lo + hi) / 2
            if total - bytesBefore[mid] <= maxBytes { hi = mid } else { lo = mid + 1 }
        }
        return firstSeq + UInt64(lo)
    }

    func backlog(from seq: UInt64, skip: Int) -> (records: Int, bytes: Int, oldestNanos: Int64?) {
        let end = times.count
        let start = max(dropped, Int(clamping: Int64(bitPattern: seq &- firstSeq)))
        guard seq >= firstSeq, start < end else { return (0, 0, nil) }
        let records = recordsBefore[end] - recordsBefore[start] - skip
        let bytes = bytesBefore[end] - bytesBefore[start]
        return (max(0, records), bytes, times[start])
    }
}

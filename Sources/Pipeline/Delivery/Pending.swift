import CanonicalJSON
import FastJSON
import HealthgateCore

/// A drainer's journal records read but not yet delivered, each with where it came from.
///
/// Plain, `records` are the journal's records themselves, routed when a batch is made. Routed
/// ahead (every route to the sink only maps records: filter, rename, convert, tag, drop, none),
/// `records` are what the routes made of them, routed as they are decoded — on the read-ahead
/// thread while the sink writes the batch before (each with what of its journal line holds:
/// `RecordLine`); `ends` says which outputs are whose. (Encoding the changed lines there too
/// made the read-ahead the slower of the two threads: the sink encodes them.)
///
/// Lines only (a sink that reads no field, behind one route that passes every record as it is:
/// http, influxdb, a file sink with a fixed path), `records` holds the journal's lines alone, each
/// whole: nothing is parsed, and no record is made, moved and destroyed beside each line (an empty
/// record per line was a tenth of the server's CPU into InfluxDB).
struct Pending {
    /// The records (routed ahead: the routes' outputs) and their lines.
    var records = RoutedRecords()
    /// Where each journal record came from (from `head` on: the ones before were taken).
    private(set) var positions: [(seq: UInt64, index: Int)] = []
    /// Routed ahead: for each journal record, the end of its outputs in `records`.
    private(set) var ends: [Int]?
    /// Routed ahead: the journal records already taken by `takeRouted` (their outputs moved out
    /// of `records`, placeholders left): a batch smaller than what is pending (an http sink's
    /// 1,000 of 10,000 read ahead) takes from here on instead of moving all the rest to the
    /// front each time; the taken part is dropped once it is most of the arrays.
    private(set) var head = 0
    /// The journal's lines alone, no records (see above).
    let linesOnly: Bool

    init(routed: Bool, linesOnly: Bool = false) {
        ends = routed ? [] : nil
        self.linesOnly = linesOnly
    }

    /// An empty `Pending` read as this one is.
    private var emptied: Pending { Pending(routed: isRouted, linesOnly: linesOnly) }

    var isRouted: Bool { ends != nil }
    /// Journal records held.
    var count: Int { positions.count - head }
    var isEmpty: Bool { count == 0 }
    /// Where the oldest journal record held came from.
    var first: (seq: UInt64, index: Int)? { isEmpty ? nil : positions[head] }
    /// Where the newest came from.
    var last: (seq: UInt64, index: Int)? { isEmpty ? nil : positions.last }

    /// Decodes a journal entry's records from `skip` on (or takes them from `shared`, where
    /// another sink's drainer decoded them), routing them when `ahead` is given. `only`: the
    /// fields the sink and its routes read (`SinkRoutes.fieldsRead`); fewer than all are read
    /// here, not shared, and only while every record keeps its line. `patches`: the fields the
    /// routes may change (`SinkRoutes.changes`), which the sink writes anew into the lines: every
    /// line must walk then, and where they lie in it is found as it is read.
    mutating func decode(_ e: JournalEntry, skip: Int, parser: JSONParser, ahead: SinkRoutes?, shared: DecodedEntries? = nil,
                         only: CanonicalRecord.Fields = .all, patches: CanonicalRecord.Fields = [],
                         bad: (ArraySlice<UInt8>, String) -> Void) {
        if linesOnly {
            takeLines(e, skip: skip)
            return
        }
        // With other sinks reading the journal, the records are copied out of the shared entry;
        // alone, they are moved out of what was decoded.
        // One variable holds the decoded records: a second (a tuple they came in, say) would
        // make moving them out below copy the whole array first, every string retained.
        var entry: DecodedEntries.Entry
        var owned = true
        if only.isAll, let handed = shared?.takeHanded(e.seq),
           handed.entry.records.count == e.count, handed.entry.ranges?.last?.upperBound == e.payload.count {
            // Ingest handed over the records it encoded into this entry: whole, each with its line
            // (no spans: a route that changes a record has its line written anew).
            (entry, owned) = handed
        } else if !only.isAll {
            entry = DecodedEntries.decodeNow(e, parser: parser, only: only, patches: patches)
            // A line that did not decode (or walk) leaves the records without their lines: the
            // sink then encodes each record, and needs all of it.
            if entry.ranges == nil { entry = DecodedEntries.decodeNow(e, parser: parser) }
        } else if let shared {
            (entry, owned) = shared.decode(e, parser: parser)
        } else {
            entry = DecodedEntries.decodeNow(e, parser: parser)
        }
        for f in entry.failures {
            // Only a damaged disk or a bug gets here: the line is kept, not dropped.
            bad(e.payload[f.range], "journal entry \(e.seq) line \(f.line) is not a canonical record: \(f.error)")
        }
        let ranges = entry.ranges
        let spans = entry.spans
        let payload = e.payload
        guard skip < entry.records.count else { return }
        if owned && skip == 0 && spans == nil && positions.isEmpty && records.isEmpty && (ahead?.passesAsIs ?? true) {
            // Nothing held yet, all of the entry taken, and the routes (if they run here) pass
            // every record as it is: the decoded array becomes the pending one (moving each
            // record out left an empty one in its place, which the array then destroyed).
            adopt(&entry.records, lines: ranges, payload: payload, seq: e.seq)
            return
        }
        let n = entry.records.count - skip
        positions.reserve(atLeast: positions.count + n)
        records.records.reserve(atLeast: records.count + n)
        records.lines.reserve(atLeast: records.count + n)
        if ahead != nil, ends != nil { ends!.reserve(atLeast: positions.count + n) }
        func take(_ r: consuming CanonicalRecord, _ index: Int) {
            let line: RecordLine = ranges.map { ranges in
                spans.map { .patched(payload[ranges[index]], changed: [], spans: $0[index]) } ?? .whole(payload[ranges[index]])
            } ?? .none
            if let ahead, ends != nil {
                _ = ahead.process(consume r, line: line, into: &records)
                positions.append((e.seq, index))
                ends!.append(records.count)
            } else {
                records.append(consume r, line: line)
                positions.append((e.seq, index))
            }
        }
        let firstOutput = records.count
        if owned {
            // Each record is moved out of the decoded array (not copied: a copy retains each
            // of its strings), its place left to an empty record until the array goes.
            entry.records.withUnsafeMutableBufferPointer { all in
                let base = all.baseAddress!
                for index in skip..<all.count { take((base + index).move(), index) }
                (base + skip).initialize(repeating: CanonicalRecord.empty, count: n)
            }
        } else {
            entry.records.withUnsafeBufferPointer { all in
                for index in skip..<all.count { take(all[index], index) }
            }
        }
        if spans != nil, ahead != nil { writeChangedLines(from: firstOutput, payloadBytes: payload.count) }
    }

    /// Lines only: the entry's lines from `skip` on, each whole (not parsed: the entry's
    /// checksum was checked when it was read; a line that is no record is the sink's to find).
    private mutating func takeLines(_ e: JournalEntry, skip: Int) {
        let ranges = CanonicalCodec.lineRanges(e.payload)
        guard skip < ranges.count else { return }
        let n = ranges.count - skip
        positions.reserve(atLeast: positions.count + n)
        records.lines.reserve(atLeast: records.count + n)
        if ends != nil { ends!.reserve(atLeast: positions.count + n) }
        let payload = e.payload
        for index in skip..<ranges.count {
            records.append(line: .whole(payload[ranges[index]]))
            positions.append((e.seq, index))
            ends?.append(records.count)
        }
    }

    /// `decode`'s records taken whole into an empty `Pending`, with their lines.
    private mutating func adopt(_ all: inout [CanonicalRecord], lines ranges: [Range<Int>]?, payload: [UInt8], seq: UInt64) {
        let n = all.count
        swap(&records.records, &all)
        records.lines = ranges.map { $0.map { .whole(payload[$0]) } } ?? Array(repeating: .none, count: n)
        positions = (0..<n).map { (seq, $0) }
        if ends != nil { ends = Array(1...n) }
    }

    /// Routed ahead with the records read in part (a sink that writes lines: file, http), the
    /// lines of the records the routes changed are written here, on the read-ahead's threads,
    /// into one buffer for the entry — the sink then copies every line as it is, as it does the
    /// unchanged ones, instead of writing the changed members into it while it writes.
    private mutating func writeChangedLines(from first: Int, payloadBytes: Int) {
        var buffer: [UInt8] = []
        var written: [(index: Int, range: Range<Int>)] = []
        let tagsText = TagsText()
        records.records.withUnsafeBufferPointer { all in
            for i in first..<all.count {
                guard case .patched(_, let changed, _) = records.lines[i], changed.rawValue != 0 else { continue }
                if buffer.isEmpty { buffer.reserveCapacity(payloadBytes + payloadBytes / 4) }
                let start = buffer.count
                CanonicalRecord.appendNDJSON(at: all.baseAddress! + i, to: &buffer, reusing: records.lines[i], tagsText: tagsText)
                written.append((i, start..<buffer.count))
            }
        }
        for w in written { records.lines[w.index] = .whole(buffer[w.range]) }
    }

    /// Routed ahead: the outputs of the oldest journal records, record by record until at
    /// least `maxItems` (or all), taken out; with how many journal records they were and how
    /// many of those the routes passed nothing on for.
    mutating func takeRouted(atLeast maxItems: Int) -> (RoutedRecords, consumed: Int, filtered: Int) {
        guard let ends else { preconditionFailure("takeRouted on records that were not routed ahead") }
        let from = head == 0 ? 0 : ends[head - 1]   // the first output not taken
        var consumed = 0, filtered = 0, taken = 0
        while head + consumed < ends.count && taken < maxItems {
            let end = ends[head + consumed] - from
            if end == taken { filtered += 1 }
            taken = end
            consumed += 1
        }
        if head == 0 && consumed == count {
            let batch = records
            self = emptied
            return (batch, consumed, filtered)
        }
        let batch = records.take(from..<(from + taken))
        head += consumed
        if head == positions.count {
            self = emptied
        } else if head >= 1024 && head * 2 >= positions.count {
            // The taken part is most of it: dropped, the rest moved to the front once.
            let outputs = ends[head - 1]
            records.removeFirst(outputs)
            positions.removeFirst(head)
            self.ends = ends[head...].map { $0 - outputs }
            head = 0
        }
        return (batch, consumed, filtered)
    }

    /// Drops the oldest `n` journal records (plain only: routed ahead, `takeRouted`).
    mutating func removeFirst(_ n: Int) {
        precondition(ends == nil && head == 0, "removeFirst on records routed ahead")
        if n >= count {
            self = emptied
            return
        }
        records.removeFirst(n)
        positions.removeFirst(n)
    }

    /// Appends what a read-ahead decoded after these, moving its records (a copy retained
    /// each string of each), and leaves it empty.
    mutating func append(_ other: inout Pending) {
        guard !other.isEmpty else { return }
        if isEmpty {
            swap(&self, &other)
            return
        }
        precondition(other.head == 0, "a read-ahead's records were taken from before they joined")
        precondition(other.linesOnly == linesOnly, "lines alone joined with records")
        if let more = other.ends {
            let base = records.count
            ends!.append(contentsOf: more.lazy.map { $0 + base })
        }
        records.appendMoving(&other.records)
        positions += other.positions
        other = other.emptied
    }
}

extension Array {
    /// Room for `n` elements, growing by doubling: `reserveCapacity(count + n)` for each of
    /// many small journal entries reallocates (and copies every pending record) each time —
    /// it was a fifth of the server's CPU with 44-sample bodies.
    mutating func reserve(atLeast n: Int) {
        if capacity < n { reserveCapacity(Swift.max(n, capacity * 2)) }
    }
}

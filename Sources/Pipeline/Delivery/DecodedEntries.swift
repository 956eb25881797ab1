import CanonicalJSON
import FastJSON
import HealthgateCore
import Posix
import Synchronization

/// Journal entries decoded once for all the sinks that read them: the first drainer to reach an
/// entry decodes it and leaves the records here; the others copy them (a copy retains the
/// records' strings, a twentieth of a decode) and the last of them takes the entry out. A
/// drainer that reaches an entry another is decoding waits for it (sinks in step reach each new
/// entry together). Bounded: past `maxRecords` the oldest entries go, and a sink that lags that
/// far behind decodes them again itself. With one sink nothing is kept (`readers` ≤ 1), and its
/// drainer moves records out of what it decoded, as before. Sinks that read only a few fields
/// (`SinkDrainer.readsWholeRecords` false) decode those themselves and are not readers here.
public final class DecodedEntries: @unchecked Sendable {
    /// One entry as decoded: its records, each one's line in the entry's payload (nil when some
    /// line did not decode, so that lines and records do not pair up), and the lines that did
    /// not decode.
    struct Entry: Sendable {
        var records: [CanonicalRecord]
        var ranges: [Range<Int>]?
        /// Read for patching (`CanonicalCodec.readLines`): each line's spans.
        var spans: [LineSpans]? = nil
        var failures: [(line: Int, error: CanonicalDecodeError, range: Range<Int>)]
        /// Drainers still to read it.
        var left: Int
        /// Handed over: when (monotonic seconds).
        var since: Double = 0
    }

    private enum Slot {
        case decoding
        case decoded(Entry)
    }

    // Under `monitor`.
    private let monitor = Monitor()
    private var readers = 1
    private var slots: [UInt64: Slot] = [:]
    /// Entries kept, oldest first, and the records they hold.
    private var order: [UInt64] = []
    private var records = 0

    let maxRecords: Int
    /// Entries decoded, and entries a drainer found decoded (for tests).
    public let decodes = Atomic<Int>(0)
    public let reuses = Atomic<Int>(0)

    // Under `monitor`: entries handed over by ingest (`handOver`), for the drainers that parse.
    private var handed: [UInt64: Entry] = [:]
    private var handedOrder: [UInt64] = []
    private var handedRecords = 0
    /// Records requests keep while their entries are written (`reserve`), not yet handed over.
    private var reserved = 0
    private var parsingReaders = 0
    let maxHanded: Int
    /// Past this age (seconds) a handed-over entry may go to make room even if no drainer took
    /// it: one that skipped it (shed under `drop_oldest`, a damaged entry) never will.
    let maxHandedAge: Double
    /// Entries a drainer took as ingest handed them over, not parsed (for tests and `--micro`).
    public let handedTaken = Atomic<Int>(0)

    public init(maxRecords: Int = 10_000, maxHanded: Int = 16_000, maxHandedAge: Double = 60) {
        self.maxRecords = maxRecords
        self.maxHanded = maxHanded
        self.maxHandedAge = maxHandedAge
    }

    /// How many drainers take what ingest hands over (`SinkDrainer.takesHandedRecords`: those
    /// that decode whole records). None, and ingest keeps no records (`recordsWanted`). What was
    /// handed over for another count of drainers is let go (they parse it).
    public func setParsingReaders(_ n: Int) {
        monitor.withLock {
            guard max(0, n) != parsingReaders else { return }
            parsingReaders = max(0, n)
            handed = [:]
            handedOrder = []
            handedRecords = 0
        }
    }

    /// How many records one request may keep for the drainers (`ReceiveContext.keepRecords`):
    /// the room left, when some drainer parses; else none.
    public var recordsWanted: Int {
        monitor.withLock { parsingReaders > 0 ? max(0, maxHanded - handedRecords - reserved) : 0 }
    }

    /// Room for the `n` records a request kept, counted from now until they are handed over
    /// (`handOver(reserved: true)`) or given back (`release`): so that what requests hold while
    /// their entries are written (one per HTTP thread, each up to the room it was told) and what
    /// is held for the drainers stay within `maxHanded` together. Makes room as `handOver` does;
    /// false when there is none (the request hands nothing over).
    public func reserve(_ n: Int) -> Bool {
        monitor.withLock {
            guard parsingReaders > 0, n > 0, makeRoom(for: reserved + n, now: monotonicSeconds()) else { return false }
            reserved += n
            return true
        }
    }

    /// Gives back a reservation (`reserve`) whose records will not be handed over.
    public func release(_ n: Int) {
        monitor.withLock { reserved = max(0, reserved - n) }
    }

    /// Lets go of held entries until `needed` more records fit within `maxHanded`: the oldest that
    /// some drainer took already (they wait for a sink that lags or is stuck), and those older than
    /// `maxHandedAge`. Evicting the oldest first would lose every entry to a drainer that lags by
    /// more than the bound. (With the lock held.)
    private func makeRoom(for needed: Int, now: Double) -> Bool {
        var i = 0
        while i < handedOrder.count && handedRecords + needed > maxHanded {
            let seq = handedOrder[i]
            if let entry = handed[seq], entry.left < parsingReaders || now - entry.since > maxHandedAge {
                handed[seq] = nil
                handedOrder.remove(at: i)
                handedRecords -= entry.records.count
            } else {
                i += 1
            }
        }
        return handedRecords + needed <= maxHanded
    }

    /// Records held as ingest handed them over (tests).
    public var handedRecordsKept: Int { monitor.withLock { handedRecords } }

    /// The records of the entries one request became, as ingest made them (canonical, and
    /// encoded into those entries' lines: a line decodes to its record), part for part (the last
    /// one entry `lastSeq`), left for the drainers that parse, which take them instead of
    /// parsing what was just encoded. Called by the journal as the entries become durable,
    /// before any drainer can read them.
    /// Bounded by `maxHanded` records with what requests reserved: past it, room is made
    /// (`makeRoom`), else the new ones are not kept (the drainers take the ones kept, which makes
    /// room again, and parse the others). `reserved`: these records were (`reserve`), and their
    /// reservation ends here.
    func handOver(_ parts: [KeptPart], lastSeq: UInt64, now: Double = monotonicSeconds(), reserved own: Bool = false) {
        let adding = parts.reduce(0) { $0 + $1.records.count }
        monitor.withLock {
            if own { reserved = max(0, reserved - adding) }
            guard parsingReaders > 0, makeRoom(for: adding + reserved, now: now) else { return }
            for (i, part) in parts.enumerated() {
                let seq = lastSeq - UInt64(parts.count - 1 - i)
                handed[seq] = Entry(records: part.records, ranges: part.ranges, failures: [], left: parsingReaders, since: now)
                handedOrder.append(seq)
            }
            handedRecords += adding
        }
    }

    /// The records ingest handed over with entry `seq`, if they are still here; `owned` when
    /// this is the last drainer to take them (it may move them out).
    func takeHanded(_ seq: UInt64) -> (entry: Entry, owned: Bool)? {
        let found: (Entry, Bool)? = monitor.withLock {
            guard !handed.isEmpty, var entry = handed[seq] else { return nil }
            entry.left -= 1
            if entry.left <= 0 {
                handed[seq] = nil
                if let i = handedOrder.firstIndex(of: seq) { handedOrder.remove(at: i) }
                handedRecords -= entry.records.count
                return (entry, true)
            }
            handed[seq] = entry
            return (entry, false)
        }
        if found != nil { handedTaken.add(1, ordering: .relaxed) }
        return found
    }

    /// How many drainers read the journal (the sinks of the running config).
    public func setReaders(_ n: Int) {
        monitor.withLock {
            readers = max(1, n)
            if readers == 1 {
                slots = slots.filter { if case .decoding = $0.value { return true }; return false }
                order = []
                records = 0
            }
        }
    }

    /// Records held for drainers still to read them (tests).
    public var keptRecords: Int { monitor.withLock { records } }

    /// The entry decoded: from here when another drainer left it (or as soon as the one
    /// decoding it is done), else decoded now and left for the others; `owned` when no other
    /// sink reads it (the caller may move its records out).
    func decode(_ e: JournalEntry, parser: JSONParser) -> (entry: Entry, owned: Bool) {
        var alone = false
        let found: Entry? = monitor.withLock {
            if readers <= 1 {
                alone = true
                return nil
            }
            while true {
                switch slots[e.seq] {
                case .decoding?:
                    monitor.wait()
                case .decoded(var entry)?:
                    entry.left -= 1
                    if entry.left <= 0 {
                        slots[e.seq] = nil
                        if let i = order.firstIndex(of: e.seq) { order.remove(at: i) }
                        records -= entry.records.count
                    } else {
                        slots[e.seq] = .decoded(entry)
                    }
                    return entry
                case nil:
                    slots[e.seq] = .decoding
                    return nil
                }
            }
        }
        if let found {
            reuses.add(1, ordering: .relaxed)
            return (found, false)
        }
        var entry = DecodedEntries.decodeNow(e, parser: parser)
        decodes.add(1, ordering: .relaxed)
        if alone { return (entry, true) }
        monitor.withLock {
            defer { monitor.broadcast() }
            guard case .decoding? = slots[e.seq] else { return }
            guard readers > 1 else {
                slots[e.seq] = nil
                return
            }
            entry.left = readers - 1
            slots[e.seq] = .decoded(entry)
            order.append(e.seq)
            records += entry.records.count
            while records > maxRecords, let oldest = order.first {
                order.removeFirst()
                if case .decoded(let gone)? = slots.removeValue(forKey: oldest) { records -= gone.records.count }
            }
        }
        return (entry, false)
    }

    static func decodeNow(_ e: JournalEntry, parser: JSONParser, only: CanonicalRecord.Fields = .all,
                          patches: CanonicalRecord.Fields = []) -> Entry {
        var failures: [(line: Int, error: CanonicalDecodeError, range: Range<Int>)] = []
        let read = CanonicalCodec.readLines(e.payload, parser: parser, only: only, patches: patches) { line, error, range in
            failures.append((line, error, range))
        }
        return Entry(records: read.records, ranges: read.ranges, spans: read.spans, failures: failures, left: 0)
    }
}

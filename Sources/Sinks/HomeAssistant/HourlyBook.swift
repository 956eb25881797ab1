import HealthgateCore

/// What the homeassistant sink keeps to write Home Assistant's hourly statistics right: per
/// device and type, every sample of the window (`history`) by its key, in the UTC hour its
/// start falls in. That is what recomputing an hour needs when a sample comes late, comes again
/// (counted once) or is deleted (a mean type's min and max too), and the running sums after it.
/// Hours that leave the window fold into their series' `base`, the sum before its first hour.
///
/// Owned by the sink's drainer thread; saved with the sink's cursor (`save`/`restore`).
final class HourlyBook {
    struct SeriesID: Hashable, Comparable {
        var device: String
        var type: String

        static func < (a: SeriesID, b: SeriesID) -> Bool { (a.device, a.type) < (b.device, b.type) }
    }

    /// A sample's key: its uuid's hash and its part (-1: none). A deletion removes every part.
    struct SampleKey: Hashable, Comparable {
        var uuid: UInt64
        var part: Int32

        static func < (a: SampleKey, b: SampleKey) -> Bool { (a.uuid, a.part) < (b.uuid, b.part) }
    }

    struct Series {
        var kind: HAStatisticKind
        /// The sum of the hours that left the window (cumulative types).
        var base: Double = 0
        /// Hour start (Unix seconds) → sample → value in Home Assistant's unit. An hour whose
        /// samples were all deleted stays, empty, until it leaves the window: it is written again
        /// when a sum before it changes.
        var hours: [Int64: [SampleKey: Double]] = [:]
    }

    struct Place {
        var part: Int32
        var type: String
        var hour: Int64
    }

    /// One hour as Home Assistant stores it: `sum` (and `state`, the same meter reading) for a
    /// cumulative type; `mean`/`min`/`max` for the others (all nil: the hour has no sample left).
    struct Row: Equatable {
        var start: Int64
        var sum: Double?
        var mean: Double?
        var min: Double?
        var max: Double?
    }

    /// How far back samples are written, in seconds.
    let window: Int64
    private(set) var series: [SeriesID: Series] = [:]
    /// Where each sample is, by device and uuid (its parts): a deletion carries only the uuid.
    private var located: [String: [UInt64: [Place]]] = [:]
    /// Hours changed and not yet written (a cumulative series writes from its earliest on).
    private(set) var dirty: [SeriesID: Set<Int64>] = [:]
    /// The receiver each device's records came by, last (names can be by receiver).
    private(set) var receivers: [String: String] = [:]

    init(window: Int64) {
        self.window = window
    }

    static func hour(_ t: Int64) -> Int64 { (t >= 0 ? t : t - 3599) / 3600 * 3600 }

    /// The first hour written: samples that started before `now - window` are not.
    func firstHour(now: Int64) -> Int64 { HourlyBook.hour(now - window) }

    /// Applies records in order; `wanted` says which types are written. Returns the samples
    /// taken (a deletion of a sample the book has counts too), and the records that can never be
    /// written, by index, with why: a quantity with no number or a unit that is not its type's.
    @discardableResult
    func apply(
        _ records: [CanonicalRecord], now: Int64, wanted: (String) -> Bool = { _ in true }
    ) -> (taken: Int, refused: [(index: Int, reason: String)]) {
        var taken = 0
        var refused: [(Int, String)] = []
        for (i, r) in records.enumerated() {
            let uuid = FNV1a.hash(r.uuid.utf8)
            if r.op == .delete {
                if remove(device: r.device, uuid: uuid) { taken += 1 }
                continue
            }
            guard r.kind == RecordKind.quantity, wanted(r.type), let kind = HAStatisticKind.of(type: r.type) else { continue }
            guard let start = r.start ?? r.end else {
                refused.append((i, "a \(r.type) sample with no time"))
                continue
            }
            guard let value = canonicalValue(r), value.isFinite else {
                refused.append((i, "a \(r.type) sample whose value is not a number in a unit of its type"))
                continue
            }
            receivers[r.device] = r.receiver
            let part = Int32(clamping: r.part ?? -1)
            remove(device: r.device, uuid: uuid, part: part) // it may have moved to another hour
            guard start.seconds >= now - window else { continue }
            let id = SeriesID(device: r.device, type: r.type)
            let hour = HourlyBook.hour(start.seconds)
            series[id, default: Series(kind: kind)].hours[hour, default: [:]][SampleKey(uuid: uuid, part: part)] = value * kind.factor
            located[r.device, default: [:]][uuid, default: []].append(Place(part: part, type: r.type, hour: hour))
            dirty[id, default: []].insert(hour)
            taken += 1
        }
        return (taken, refused)
    }

    /// The value in the type's canonical unit (records carry it so; another unit is converted).
    private func canonicalValue(_ r: CanonicalRecord) -> Double? {
        guard let v = r.value?.number else { return nil }
        guard let unit = r.unit, let canonical = HealthTypes.named(r.type)?.unit, unit != canonical else { return v }
        return Units.convert(v, from: unit, to: canonical)
    }

    /// Removes a sample's part (`part`), or every part of it (nil); true when there was one.
    @discardableResult
    private func remove(device: String, uuid: UInt64, part: Int32? = nil) -> Bool {
        guard let places = located[device]?[uuid] else { return false }
        var kept: [Place] = []
        for p in places {
            guard part == nil || p.part == part else {
                kept.append(p)
                continue
            }
            let id = SeriesID(device: device, type: p.type)
            series[id]?.hours[p.hour]?[SampleKey(uuid: uuid, part: p.part)] = nil
            dirty[id, default: []].insert(p.hour)
        }
        located[device]?[uuid] = kept.isEmpty ? nil : kept
        return kept.count < places.count
    }

    /// Hours that ended before the window: folded into the base, their samples forgotten.
    func prune(now: Int64) {
        let first = firstHour(now: now)
        for id in Array(series.keys) {
            guard var s = series[id], s.hours.keys.contains(where: { $0 < first }) else { continue }
            for (hour, samples) in s.hours where hour < first {
                s.base += HourlyBook.total(samples)
                for key in samples.keys {
                    located[id.device]?[key.uuid]?.removeAll { $0.part == key.part && $0.hour == hour && $0.type == id.type }
                    if located[id.device]?[key.uuid]?.isEmpty == true { located[id.device]?[key.uuid] = nil }
                }
                s.hours[hour] = nil
                dirty[id]?.remove(hour)
            }
            series[id] = s
        }
    }

    /// A sum that does not depend on the order a dictionary keeps.
    static func total(_ samples: [SampleKey: Double]) -> Double {
        samples.sorted { $0.key < $1.key }.reduce(0) { $0 + $1.value }
    }

    static func row(_ hour: Int64, _ samples: [SampleKey: Double]) -> Row {
        guard !samples.isEmpty else { return Row(start: hour) }
        let values = samples.sorted { $0.key < $1.key }.map(\.value)
        return Row(start: hour, mean: values.reduce(0, +) / Double(values.count), min: values.min(), max: values.max())
    }

    /// Every hour of a series as it should stand in Home Assistant.
    func rows(of id: SeriesID) -> [Row] {
        guard let s = series[id] else { return [] }
        var out: [Row] = []
        var running = s.base
        for hour in s.hours.keys.sorted() {
            let samples = s.hours[hour]!
            if s.kind.cumulative {
                running += HourlyBook.total(samples)
                out.append(Row(start: hour, sum: running))
            } else if !samples.isEmpty {
                out.append(HourlyBook.row(hour, samples))
            }
        }
        return out
    }

    /// The rows to write for what changed: a cumulative series from its earliest changed hour on
    /// (the sums after it moved), a mean series its changed hours (an emptied one as no values).
    func changedRows(of id: SeriesID) -> [Row] {
        guard let s = series[id], let hours = dirty[id], let from = hours.min() else { return [] }
        if s.kind.cumulative { return rows(of: id).filter { $0.start >= from } }
        return hours.sorted().map { HourlyBook.row($0, s.hours[$0] ?? [:]) }
    }

    /// The changed rows of `id` are in Home Assistant. A mean series forgets its emptied hours.
    func written(_ id: SeriesID) {
        guard let hours = dirty.removeValue(forKey: id), series[id]?.kind.cumulative == false else { return }
        for h in hours where series[id]?.hours[h]?.isEmpty == true { series[id]?.hours[h] = nil }
    }

    /// Compares a series with what Home Assistant has (`have`, by hour): the hours it lacks or has
    /// otherwise are marked to be written.
    func reconcile(_ id: SeriesID, with have: [Int64: Row]) {
        for row in rows(of: id) where !(have[row.start].map { HourlyBook.same(row, $0) } ?? false) {
            dirty[id, default: []].insert(row.start)
        }
    }

    static func same(_ a: Row, _ b: Row) -> Bool {
        func close(_ x: Double?, _ y: Double?) -> Bool {
            guard let x, let y else { return x == nil && y == nil }
            return abs(x - y) <= 1e-6 * max(1, abs(x))
        }
        return close(a.sum, b.sum) && close(a.mean, b.mean) && close(a.min, b.min) && close(a.max, b.max)
    }

    // MARK: state

    static let stateVersion = "ha-hours-2"

    /// The series of the devices in `scope`: per series its device, type, receiver, base, and
    /// its hours packed (hour, count, then per sample its uuid's hash, part and value; little-endian).
    func save(of scope: DeviceScope) -> [UInt8] {
        var w = StateWriter()
        w.put(HourlyBook.stateVersion)
        for id in series.keys.sorted() where scope.contains(id.device) {
            let s = series[id]!
            w.put(id.device)
            w.put(id.type)
            w.put(receivers[id.device] ?? "")
            w.put(s.base)
            var packed: [UInt8] = []
            packed.reserveCapacity(s.hours.reduce(0) { $0 + 16 + 24 * $1.value.count })
            for hour in s.hours.keys.sorted() {
                let samples = s.hours[hour]!
                HourlyBook.append(UInt64(bitPattern: hour), to: &packed)
                HourlyBook.append(UInt64(samples.count), to: &packed)
                for (key, value) in samples.sorted(by: { $0.key < $1.key }) {
                    HourlyBook.append(key.uuid, to: &packed)
                    HourlyBook.append(UInt64(bitPattern: Int64(key.part)), to: &packed)
                    HourlyBook.append(value.bitPattern, to: &packed)
                }
            }
            w.put(bytes: packed)
        }
        return w.bytes
    }

    /// Replaces what the book has of the devices in `scope` with what `save` wrote of them.
    func restore(_ bytes: [UInt8], of scope: DeviceScope) throws(TransformStateError) {
        for id in Array(series.keys) where scope.contains(id.device) {
            series[id] = nil
            dirty[id] = nil
        }
        for device in Array(located.keys) where scope.contains(device) { located[device] = nil }
        guard !bytes.isEmpty else { return }
        var r = StateReader(bytes)
        let version = try r.take()
        guard version == HourlyBook.stateVersion else {
            throw TransformStateError("not a homeassistant sink's state (\(version.prefix(20)))")
        }
        while !r.atEnd {
            let device = try r.take()
            let type = try r.take()
            let receiver = try r.take()
            let base = try r.double()
            let packed = Array(try r.takeBytes())
            guard let kind = HAStatisticKind.of(type: type) else { continue }
            let id = SeriesID(device: device, type: type)
            var s = Series(kind: kind, base: base)
            var at = 0
            func next() throws(TransformStateError) -> UInt64 {
                guard at + 8 <= packed.count else { throw TransformStateError("the state of \(type) is cut") }
                var v: UInt64 = 0
                for i in 0..<8 { v |= UInt64(packed[at + i]) << (8 * UInt64(i)) }
                at += 8
                return v
            }
            while at < packed.count {
                let hour = Int64(bitPattern: try next())
                let count = try next()
                guard count <= UInt64(packed.count) else { throw TransformStateError("the state of \(type) is damaged") }
                var samples: [SampleKey: Double] = [:]
                for _ in 0..<count {
                    let uuid = try next()
                    let part = Int32(clamping: Int64(bitPattern: try next()))
                    samples[SampleKey(uuid: uuid, part: part)] = Double(bitPattern: try next())
                    located[device, default: [:]][uuid, default: []].append(Place(part: part, type: type, hour: hour))
                }
                s.hours[hour] = samples
            }
            series[id] = s
            if !receiver.isEmpty { receivers[device] = receiver }
        }
    }

    private static func append(_ v: UInt64, to out: inout [UInt8]) {
        for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }
}

import CanonicalJSON
import HealthgateCore
import Posix
import YAMLConfig

/// Per type and interval — a minute, an hour, the phone's local day — one derived record per
/// bucket, with a stable key, holding the sum, mean, min, max, count or last value of the
/// samples in it. It is emitted again (same key: a store replaces it) whenever a batch changes
/// the bucket: a late sample is added, a resent one counts once, a deletion takes its sample
/// out (and a bucket left empty is deleted).
///
/// ```yaml
/// - aggregate: {types: [steps, active_energy_burned], every: 1h, how: sum, keep_source: false}
/// ```
///
/// `every`: a duration that divides a day (`1m`, `5m`, `15m`, `1h`, …) or `day`, in the phone's
/// local time (the records' UTC offset, else `time_zone`, else UTC). `how`: sum (default), mean,
/// min, max, count, last. `keep_source` (default true): the samples pass on as well. The derived
/// record: the same device, receiver and type, `start`/`end` the bucket's, `value` the figure,
/// the sample's unit, tags `aggregate` (how) and `interval` (every), and `samples` (how many).
/// State: each bucket's samples by key, committed with the sink's cursor; at most `max_samples`
/// (default 200,000) — past it the oldest buckets are closed, and a sample for a closed bucket
/// is not counted (the log says so once).
public struct AggregateTransform: TransformSpec {
    enum How: String, CaseIterable, Sendable { case sum, mean, min, max, count, last }

    let types: [Glob]
    let every: Int64
    let everyName: String
    let how: How
    let keepSource: Bool
    let timeZone: String?
    let maxSamples: Int

    public var kind: String { "aggregate" }

    public func instantiate(_ context: TransformContext) -> any Transform {
        Instance(spec: self, timeZones: context.timeZones, logger: context.logger)
    }

    final class Instance: Transform {
        struct Sample: Equatable {
            var value: Double
            var time: Int64
        }

        struct Bucket {
            var device: String
            var receiver: String
            var type: String
            var start: Int64
            var offset: Int
            var unit: String?
            var samples: [String: Sample] = [:]
        }

        let spec: AggregateTransform
        let timeZones: any TimeZoneLookup
        let logger: Logger
        var buckets: [String: Bucket] = [:]
        /// Sample key (device, uuid) → the bucket it is in, for deletions.
        var where_: [String: String] = [:]
        var changed: [String] = []
        var changedSet = Set<String>()
        var total = 0
        /// Buckets that start before this were closed to stay within max_samples (Unix seconds).
        var closedBefore: Int64 = .min
        var saidClosed = false

        init(spec: AggregateTransform, timeZones: any TimeZoneLookup, logger: Logger) {
            self.spec = spec
            self.timeZones = timeZones
            self.logger = logger
        }

        func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
            let sampleKey = record.device + "\u{1}" + record.uuid
            if record.op == .delete {
                if let id = where_.removeValue(forKey: sampleKey), buckets[id]?.samples.removeValue(forKey: sampleKey) != nil {
                    total -= 1
                    mark(id)
                }
                emit(record)
                return
            }
            guard spec.types.contains(where: { $0.matches(record.type) }), record.kind == "quantity",
                let v = record.value?.number, let t = record.start ?? record.end
            else {
                emit(record)
                return
            }
            if spec.keepSource { emit(copy record) }
            let offset = record.utcOffset ?? spec.timeZone.flatMap { timeZones.utcOffset(zone: $0, at: t.seconds) } ?? 0
            let local = t.seconds + Int64(offset)
            let localStart = local >= 0 ? local / spec.every * spec.every : (local - spec.every + 1) / spec.every * spec.every
            let start = localStart - Int64(offset)
            if start < closedBefore {
                if !saidClosed {
                    saidClosed = true
                    logger.warning(
                        "aggregate: samples for buckets closed to stay within max_samples are not counted "
                            + "(raise max_samples to count older history)")
                }
                return
            }
            let id = "\(record.device)\u{1}\(record.type)\u{1}\(start)"
            // A resent sample moving to another bucket (its time corrected) leaves the old one.
            if let old = where_[sampleKey], old != id, buckets[old]?.samples.removeValue(forKey: sampleKey) != nil {
                total -= 1
                mark(old)
            }
            var b =
                buckets[id]
                ?? Bucket(
                    device: record.device, receiver: record.receiver, type: record.type, start: start,
                    offset: offset, unit: record.unit)
            let s = Sample(value: v, time: t.seconds)
            if b.samples[sampleKey] == s { return }
            if b.samples.updateValue(s, forKey: sampleKey) == nil { total += 1 }
            b.unit = record.unit ?? b.unit
            buckets[id] = b
            where_[sampleKey] = id
            mark(id)
            if total > spec.maxSamples { closeOldest() }
        }

        func mark(_ id: String) {
            if changedSet.insert(id).inserted { changed.append(id) }
        }

        func closeOldest() {
            let keep = spec.maxSamples * 9 / 10
            for (id, b) in buckets.sorted(by: { $0.value.start < $1.value.start }) {
                guard total > keep else { break }
                total -= b.samples.count
                for k in b.samples.keys { where_[k] = nil }
                buckets[id] = nil
                closedBefore = max(closedBefore, b.start + spec.every)
            }
        }

        func flush(emit: (consuming Record) -> Void) {
            for id in changed {
                guard let b = buckets[id] else { continue }
                let uuid =
                    "aggregate:\(spec.how.rawValue):\(spec.everyName):\(b.type):"
                    + String(Timestamp(seconds: b.start + Int64(b.offset)).rfc3339().dropLast())
                if b.samples.isEmpty {
                    buckets[id] = nil
                    emit(
                        Record(
                            CanonicalRecord(op: .delete, kind: "quantity", device: b.device, receiver: b.receiver, uuid: uuid, type: b.type)
                        ))
                    continue
                }
                let values = b.samples.values
                let figure: Double
                switch spec.how {
                case .sum: figure = values.reduce(0) { $0 + $1.value }
                case .mean: figure = values.reduce(0) { $0 + $1.value } / Double(values.count)
                case .min: figure = values.map(\.value).min()!
                case .max: figure = values.map(\.value).max()!
                case .count: figure = Double(values.count)
                case .last: figure = values.max { ($0.time, $0.value) < ($1.time, $1.value) }!.value
                }
                var r = CanonicalRecord(
                    kind: "quantity", device: b.device, receiver: b.receiver, uuid: uuid, type: b.type,
                    start: Timestamp(seconds: b.start), end: Timestamp(seconds: b.start + spec.every - 1),
                    utcOffset: b.offset, value: .number(figure), unit: spec.how == .count ? "count" : b.unit)
                r.tags = [RecordTag("aggregate", spec.how.rawValue), RecordTag("interval", spec.everyName)]
                r.fields = [RecordField("samples", .integer(Int64(values.count)))]
                emit(Record(r))
            }
            changed.removeAll()
            changedSet.removeAll()
        }

        /// `StateWriter` fields: the closed-before time, then per bucket: device, receiver, type,
        /// start, offset, unit (or -), n, and n × (sample key, value, time).
        func saveState() -> [UInt8]? {
            var w = StateWriter()
            w.put(closedBefore)
            for (_, b) in buckets.sorted(by: { $0.key < $1.key }) {
                w.put(b.device); w.put(b.receiver); w.put(b.type); w.put(b.start); w.put(b.offset)
                w.put(b.unit.map { "u" + $0 } ?? "-"); w.put(b.samples.count)
                for (k, s) in b.samples.sorted(by: { $0.key < $1.key }) { w.put(k); w.put(s.value); w.put(s.time) }
            }
            return w.bytes
        }

        func restoreState(_ bytes: [UInt8]) throws(TransformStateError) {
            var r = StateReader(bytes)
            var restored: [String: Bucket] = [:], index: [String: String] = [:], count = 0
            let closed = try r.int()
            while !r.atEnd {
                let device = try r.take(), receiver = try r.take(), type = try r.take()
                let start = try r.int(), offset = Int(try r.int()), unit = try r.take(), n = try r.int()
                var b = Bucket(
                    device: device, receiver: receiver, type: type, start: start, offset: offset,
                    unit: unit == "-" ? nil : String(unit.dropFirst()))
                for _ in 0..<max(0, n) {
                    let k = try r.take(), v = try r.double(), t = try r.int()
                    b.samples[k] = Sample(value: v, time: t)
                }
                let id = "\(device)\u{1}\(type)\u{1}\(start)"
                for k in b.samples.keys { index[k] = id }
                count += b.samples.count
                restored[id] = b
            }
            buckets = restored
            where_ = index
            total = count
            closedBefore = closed
        }
    }

    public static func build(_ node: YAMLNode, _ path: String) throws(ConfigProblems) -> any TransformSpec {
        let c = try YAMLDecoder().decode(AggregateTransformConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        if c.types.isEmpty { problems.add("types", "aggregate needs the types it adds up, e.g. [steps]") }
        for t in c.types { if let why = HealthTypes.configProblem(t, nearest: closestMatch) { problems.add("types", why) } }
        for t in c.types where !t.contains("*") && !t.contains("?") {
            if let known = HealthTypes.named(t), known.kind != .quantity {
                problems.add("types", "\(t) is a category: its values are names, not numbers to aggregate")
            }
        }
        var seconds: Int64 = 3600
        var name = c.every ?? "1h"
        if name == "day" || name == "1d" || name == "24h" {
            seconds = 86_400
            name = "day"
        } else if let d = try? ConfigDuration(parsing: name), d.seconds >= 60, d.seconds == d.seconds.rounded(),
            86_400 % Int64(d.seconds) == 0, Int64(d.seconds) % 60 == 0
        {
            seconds = Int64(d.seconds)
        } else {
            problems.add("every", "every is a duration of whole minutes that divides a day (1m, 5m, 15m, 1h, …) or day")
        }
        let how = How(rawValue: c.how ?? "sum")
        if how == nil { problems.add("how", "how is one of \(How.allCases.map(\.rawValue).joined(separator: ", "))") }
        if let tz = c.time_zone, let why = TimeZones.problem(tz) { problems.add("time_zone", why) }
        let maxSamples = c.max_samples ?? 200_000
        if !(100...20_000_000).contains(maxSamples) { problems.add("max_samples", "max_samples is 100 to 20,000,000") }
        try problems.check()
        return AggregateTransform(
            types: c.types.map(Glob.init), every: seconds, everyName: name, how: how!,
            keepSource: c.keep_source ?? true, timeZone: c.time_zone, maxSamples: maxSamples)
    }
}

public struct AggregateTransformConfig: Decodable, Sendable {
    public var types: [String]
    public var every: String?
    public var how: String?
    public var keep_source: Bool?
    public var time_zone: String?
    public var max_samples: Int?
}

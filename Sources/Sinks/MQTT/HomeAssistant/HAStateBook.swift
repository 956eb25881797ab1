import FastJSON
import HealthgateCore

/// One entity state to publish: the state text and its attributes (JSON values, already encoded).
public struct HAUpdate: Sendable, Equatable {
    public var device: String
    public var entity: HAEntity
    /// The state as HA reads it: a number in the entity's unit, a text (a workout's activity),
    /// or `None` when there is no sample (left: all were deleted).
    public var state: String
    public var attributes: [(String, RawJSON)]

    public static func == (a: HAUpdate, b: HAUpdate) -> Bool {
        a.device == b.device && a.entity == b.entity && a.state == b.state
            && a.attributes.elementsEqual(b.attributes) { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    public func attribute(_ name: String) -> RawJSON? { attributes.first { $0.0 == name }?.1 }
}

/// What the Home Assistant sink knows to compute its states, per phone and entity, and nothing
/// more (bounded): today's contribution of each sample key to a daily total (yesterday's go at
/// local midnight), the few newest samples of a discrete type (so a deletion of the newest falls
/// back), the latest two nights of sleep, the last few workouts. A resent sample replaces its
/// own contribution (counted once); a deletion removes it; a sample older than the state never
/// replaces it; a batch of 30 days of history ends in one update per entity.
///
/// Owned by the sink's drainer thread; `saveState` is committed with the sink's cursor.
public final class HAStateBook {
    struct Sample: Equatable {
        var key: String
        /// Unix seconds of the sample (its start; a workout's end).
        var time: Int64
        var end: Int64
        var offset: Int
        var value: Double
        var text: String
        var app: String
        var source: String
        /// Workouts: duration (s), energy (kcal), distance (m), average and maximum heart rate
        /// (bpm) as the workout itself gives them; -1 where unknown.
        var extra: [Double]
    }

    /// A daily total: the local day it counts, and each sample key's contribution.
    struct Total: Equatable {
        var day: Int64
        var byKey: [String: Sample]
    }

    struct Book: Equatable {
        var totals: [String: Total] = [:]
        /// Newest first, at most `keep`.
        var newest: [String: [Sample]] = [:]
        /// Sleep: night (local day of the evening) → samples by key.
        var nights: [Int64: [String: Sample]] = [:]
        /// The phone's last known UTC offset.
        var offset: Int?
        /// The receiver its records came in by, last (for a name per receiver).
        var receiver: String = ""
        /// Heart-rate samples (key → bpm) in the last workout's time window, for its heart rate
        /// when the workout does not carry one (at most `workoutHeartRates`).
        var workoutHR: [String: Double] = [:]
        /// The labels (`tag` transform) of the phone's latest record, shown on each of its states.
        var tags: [RecordTag] = []
    }

    static let keep = 8
    /// A night's sample that is the app's summary of it, not a segment.
    static let summaryText = "\u{1F}summary"
    static let workoutHeartRates = 4_000
    /// By entity type (`steps`, `workout.duration`).
    let entities: [String: HAEntity]
    /// By the record type they read: `workout` → the last workout, its figures and its event.
    let byRecordType: [String: [HAEntity]]
    let timeZone: String?
    let timeZones: any TimeZoneLookup
    /// When a sleep day begins, in seconds after local midnight (18:00: a night and the nap of
    /// the next afternoon are one sleep day, named by the evening's date).
    let sleepDayStart: Int64
    var books: [String: Book] = [:]
    /// Workouts that became a phone's last one in the batch being applied: device → key.
    private var newWorkouts: [String: String] = [:]

    public init(entities: [HAEntity], timeZone: String?, timeZones: any TimeZoneLookup, sleepDayStart: Int = 18 * 3600) {
        var byType: [String: HAEntity] = [:]
        var byRecordType: [String: [HAEntity]] = [:]
        for e in entities {
            byType[e.type] = e
            byRecordType[e.recordType, default: []].append(e)
        }
        self.entities = byType
        self.byRecordType = byRecordType
        self.timeZone = timeZone
        self.timeZones = timeZones
        self.sleepDayStart = Int64(sleepDayStart)
    }

    // MARK: applying records

    /// Applies a batch; returns one update per (phone, entity) it changed, in first-seen order.
    public func apply(_ records: [CanonicalRecord], now: Timestamp) -> [HAUpdate] {
        var touched: [(String, String)] = []
        var seen = Set<String>()
        func touch(_ device: String, _ recordType: String) {
            for e in byRecordType[recordType] ?? [] where e.reading != .workoutEvent {
                if seen.insert(device + "\u{1F}" + e.type).inserted { touched.append((device, e.type)) }
            }
        }
        for r in records {
            // A summary an `aggregate` transform made counts its samples again: the sensors are
            // made from samples alone (the summaries still go out on the records topic).
            guard let entity = byRecordType[r.type]?.first, !r.uuid.hasPrefix("aggregate:") else { continue }
            if apply(r, entity, now: now) { touch(r.device, r.type) }
        }
        // A workout's heart rate from the heart-rate samples in its window, whichever came first
        // in the batch (after the workouts, so that a workout and its samples may come together).
        if byRecordType["workout"] != nil {
            for r in records where r.type == "heart_rate" && books[r.device]?.newest["workout"] != nil {
                if workoutHeartRate(r) { touch(r.device, "workout") }
            }
        }
        return touched.compactMap { update(device: $0.0, type: $0.1, now: now) }
    }

    /// The workout events of what was applied since the last call: one per phone whose last
    /// workout is one never seen before (an `event` entity's `event_type` and attributes).
    public func takeWorkoutEvents(now: Timestamp) -> [HAUpdate] {
        defer { newWorkouts = [:] }
        guard let entity = entities["workout.event"] else { return [] }
        return newWorkouts.sorted { $0.key < $1.key }.compactMap { device, key in
            guard let book = books[device], let w = book.newest["workout"]?.first, w.key == key else { return nil }
            return HAUpdate(device: device, entity: entity, state: "workout", attributes: workoutAttributes(w, book))
        }
    }

    /// Local midnight: daily totals of a past day become 0 (and their contributions go).
    public func tick(now: Timestamp) -> [HAUpdate] {
        var out: [HAUpdate] = []
        for (device, book) in books.sorted(by: { $0.key < $1.key }) {
            let today = day(of: now.seconds, offset: offsetNow(book, now))
            for (type, total) in book.totals.sorted(by: { $0.key < $1.key }) where total.day < today {
                books[device]!.totals[type] = Total(day: today, byKey: [:])
                if let u = update(device: device, type: type, now: now) { out.append(u) }
            }
        }
        return out
    }

    /// True when the record changed what the entity shows (or may have).
    private func apply(_ r: CanonicalRecord, _ entity: HAEntity, now: Timestamp) -> Bool {
        var book = books[r.device] ?? Book()
        defer { books[r.device] = book }
        if let o = r.utcOffset { book.offset = o }
        book.receiver = r.receiver
        if r.op == .upsert && book.tags != r.tags { book.tags = r.tags }
        let key = r.uuid + (r.part.map { "#\($0)" } ?? "")
        if r.op == .delete {
            return remove(uuid: r.uuid, type: r.type, from: &book)
        }
        guard let start = r.start ?? r.end else { return false }
        let offset = r.utcOffset ?? timeZone.flatMap { timeZones.utcOffset(zone: $0, at: start.seconds) } ?? book.offset ?? 0
        var sample = Sample(
            key: key, time: start.seconds, end: (r.end ?? start).seconds, offset: offset, value: r.value?.number ?? 0,
            text: r.value?.string ?? "", app: r.source?.app ?? "", source: r.source?.device ?? "", extra: [])
        switch entity.reading {
        case .todayTotal:
            guard r.value?.number != nil else { return false }
            let today = day(of: now.seconds, offset: offsetNow(book, now))
            var total = book.totals[r.type] ?? Total(day: today, byKey: [:])
            if total.day != today { total = Total(day: today, byKey: [:]) }
            // Only today's samples count today; an older one is history, not a change.
            guard day(of: sample.time, offset: offset) == today else {
                book.totals[r.type] = total
                return false
            }
            if total.byKey[key] == sample { return false }
            total.byKey[key] = sample
            book.totals[r.type] = total
            return true
        case .newest, .lastWorkout, .workoutFigure, .workoutEvent:
            let isWorkout = entity.recordType == "workout"
            if isWorkout {
                // A workout is ordered by its end; its activity is the state.
                sample.time = sample.end
                sample.text = r.activity ?? r.value?.string ?? "workout"
                let hr = HAStateBook.ownHeartRate(r)
                sample.extra = [
                    r.durationS ?? Double(sample.end - start.seconds), r.energyKcal ?? -1, r.distanceM ?? -1,
                    hr.average ?? -1, hr.maximum ?? -1
                ]
            } else if r.value?.number == nil {
                return false
            } else {
                // A value measured over a while (a minute's heart rate as Min/Avg/Max): its own
                // least and greatest, for the state's attributes.
                let own = ["min", "max"].map { k in r.extra.first { $0.name == k }?.value.number }
                if let lo = own[0], let hi = own[1] { sample.extra = [lo, hi] }
            }
            var list = book.newest[r.type] ?? []
            let before = list.first
            let known = list.contains { $0.key == key }
            list.removeAll { $0.key == key }
            let at = list.firstIndex { $0.time < sample.time } ?? list.count
            guard at < HAStateBook.keep else { return false } // far older than what is kept
            list.insert(sample, at: at)
            if list.count > HAStateBook.keep { list.removeLast() }
            book.newest[r.type] = list
            if isWorkout && list.first?.key != before?.key {
                // A workout never seen before became the last one: its event fires (once per
                // batch and phone, for the last of them: a backfill is one event, not thirty).
                if list.first?.key == key && !known {
                    newWorkouts[r.device] = key
                }
                // A new last workout: its window takes the heart rates already known in it.
                book.workoutHR = [:]
                if let w = list.first, let hr = book.newest["heart_rate"] {
                    for s in hr where s.time >= w.end - Int64(w.extra[0]) && s.time <= w.end { book.workoutHR[s.key] = s.value }
                }
            }
            return list.first != before
        case .lastNight:
            // An app's summary of the night carries its figures (minutes): asleep, in bed, awake,
            // core, deep, REM (-1 where not sent).
            if let s = SleepSummary(r) {
                sample.text = HAStateBook.summaryText
                sample.extra = [s.asleep, s.inBed, s.awake, s.core, s.deep, s.rem].map { $0 ?? -1 }
            } else if r.kind != RecordKind.category {
                return false
            }
            // A night is the sleep day (from `sleepDayStart` to the next day's) a segment's start
            // falls in, or a summary's end (its start may be made up: an app that gives the night's
            // date alone), named by the local date of its evening.
            let night = day(of: (sample.text == HAStateBook.summaryText ? sample.end : sample.time) - sleepDayStart, offset: offset)
            var samples = book.nights[night] ?? [:]
            if samples[key] == sample { return false }
            samples[key] = sample
            book.nights[night] = samples
            // Keep the latest two nights.
            for old in book.nights.keys.sorted().dropLast(2) { book.nights[old] = nil }
            return night == book.nights.keys.max()
        }
    }

    private func remove(uuid: String, type: String, from book: inout Book) -> Bool {
        func matches(_ key: String) -> Bool { key == uuid || key.hasPrefix(uuid + "#") }
        var changed = false
        if var total = book.totals[type], total.byKey.keys.contains(where: matches) {
            for k in total.byKey.keys where matches(k) { total.byKey[k] = nil }
            book.totals[type] = total
            changed = true
        }
        if var list = book.newest[type], list.contains(where: { matches($0.key) }) {
            list.removeAll { matches($0.key) }
            book.newest[type] = list
            changed = true
        }
        for (night, samples) in book.nights where samples.keys.contains(where: matches) {
            book.nights[night] = samples.filter { !matches($0.key) }
            changed = true
        }
        return changed
    }

    // MARK: states

    func update(device: String, type: String, now: Timestamp) -> HAUpdate? {
        guard let entity = entities[type], let book = books[device] else { return nil }
        var attributes: [(String, RawJSON)] = []
        var state = "None"
        switch entity.reading {
        case .todayTotal:
            let today = day(of: now.seconds, offset: offsetNow(book, now))
            let total = book.totals[type].flatMap { $0.day == today ? $0 : nil }
            let samples = total.map { Array($0.byKey.values) } ?? []
            state = format(entity.display(samples.reduce(0) { $0 + $1.value }), entity.precision)
            let offset = offsetNow(book, now)
            attributes.append(("last_reset", .string(HAStateBook.rfc3339(today * 86_400 - Int64(offset), offset: offset))))
            if let newest = samples.max(by: { $0.time < $1.time }) {
                attributes += HAStateBook.provenance(newest)
            }
            attributes.append(("samples", .integer(Int64(samples.count))))
        case .newest:
            if let s = book.newest[type]?.first {
                state = format(entity.display(s.value), entity.precision)
                attributes += HAStateBook.provenance(s)
                if s.extra.count == 2 {
                    attributes.append(("min", .number(Double(format(entity.display(s.extra[0]), entity.precision)) ?? s.extra[0])))
                    attributes.append(("max", .number(Double(format(entity.display(s.extra[1]), entity.precision)) ?? s.extra[1])))
                }
            }
        case .lastWorkout:
            if let s = book.newest[type]?.first {
                state = s.text
                attributes += workoutAttributes(s, book)
            }
        case .workoutFigure:
            if let s = book.newest["workout"]?.first, let v = workoutFigures(s, book)[String(type.dropFirst("workout.".count))] {
                state = format(v, entity.precision)
                attributes += HAStateBook.provenance(s, start: s.end - Int64(s.extra[0]))
                attributes.append(("activity", .string(s.text)))
            }
        case .workoutEvent:
            return nil // fired, not kept (`takeWorkoutEvents`)
        case .lastNight:
            // The app's summary of the night wins over its segments (as in the postgres sink's
            // sleep_nights view); the newest summary, if it sent several.
            if let night = book.nights.keys.max(), let samples = book.nights[night],
                let s = samples.values.filter({ $0.text == HAStateBook.summaryText }).max(by: { ($0.end, $0.key) < ($1.end, $1.key) })
            {
                if s.extra[0] >= 0 { state = format(s.extra[0] / 60, entity.precision) }
                attributes.append(("measured_at", .string(HAStateBook.rfc3339(s.end, offset: s.offset))))
                attributes.append(("bedtime", .string(HAStateBook.rfc3339(s.time, offset: s.offset))))
                attributes.append(("wake_time", .string(HAStateBook.rfc3339(s.end, offset: s.offset))))
                for (i, stage) in ["in_bed", "awake", "asleep_core", "asleep_deep", "asleep_rem"].enumerated() where s.extra[i + 1] >= 0 {
                    attributes.append(("\(stage)_min", .number(s.extra[i + 1].rounded())))
                }
                attributes.append(("made_from", .string("summary")))
                if !s.app.isEmpty { attributes.append(("source_app", .string(s.app))) }
            } else if let night = book.nights.keys.max(), let samples = book.nights[night], !samples.isEmpty {
                let n = HAStateBook.night(Array(samples.values))
                state = format(n.minutes["asleep"]! / 60, entity.precision)
                attributes.append(("measured_at", .string(HAStateBook.rfc3339(n.wake, offset: n.offset))))
                attributes.append(("bedtime", .string(HAStateBook.rfc3339(n.bedtime, offset: n.offset))))
                attributes.append(("wake_time", .string(HAStateBook.rfc3339(n.wake, offset: n.offset))))
                for stage in ["in_bed", "awake", "asleep_core", "asleep_deep", "asleep_rem", "asleep_unspecified"] {
                    if let m = n.minutes[stage] { attributes.append(("\(stage)_min", .number(m.rounded()))) }
                }
                if !n.sources.isEmpty { attributes.append(("sources", .string(n.sources.joined(separator: ", ")))) }
            }
        }
        for t in book.tags where !attributes.contains(where: { $0.0 == t.name }) { attributes.append((t.name, .string(t.value))) }
        return HAUpdate(device: device, entity: entity, state: state, attributes: attributes)
    }

    static let asleepStages = ["asleep_unspecified", "asleep_core", "asleep_deep", "asleep_rem"]

    /// A night from the segments of every source (a watch and a phone, two apps), each moment
    /// counted once: asleep is the time any source says asleep; each stage the time any says
    /// that stage; unspecified sleep only where no source gives a stage, awake only where none
    /// says asleep; in bed the time any says in bed. Minutes; bedtime is the first segment's
    /// start, wake time the last sleep's end.
    static func night(_ segments: [Sample]) -> (minutes: [String: Double], bedtime: Int64, wake: Int64, offset: Int, sources: [String]) {
        typealias Span = (from: Int64, to: Int64)
        func union(_ spans: [Span]) -> [Span] {
            var out: [Span] = []
            for s in spans.filter({ $0.to > $0.from }).sorted(by: { $0.from < $1.from }) {
                if let last = out.last, s.from <= last.to { out[out.count - 1].to = max(last.to, s.to) } else { out.append(s) }
            }
            return out
        }
        func length(_ spans: [Span]) -> Double { Double(union(spans).reduce(0) { $0 + $1.to - $1.from }) / 60 }
        func spans(_ stages: [String]) -> [Span] { segments.filter { stages.contains($0.text) }.map { ($0.time, $0.end) } }
        let asleep = spans(asleepStages), staged = spans(["asleep_core", "asleep_deep", "asleep_rem"])
        var minutes: [String: Double] = ["asleep": length(asleep)]
        for stage in ["asleep_core", "asleep_deep", "asleep_rem", "in_bed"] where segments.contains(where: { $0.text == stage }) {
            minutes[stage] = length(spans([stage]))
        }
        if segments.contains(where: { $0.text == "asleep_unspecified" }) {
            minutes["asleep_unspecified"] = length(spans(["asleep_unspecified"]) + staged) - length(staged)
        }
        if segments.contains(where: { $0.text == "awake" }) { minutes["awake"] = length(spans(["awake"]) + asleep) - length(asleep) }
        let first = segments.min { ($0.time, $0.key) < ($1.time, $1.key) }!
        let sleeping = segments.filter { asleepStages.contains($0.text) }
        let last = (sleeping.isEmpty ? segments : sleeping).max { ($0.end, $0.key) < ($1.end, $1.key) }!
        let sources = Set(segments.map { $0.source.isEmpty ? $0.app : $0.source }.filter { !$0.isEmpty }).sorted()
        return (minutes, first.time, last.end, last.offset, sources)
    }

    /// A workout's figures in the units its sensors show: `duration` (min), `energy` (kcal),
    /// `distance` (km), `heart_rate` and `heart_rate_max` (bpm); those it has.
    func workoutFigures(_ s: Sample, _ book: Book) -> [String: Double] {
        var out: [String: Double] = ["duration": (s.extra[0] / 60 * 10).rounded() / 10]
        if s.extra[1] >= 0 { out["energy"] = s.extra[1].rounded() }
        if s.extra[2] >= 0 { out["distance"] = (s.extra[2] / 10).rounded() / 100 }
        let own = s.extra.count >= 5 && s.extra[3] >= 0
        let seen = book.workoutHR.values
        if own || !seen.isEmpty {
            out["heart_rate"] = (own ? s.extra[3] : seen.reduce(0, +) / Double(seen.count)).rounded()
            if let m = own ? (s.extra[4] >= 0 ? s.extra[4] : nil) : seen.max() { out["heart_rate_max"] = m.rounded() }
        }
        return out
    }

    /// The last workout sensor's attributes, and the workout event's.
    func workoutAttributes(_ s: Sample, _ book: Book) -> [(String, RawJSON)] {
        var out = HAStateBook.provenance(s, start: s.end - Int64(s.extra[0]))
        let figures = workoutFigures(s, book)
        out.append(("activity", .string(s.text)))
        out.append(("started_at", .string(HAStateBook.rfc3339(s.end - Int64(s.extra[0]), offset: s.offset))))
        out.append(("ended_at", .string(HAStateBook.rfc3339(s.end, offset: s.offset))))
        for (name, key) in [
            ("duration_min", "duration"), ("energy_kcal", "energy"), ("distance_km", "distance"), ("heart_rate_avg", "heart_rate"),
            ("heart_rate_max", "heart_rate_max")
        ] {
            if let v = figures[key] { out.append((name, .number(v))) }
        }
        return out
    }

    /// Counts a heart-rate sample towards the phone's last workout when it falls in its window
    /// and the workout does not give its own heart rate; true when the workout's state changed.
    private func workoutHeartRate(_ r: CanonicalRecord) -> Bool {
        guard var book = books[r.device], let w = book.newest["workout"]?.first, w.extra.count < 5 || w.extra[3] < 0 else { return false }
        if r.op == .delete {
            let before = book.workoutHR.count
            book.workoutHR = book.workoutHR.filter { $0.key != r.uuid && !$0.key.hasPrefix(r.uuid + "#") }
            books[r.device] = book
            return book.workoutHR.count != before
        }
        let key = r.uuid + (r.part.map { "#\($0)" } ?? "")
        guard let t = (r.start ?? r.end)?.seconds, t >= w.end - Int64(w.extra[0]), t <= w.end,
            let bpm = r.value?.number, book.workoutHR[key] != bpm,
            book.workoutHR[key] != nil || book.workoutHR.count < HAStateBook.workoutHeartRates
        else { return false }
        book.workoutHR[key] = bpm
        books[r.device] = book
        return true
    }

    /// The heart rate a workout record carries itself: Health Auto Export's `avgHeartRate` and
    /// `maxHeartRate` (`{qty, units}`) or `heartRate: {avg, max}`, HealthSync's
    /// `metadata.average_heart_rate_bpm` and `max_heart_rate_bpm`.
    static func ownHeartRate(_ r: CanonicalRecord) -> (average: Double?, maximum: Double?) {
        let parser = JSONParser()
        func read(_ raw: RawJSON?, _ path: [String]) -> Double? {
            guard let raw, let doc = try? parser.parse(raw.bytes) else { return nil }
            var v: JSONRef? = doc.root
            for k in path { v = v?[k] }
            // HealthSync's metadata holds its numbers as text ("142").
            return v?.double ?? v?.string.flatMap { Double($0) }
        }
        func field(_ name: String) -> RawJSON? { r.fields.first { $0.name == name }?.value }
        func bpm(_ v: Double?) -> Double? { v.flatMap { $0.isFinite && $0 > 0 && $0 < 400 ? $0 : nil } }
        // Health Auto Export's minutes of heart rate in the workout ({Min, Avg, Max} each).
        var minutes: (average: Double?, maximum: Double?) = (nil, nil)
        if let raw = field("heartRateData"), let doc = try? parser.parse(raw.bytes), doc.root.kind == .array {
            let avgs = doc.root.elements.compactMap { bpm($0["Avg"]?.double) }
            minutes = (
                avgs.isEmpty ? nil : avgs.reduce(0, +) / Double(avgs.count),
                doc.root.elements.compactMap { bpm($0["Max"]?.double) }.max()
            )
        }
        let average =
            bpm(read(field("avgHeartRate"), ["qty"])) ?? bpm(read(field("heartRate"), ["avg", "qty"]))
            ?? bpm(read(r.metadata, ["average_heart_rate_bpm"])) ?? minutes.average
        let maximum =
            bpm(read(field("maxHeartRate"), ["qty"])) ?? bpm(read(field("heartRate"), ["max", "qty"]))
            ?? bpm(read(r.metadata, ["max_heart_rate_bpm"])) ?? minutes.maximum
        return (average, maximum)
    }

    /// The receiver a phone's records last came in by.
    public func receiver(of device: String) -> String? { books[device]?.receiver }

    /// Every entity state as it stands (after a restart, or when HA comes back).
    public func all(now: Timestamp) -> [HAUpdate] {
        var out: [HAUpdate] = []
        for (device, book) in books.sorted(by: { $0.key < $1.key }) {
            let recordTypes = Set(book.totals.keys).union(book.newest.keys)
                .union(book.nights.isEmpty ? [] : ["sleep_analysis"])
            for type in recordTypes.flatMap({ (byRecordType[$0] ?? []).map(\.type) }).sorted() {
                if let u = update(device: device, type: type, now: now) { out.append(u) }
            }
        }
        return out
    }

    /// When and by what the sample was taken: `measured_at` (its start, as before), `start` and
    /// `end` (a workout's: the whole workout), the app and the device that recorded it.
    static func provenance(_ s: Sample, start: Int64? = nil) -> [(String, RawJSON)] {
        var out: [(String, RawJSON)] = [("measured_at", .string(rfc3339(s.time, offset: s.offset)))]
        out.append(("start", .string(rfc3339(start ?? s.time, offset: s.offset))))
        out.append(("end", .string(rfc3339(s.end, offset: s.offset))))
        if !s.app.isEmpty { out.append(("source_app", .string(s.app))) }
        if !s.source.isEmpty { out.append(("source_device", .string(s.source))) }
        return out
    }

    /// The phone's UTC offset now: the one its records carried last (the phone knows where it
    /// is), else the sink's `time_zone`, else UTC.
    func offsetNow(_ book: Book, _ now: Timestamp) -> Int {
        book.offset ?? timeZone.flatMap { timeZones.utcOffset(zone: $0, at: now.seconds) } ?? 0
    }

    func day(of seconds: Int64, offset: Int) -> Int64 {
        let local = seconds + Int64(offset)
        return local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
    }

    func format(_ v: Double, _ precision: Int?) -> String {
        let p = precision ?? 2
        var scale = 1.0
        for _ in 0..<p { scale *= 10 }
        let r = (v * scale).rounded() / scale
        if p == 0 || r == r.rounded() { return String(Int64(r)) }
        return String(r)
    }

    /// `2026-12-01T07:30:00+01:00`: the time as the phone saw it.
    static func rfc3339(_ seconds: Int64, offset: Int) -> String {
        String(Timestamp(seconds: seconds + Int64(offset)).rfc3339().dropLast()) + Timestamp.formatOffset(offset) // drops the Z
    }
}

// MARK: state, committed with the sink's cursor

extension HAStateBook {
    /// In `StateWriter` fields: a book is `B device offset receiver`, then `T type day n` (a daily
    /// total), `N type n` (newest samples), `S night n` (a night), each followed by its n samples
    /// of 9 + extras fields.
    public func saveState(of devices: DeviceScope = .all) -> [UInt8] {
        var w = StateWriter()
        func put(_ s: Sample) {
            w.put(s.key); w.put(s.time); w.put(s.end); w.put(s.offset); w.put(s.value)
            w.put(s.text); w.put(s.app); w.put(s.source); w.put(s.extra.count)
            for x in s.extra { w.put(x) }
        }
        for (device, book) in books.sorted(by: { $0.key < $1.key }) where devices.contains(device) {
            w.put("B"); w.put(device); w.put(book.offset.map(String.init) ?? "-"); w.put(book.receiver)
            for (type, t) in book.totals.sorted(by: { $0.key < $1.key }) {
                w.put("T"); w.put(type); w.put(t.day); w.put(t.byKey.count)
                for s in t.byKey.values.sorted(by: { $0.key < $1.key }) { put(s) }
            }
            for (type, list) in book.newest.sorted(by: { $0.key < $1.key }) {
                w.put("N"); w.put(type); w.put(list.count)
                for s in list { put(s) }
            }
            for (night, samples) in book.nights.sorted(by: { $0.key < $1.key }) {
                w.put("S"); w.put(night); w.put(samples.count)
                for s in samples.values.sorted(by: { $0.key < $1.key }) { put(s) }
            }
            if !book.tags.isEmpty {
                w.put("G"); w.put(book.tags.count)
                for t in book.tags { w.put(t.name); w.put(t.value) }
            }
            if !book.workoutHR.isEmpty {
                w.put("H"); w.put(book.workoutHR.count)
                for (k, v) in book.workoutHR.sorted(by: { $0.key < $1.key }) { w.put(k); w.put(v) }
            }
        }
        return w.bytes
    }

    /// Replaces the books of the devices in `devices` with those in `bytes`.
    public func restoreState(_ bytes: [UInt8], of devices: DeviceScope = .all) throws(TransformStateError) {
        var r = StateReader(bytes)
        func sample() throws(TransformStateError) -> Sample {
            let key = try r.take(), time = try r.int(), end = try r.int(), offset = try r.int(), value = try r.double()
            let text = try r.take(), app = try r.take(), source = try r.take()
            let n = try r.int()
            var extra: [Double] = []
            for _ in 0..<max(0, n) { extra.append(try r.double()) }
            return Sample(
                key: key, time: time, end: end, offset: Int(offset), value: value, text: text, app: app, source: source,
                extra: extra)
        }
        var restored: [String: Book] = [:]
        var device = ""
        while !r.atEnd {
            switch try r.take() {
            case "B":
                device = try r.take()
                let o = try r.take()
                guard o == "-" || Int(o) != nil else { throw TransformStateError("not an offset: \(o)") }
                restored[device] = Book(offset: Int(o), receiver: try r.take())
            case "T":
                let type = try r.take(), day = try r.int(), n = try r.int()
                var t = Total(day: day, byKey: [:])
                for _ in 0..<max(0, n) { let s = try sample(); t.byKey[s.key] = s }
                restored[device]?.totals[type] = t
            case "N":
                let type = try r.take(), n = try r.int()
                var list: [Sample] = []
                for _ in 0..<max(0, n) { list.append(try sample()) }
                restored[device]?.newest[type] = list
            case "S":
                let night = try r.int(), n = try r.int()
                var samples: [String: Sample] = [:]
                for _ in 0..<max(0, n) { let s = try sample(); samples[s.key] = s }
                restored[device]?.nights[night] = samples
            case "G":
                let n = try r.int()
                var tags: [RecordTag] = []
                for _ in 0..<max(0, n) { let k = try r.take(); tags.append(RecordTag(k, try r.take())) }
                restored[device]?.tags = tags
            case "H":
                let n = try r.int()
                var hr: [String: Double] = [:]
                for _ in 0..<max(0, n) { let k = try r.take(); hr[k] = try r.double() }
                restored[device]?.workoutHR = hr
            case let other:
                throw TransformStateError("unknown section \(other)")
            }
        }
        books = books.filter { !devices.contains($0.key) }.merging(restored) { $1 }
    }
}

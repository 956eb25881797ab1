import HealthgateCore

/// A configured route: the receivers it takes from, its transforms in order, its sinks.
public struct Route: Sendable {
    public var name: String
    public var from: [Glob]
    public var transforms: [any TransformSpec]
    public var to: [String]

    public init(name: String, from: [Glob], transforms: [any TransformSpec], to: [String]) {
        self.name = name
        self.from = from
        self.transforms = transforms
        self.to = to
    }

    public func takes(receiver: String) -> Bool { from.contains { $0.matches(receiver) } }

    /// The fields records may differ in when they come out of this route; empty when they come
    /// out exactly as they went in (or not at all).
    public var changes: CanonicalRecord.Fields { transforms.reduce([]) { $0.union($1.changes) } }
}

/// What the routes made of some journal records: the records for the sink, in order, and
/// each one's journal line when it is unchanged. Lines only (`records` empty): every line whole,
/// for a sink that reads no field of them behind a route that passes them as they are (see
/// `Pending`'s lines only) — no record is made, moved or destroyed per line.
public struct RoutedRecords {
    public var records: [CanonicalRecord] = []
    public var lines: [RecordLine] = []

    public init() {}

    /// Records whose lines are not known (each written from its record).
    public init(records: [CanonicalRecord]) {
        self.records = records
        lines = Array(repeating: .none, count: records.count)
    }

    public var count: Int { lines.count }
    public var isEmpty: Bool { lines.isEmpty }
    /// Lines with no records beside them.
    var linesOnly: Bool { records.isEmpty && !lines.isEmpty }

    /// Appends a journal line alone (lines only).
    mutating func append(line: RecordLine) {
        precondition(records.isEmpty, "a line alone among records")
        lines.append(line)
    }

    public mutating func append(_ r: consuming CanonicalRecord, line: RecordLine) {
        records.append(consume r)
        lines.append(line)
    }

    /// The records (and lines) in `range`, moved out; placeholders left in their places.
    mutating func take(_ range: Range<Int>) -> RoutedRecords {
        var out = RoutedRecords()
        if !records.isEmpty { out.records = RoutedRecords.move(range, of: &records, leaving: CanonicalRecord.empty) }
        out.lines = RoutedRecords.move(range, of: &lines, leaving: .none)
        return out
    }

    private static func move<T>(_ range: Range<Int>, of all: inout [T], leaving placeholder: T) -> [T] {
        precondition(range.upperBound <= all.count)
        guard !range.isEmpty else { return [] }
        return all.withUnsafeMutableBufferPointer { buffer in
            let from = buffer.baseAddress! + range.lowerBound
            return Array(unsafeUninitializedCapacity: range.count) { out, count in
                out.baseAddress!.moveInitialize(from: from, count: range.count)
                from.initialize(repeating: placeholder, count: range.count)
                count = range.count
            }
        }
    }

    mutating func removeFirst(_ n: Int) {
        if !records.isEmpty { records.removeFirst(n) }
        lines.removeFirst(n)
    }

    /// Record `i`; lines only, an empty one (the line holds the record).
    func record(_ i: Int) -> CanonicalRecord { records.isEmpty ? .empty : records[i] }

    /// The records (and lines) at `indices`, in that order, copied.
    func selecting(_ indices: [Int]) -> RoutedRecords {
        var out = RoutedRecords()
        if !records.isEmpty { out.records = indices.map { records[$0] } }
        out.lines = indices.map { lines[$0] }
        return out
    }

    /// The records (and lines) in `range`, copied (all of them: this one).
    func subrange(_ range: Range<Int>) -> RoutedRecords {
        if range == 0..<count { return self }
        var out = RoutedRecords()
        if !records.isEmpty { out.records = Array(records[range]) }
        out.lines = Array(lines[range])
        return out
    }

    /// Appends `other`'s records after these, moved (not copied), leaving `other` empty.
    mutating func appendMoving(_ other: inout RoutedRecords) {
        precondition(linesOnly == other.linesOnly || isEmpty || other.isEmpty, "lines alone joined with records")
        RoutedRecords.appendMoving(&other.records, to: &records, leaving: CanonicalRecord.empty)
        RoutedRecords.appendMoving(&other.lines, to: &lines, leaving: .none)
    }

    private static func appendMoving<T>(_ from: inout [T], to all: inout [T], leaving placeholder: T) {
        let n = from.count
        guard n > 0 else { return }
        let m = all.count
        if m < n {
            // Fewer here than come: these are moved in front of the others, which are shifted
            // bitwise (no placeholder for them), and the others' array becomes this one.
            all.withUnsafeMutableBufferPointer { buffer in
                let base = buffer.baseAddress!
                from.insert(contentsOf: (0..<m).lazy.map { (base + $0).move() }, at: 0)
                base.initialize(repeating: placeholder, count: m)
            }
            swap(&all, &from)
            from.removeAll()
            return
        }
        all.reserve(atLeast: all.count + n)
        from.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            all.append(contentsOf: (0..<n).lazy.map { (base + $0).move() })
            base.initialize(repeating: placeholder, count: n)
        }
        from.removeAll()
    }
}

/// The routes that lead to one sink, each with this sink's own transform instances: they
/// live on the sink's drainer thread, and their state is committed with its cursor.
public final class SinkRoutes {
    final class Lane {
        let route: Route
        let transforms: [any Transform]
        /// State keys, one per transform: `<route name>/<index>/<kind>`.
        let keys: [String]
        /// The fields the route's transforms may change, and each one's.
        let changes: CanonicalRecord.Fields
        let declared: [CanonicalRecord.Fields]
        /// Every transform maps one record to at most one, in place.
        let maps: Bool
        /// The route's `from`, and whether it takes every receiver: asked once per record,
        /// without copying the route (which retains its arrays) to ask it.
        let from: [Glob]
        let takesAll: Bool

        init(route: Route, transforms: [any Transform], keys: [String], changes: CanonicalRecord.Fields, maps: Bool) {
            self.route = route
            self.transforms = transforms
            self.keys = keys
            self.changes = changes
            declared = route.transforms.map(\.changes)
            self.maps = maps
            from = route.from
            takesAll = route.from.contains(where: \.matchesAll)
        }

        @inline(__always) func takes(receiver: String) -> Bool {
            takesAll || from.contains { $0.matches(receiver) }
        }
    }

    let lanes: [Lane]
    /// One route, with no transforms, from every receiver: records come out as they went in.
    let passesAsIs: Bool

    public init(routes: [Route], sink: String, clock: any Clock, timeZones: any TimeZoneLookup, logger: Logger) {
        passesAsIs = routes.count == 1 && routes[0].transforms.isEmpty && routes[0].from.contains(where: \.matchesAll)
        lanes = routes.map { route in
            let context = TransformContext(route: route.name, sink: sink, clock: clock, timeZones: timeZones,
                                           logger: logger.child("route \(route.name)"))
            let transforms = route.transforms.map { $0.instantiate(context) }
            return Lane(route: route, transforms: transforms,
                        keys: route.transforms.enumerated().map { "\(route.name)/\($0.offset)/\($0.element.kind)" },
                        changes: route.changes, maps: transforms.allSatisfy(\.maps))
        }
    }

    /// The fields of the journal's records that `routes` and a sink reading `sinkReads` read:
    /// the sink's; `receiver` unless every route takes every receiver; what each transform
    /// reads (`TransformSpec.reads`); and every field a route may change (a sink writes those
    /// anew from the record, and copies the others from the journal's line: `RecordLine.patched`).
    /// A transform that emits records of its own reads all (its records have no line).
    public static func fieldsRead(routes: [Route], sinkReads: CanonicalRecord.Fields) -> CanonicalRecord.Fields {
        var fields = sinkReads
        if !routes.allSatisfy({ $0.from.contains(where: \.matchesAll) }) { fields.insert(.receiver) }
        for route in routes {
            for t in route.transforms { fields.formUnion(t.reads) }
            fields.formUnion(route.changes)
        }
        return fields
    }

    /// The fields some route may change in the records it passes on (a sink writes those anew
    /// in their lines: `RecordLine.patched`).
    public var changes: CanonicalRecord.Fields { lanes.reduce([]) { $0.union($1.changes) } }

    /// True when every route only maps records (or has no transforms): no state, nothing
    /// emitted later, so records can be routed ahead of the batch they go in.
    public var onlyMap: Bool { lanes.allSatisfy(\.maps) }

    /// Appends what every route that takes the record makes of it; false when none passes
    /// anything on (filtered out, or absorbed into a transform's state).
    public func process(_ r: consuming CanonicalRecord, line: RecordLine, into out: inout RoutedRecords) -> Bool {
        let before = out.count
        if lanes.count == 1 {
            // The one route has the record itself: no copy.
            process(consume r, line: line, lane: lanes[0], into: &out)
        } else {
            for lane in lanes { process(copy r, line: line, lane: lane, into: &out) }
        }
        return out.count > before
    }

    private func process(_ r: consuming CanonicalRecord, line: RecordLine, lane: Lane, into out: inout RoutedRecords) {
        guard lane.takes(receiver: r.receiver) else { return }
        if lane.transforms.isEmpty {
            out.append(consume r, line: line)
            return
        }
        if lane.maps {
            // What of the journal's line still holds once the transforms ran: all of it, or
            // all but the fields they say they changed.
            var x = consume r
            var changed = CanonicalRecord.Fields()
            for i in lane.transforms.indices {
                guard let c = lane.transforms[i].map(&x) else { return }
                changed.formUnion(c.intersection(lane.declared[i]))
            }
            out.append(consume x, line: line.changing(changed))
            return
        }
        // Transforms that may emit other records than the one they got: no line is theirs.
        let whole = lane.changes.rawValue == 0 ? line : RecordLine.none
        run(lane, r, from: 0) { out.append($0, line: whole) }
    }

    /// Lets every transform emit what the batch just processed changed (in route order), on
    /// through the transforms after it.
    public func flush(into out: inout RoutedRecords) {
        for lane in lanes where !lane.maps {
            for i in lane.transforms.indices {
                lane.transforms[i].flush { r in run(lane, r, from: i + 1) { out.append($0, line: .none) } }
            }
        }
    }

    /// Lets every transform emit what time alone decides.
    public func tick(now: Timestamp, into out: inout RoutedRecords) {
        for lane in lanes {
            for i in lane.transforms.indices {
                lane.transforms[i].tick(now: now) { r in run(lane, r, from: i + 1) { out.append($0, line: .none) } }
            }
        }
    }

    private func run(_ lane: Lane, _ r: CanonicalRecord, from i: Int, _ deliver: (CanonicalRecord) -> Void) {
        if i == lane.transforms.count {
            deliver(r)
            return
        }
        lane.transforms[i].process(r) { next in run(lane, next, from: i + 1, deliver) }
    }

    /// The state of every transform that keeps some, by key.
    func saveState() -> [(key: String, bytes: [UInt8])] {
        var out: [(key: String, bytes: [UInt8])] = []
        for lane in lanes {
            for (t, key) in zip(lane.transforms, lane.keys) {
                if let bytes = t.saveState() { out.append((key, bytes)) }
            }
        }
        return out
    }

    /// Gives each transform its committed state; says which could not take theirs.
    func restore(_ states: [String: [UInt8]], logger: Logger) {
        var used = Set<String>()
        for lane in lanes {
            for (t, key) in zip(lane.transforms, lane.keys) {
                guard let bytes = states[key] else { continue }
                used.insert(key)
                do {
                    try t.restoreState(bytes)
                } catch {
                    logger.error("transform \(key): its saved state cannot be read (\(error)); it starts empty")
                }
            }
        }
        for key in states.keys where !used.contains(key) && key.contains("/") {
            logger.warning("transform state \(key) belongs to no transform of this config (a route was renamed or "
                           + "changed); it is dropped at the next commit")
        }
    }
}

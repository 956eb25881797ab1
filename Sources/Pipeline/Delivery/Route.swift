import HealthgateCore
import Transforms
import CanonicalJSON

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
}

/// The routes that lead to one sink, each with this sink's own transform instances: they
/// live on the sink's drainer thread, and their state is committed with its cursor.
public final class SinkRoutes {
    final class Lane {
        let route: Route
        let transforms: [any Transform]
        /// State keys, one per transform: `<route name>/<index>/<kind>`.
        let keys: [String]
        /// The route's `from`, and whether it takes every receiver (asked once per record).
        let from: [Glob]
        let takesAll: Bool

        init(route: Route, transforms: [any Transform], keys: [String]) {
            self.route = route
            self.transforms = transforms
            self.keys = keys
            from = route.from
            takesAll = route.from.contains(where: \.matchesAll)
        }

        @inline(__always) func takes(receiver: String) -> Bool {
            takesAll || from.contains { $0.matches(receiver) }
        }
    }

    let lanes: [Lane]

    public init(routes: [Route], sink: String, clock: any Clock, timeZones: any TimeZoneLookup, logger: Logger) {
        lanes = routes.map { route in
            let context = TransformContext(
                route: route.name, sink: sink, clock: clock, timeZones: timeZones,
                logger: logger.child("route \(route.name)"))
            return Lane(
                route: route, transforms: route.transforms.map { $0.instantiate(context) },
                keys: route.transforms.enumerated().map { "\(route.name)/\($0.offset)/\($0.element.kind)" })
        }
    }

    /// Appends what every route that takes the record makes of it; false when none passes
    /// anything on (filtered out, or absorbed into a transform's state).
    public func process(_ r: consuming Record, into out: inout [Record]) -> Bool {
        let before = out.count
        if lanes.count == 1 {
            process(r, lane: lanes[0], into: &out)
        } else {
            for lane in lanes { process(copy r, lane: lane, into: &out) }
        }
        return out.count > before
    }

    private func process(_ r: consuming Record, lane: Lane, into out: inout [Record]) {
        guard lane.takesAll || lane.takes(receiver: r.receiver) else { return }
        run(lane, r, from: 0, into: &out)
    }

    /// Lets every transform emit what the batch just processed changed (in route order), on
    /// through the transforms after it.
    public func flush(into out: inout [Record]) {
        for lane in lanes {
            for i in lane.transforms.indices {
                lane.transforms[i].flush { r in run(lane, r, from: i + 1, into: &out) }
            }
        }
    }

    /// Lets every transform emit what time alone decides.
    public func tick(now: Timestamp, into out: inout [Record]) {
        for lane in lanes {
            for i in lane.transforms.indices {
                lane.transforms[i].tick(now: now) { r in run(lane, r, from: i + 1, into: &out) }
            }
        }
    }

    /// Runs `r` through the lane's transforms from the `i`-th on, appending what comes out. A
    /// record past the last transform is moved into `out` untouched (its storage is read next
    /// by the thread that encodes it, not here).
    private func run(_ lane: Lane, _ r: consuming Record, from i: Int, into out: inout [Record]) {
        if i == lane.transforms.count {
            out.append(r)
            return
        }
        lane.transforms[i].process(r) { next in run(lane, next, from: i + 1, into: &out) }
    }

    /// The state of every transform that keeps some, by key, as the cursor file holds it.
    public var states: [String: [UInt8]] { Dictionary(saveState().map { ($0.key, $0.bytes) }, uniquingKeysWith: { $1 }) }

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
    public func restore(_ states: [String: [UInt8]], logger: Logger) {
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
            logger.warning(
                "transform state \(key) belongs to no transform of this config (a route was renamed or "
                    + "changed); it is dropped at the next commit")
        }
    }
}

import FastJSON
import HealthgateCore
import YAMLConfig
import CanonicalJSON

/// Takes out what should not leave the house: whole fields of every record, whole kinds, and
/// the precision of every latitude and longitude.
///
/// ```yaml
/// - drop:
///     fields: [metadata, extra, source]   # also: fields (a kind's own: route points, beats)
///     kinds: [workout_route, heartbeat_series]
///     coarsen_location: 3                 # decimals kept of every lat/lon/latitude/longitude (3 ≈ 110 m)
/// ```
///
/// Deletions are never dropped by `kinds` (a sink may hold the record from before). Stateless.
public struct DropTransform: TransformSpec {
    let fields: Set<String>
    let kinds: Set<String>
    let decimals: Int?

    public var kind: String { "drop" }

    public func instantiate(_ context: TransformContext) -> any Transform { Instance(spec: self) }

    static let fieldNames: Set<String> = ["metadata", "extra", "source", "fields"]

    /// Nil when the record is dropped; else the record with the fields and precision taken out.
    static let locationKeys: Set<String> = ["lat", "lon", "lng", "latitude", "longitude"]

    /// `json` with every number under a location key rounded to `decimals`; as it was when it
    /// holds none (the common case: no copy).
    static func coarsen(_ json: RawJSON, decimals: Int, parser: JSONParser, key: String? = nil) -> RawJSON {
        guard json.bytes.contains(where: { $0 == 0x6C || $0 == 0x4C }), // an "l": no lat/lon/lng/latitude/longitude without one
            let doc = try? parser.parse(json.bytes)
        else { return json }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        var w = JSONWriter(capacity: json.bytes.count)
        var changed = false
        func emit(_ v: JSONRef, location: Bool) {
            switch v.kind {
            case .object:
                w.beginObject()
                for (k, value) in v.members {
                    let name = k.string
                    w.key(name)
                    emit(value, location: locationKeys.contains(name.lowercased()))
                }
                w.endObject()
            case .array:
                w.beginArray()
                for e in v.elements { emit(e, location: location) } // [lat, lon] pairs under a location key
                w.endArray()
            case .string: w.string(v.string ?? "")
            case .int, .uint, .double:
                if location, let d = v.double {
                    let rounded = (d * scale).rounded() / scale
                    if rounded != d { changed = true }
                    w.double(rounded)
                } else if let i = v.int64 {
                    w.int(i)
                } else if let u = v.uint64 {
                    w.uint(u)
                } else {
                    w.double(v.double ?? 0)
                }
            case .bool: w.bool(v.bool ?? false)
            case .null: w.null()
            }
        }
        emit(doc.root, location: key.map { locationKeys.contains($0.lowercased()) } ?? false)
        return changed ? RawJSON(encoded: w.bytes) : json
    }

    final class Instance: Transform {
        let spec: DropTransform
        let parser = JSONParser()
        init(spec: DropTransform) { self.spec = spec }

        func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
            if record.op == .upsert && spec.kinds.contains(record.kind) { return }
            if spec.fields.contains("metadata") { record.metadata = nil }
            if spec.fields.contains("extra") { record.extra = [] }
            if spec.fields.contains("source") { record.source = nil }
            if spec.fields.contains("fields") { record.fields = [] }
            if let d = spec.decimals {
                if let m = record.metadata {
                    let coarse = DropTransform.coarsen(m, decimals: d, parser: parser)
                    if coarse != m { record.metadata = coarse }
                }
                let fields = record.fields.map {
                    RecordField($0.name, DropTransform.coarsen($0.value, decimals: d, parser: parser, key: $0.name))
                }
                if fields != record.fields { record.fields = fields }
                let extra = record.extra.map {
                    RecordField($0.name, DropTransform.coarsen($0.value, decimals: d, parser: parser, key: $0.name))
                }
                if extra != record.extra { record.extra = extra }
            }
            emit(record)
        }
    }

    public static func build(_ node: YAMLNode, _ path: String) throws(ConfigProblems) -> any TransformSpec {
        let c = try YAMLDecoder().decode(DropTransformConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        for f in c.fields ?? [] where !fieldNames.contains(f) {
            problems.add("fields", "\"\(f)\" is not a field drop can take out (\(fieldNames.sorted().joined(separator: ", ")))")
        }
        if let d = c.coarsen_location, !(0...8).contains(d) {
            problems.add("coarsen_location", "coarsen_location is 0 to 8 decimals (3 ≈ 110 m)")
        }
        if (c.fields ?? []).isEmpty && (c.kinds ?? []).isEmpty && c.coarsen_location == nil {
            problems.add("fields", "drop needs fields, kinds or coarsen_location")
        }
        try problems.check()
        return DropTransform(fields: Set(c.fields ?? []), kinds: Set(c.kinds ?? []), decimals: c.coarsen_location)
    }
}

public struct DropTransformConfig: Decodable, Sendable {
    public var fields: [String]?
    public var kinds: [String]?
    public var coarsen_location: Int?
}

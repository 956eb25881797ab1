import CanonicalJSON
import HealthgateCore
import YAMLConfig

/// Lets each record through once: a record whose key `(device, uuid, part)` and content are the
/// ones already passed within `ttl` is dropped, so sinks that append (files, webhooks) see a
/// resent chunk once. A changed record passes (and is remembered as it is now); a deletion
/// always passes and forgets its key, so the sample may come back.
///
/// ```yaml
/// - dedupe: {ttl: 7d, max_keys: 1000000}
/// ```
///
/// What it remembers — a 64-bit hash of each key and of its content, and when it passed — is
/// committed with the sink's cursor, so it survives restarts and never gets ahead of what the
/// sink has. `max_keys` bounds it (24 bytes a key): past it the oldest keys are forgotten first,
/// and a forgotten key's record passes again. Defaults: `ttl` 7d, `max_keys` 100,000.
public struct DedupeTransform: TransformSpec {
    let ttlSeconds: Int64
    let maxKeys: Int

    public var kind: String { "dedupe" }

    public func instantiate(_ context: TransformContext) -> any Transform { Instance(spec: self, clock: context.clock) }

    /// The key of a record as one hash: device, uuid (and part), apart by a byte no name holds.
    static func keyHash(_ r: borrowing Record, part: Int?) -> UInt64 {
        var h = FNV1a.hash(r.device.utf8)
        h = FNV1a.hash(CollectionOfOne(0), from: h)
        h = FNV1a.hash(r.uuid.utf8, from: h)
        if let part { h = FNV1a.hash(CollectionOfOne(0), from: h); h = FNV1a.hash(String(part).utf8, from: h) }
        return h
    }

    final class Instance: Transform {
        struct Seen {
            var content: UInt64
            var at: Int64
        }

        let spec: DedupeTransform
        let clock: any Clock
        /// Key hash → what passed last. Parted records are under their part's own key, and
        /// their uuid's key remembers the highest part seen, so a deletion finds every part.
        var seen: [UInt64: Seen] = [:]
        var parts: [UInt64: Int] = [:]

        init(spec: DedupeTransform, clock: any Clock) {
            self.spec = spec
            self.clock = clock
        }

        func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
            let now = clock.now().seconds
            let uuidKey = DedupeTransform.keyHash(record, part: nil)
            if record.op == .delete {
                seen[uuidKey] = nil
                if let top = parts.removeValue(forKey: uuidKey) {
                    for p in 0...max(0, top) { seen[DedupeTransform.keyHash(record, part: p)] = nil }
                }
                emit(record)
                return
            }
            let key = record.part.map { DedupeTransform.keyHash(record, part: $0) } ?? uuidKey
            let content = FNV1a.hash(record.line)
            if let s = seen[key], s.content == content, now - s.at < spec.ttlSeconds { return }
            seen[key] = Seen(content: content, at: now)
            if let p = record.part { parts[uuidKey] = max(parts[uuidKey] ?? 0, p) }
            if seen.count > spec.maxKeys { forgetOldest(now: now) }
            emit(record)
        }

        /// Past `max_keys`: what is past its ttl goes, then the oldest, down to 90 %.
        func forgetOldest(now: Int64) {
            seen = seen.filter { now - $0.value.at < spec.ttlSeconds }
            if seen.count > spec.maxKeys {
                let keep = spec.maxKeys * 9 / 10
                let cut = seen.values.map(\.at).sorted()[seen.count - keep]
                seen = seen.filter { $0.value.at >= cut }
            }
        }

        /// One packed field: per key, its hash, its content's hash and when it passed (3 × 8
        /// bytes, little-endian); then the part tops (2 × 8 bytes each).
        func saveState() -> [UInt8]? {
            var b = [UInt8]()
            b.reserveCapacity(seen.count * 24)
            func put(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { b.append(contentsOf: $0) } }
            for (k, s) in seen { put(k); put(s.content); put(UInt64(bitPattern: s.at)) }
            var p = [UInt8]()
            for (k, top) in parts {
                withUnsafeBytes(of: k.littleEndian) { p.append(contentsOf: $0) }
                withUnsafeBytes(of: UInt64(top).littleEndian) { p.append(contentsOf: $0) }
            }
            var w = StateWriter()
            w.put(bytes: b)
            w.put(bytes: p)
            return w.bytes
        }

        func restoreState(_ bytes: [UInt8]) throws(TransformStateError) {
            var r = StateReader(bytes)
            let b = Array(try r.takeBytes()), p = Array(try r.takeBytes())
            guard b.count % 24 == 0, p.count % 16 == 0 else { throw TransformStateError("the dedupe state is not whole") }
            func u64(_ a: [UInt8], _ i: Int) -> UInt64 {
                var v: UInt64 = 0
                for k in 0..<8 { v |= UInt64(a[i + k]) << (8 * UInt64(k)) }
                return v
            }
            seen = [:]
            seen.reserveCapacity(b.count / 24)
            for i in stride(from: 0, to: b.count, by: 24) {
                seen[u64(b, i)] = Seen(content: u64(b, i + 8), at: Int64(bitPattern: u64(b, i + 16)))
            }
            parts = [:]
            for i in stride(from: 0, to: p.count, by: 16) { parts[u64(p, i)] = Int(truncatingIfNeeded: u64(p, i + 8)) }
        }
    }

    public static func build(_ node: YAMLNode, _ path: String) throws(ConfigProblems) -> any TransformSpec {
        let c = try YAMLDecoder().decode(DedupeTransformConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        let ttl = c.ttl?.seconds ?? 7 * 86_400
        if ttl < 1 { problems.add("ttl", "ttl is at least 1s (e.g. 7d)") }
        let maxKeys = c.max_keys ?? 100_000
        if !(1...50_000_000).contains(maxKeys) {
            problems.add("max_keys", "max_keys is 1 to 50,000,000 (24 bytes each, in memory and in each commit)")
        }
        try problems.check()
        return DedupeTransform(ttlSeconds: Int64(ttl), maxKeys: maxKeys)
    }
}

public struct DedupeTransformConfig: Decodable, Sendable {
    public var ttl: ConfigDuration?
    public var max_keys: Int?
}

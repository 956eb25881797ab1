import Storage

/// Points as a chunk of the point index packs them: one BLOB for the points of one request (a
/// run) instead of a SQLite row each, and once the chunk is sealed one more for all of its keys
/// sorted (`SortedKeys`). A run is an 8-byte head (the number of points, little-endian), the
/// points at `Entry.size` bytes each, then the texts of uuids that are not a UUID's.
///
/// An entry: key, device, series and time (Int64 each), part (Int32, -1 for none), the uuid's
/// form (one byte: 0 a UUID in lower case, 1 in upper case, 2 a text, 255 a point removed), three
/// bytes unused, then the UUID's 16 bytes, or where its text lies in the blob and how long it is
/// (two Int64). All little-endian.
enum PackedPoints {
    static let headSize = 8
    static let formOffset = 36

    struct Entry {
        static let size = 56
        static let removed: UInt8 = 255
        static let text: UInt8 = 2

        var key: Int64
        var device: Int64
        var series: Int64
        var time: Int64
        var part: Int32
        var form: UInt8
        /// The UUID's bytes, or (offset, length) of its text in the blob.
        var uuid: (UInt64, UInt64)

        init(key: Int64, device: Int64, series: Int64, time: Int64, part: Int32, form: UInt8, uuid: (UInt64, UInt64)) {
            self.key = key
            self.device = device
            self.series = series
            self.time = time
            self.part = part
            self.form = form
            self.uuid = uuid
        }

        /// The entry at the start of `p` (at least `size` bytes).
        init(_ p: UnsafeRawBufferPointer) {
            key = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 0, as: Int64.self))
            device = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: Int64.self))
            series = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 16, as: Int64.self))
            time = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 24, as: Int64.self))
            part = Int32(littleEndian: p.loadUnaligned(fromByteOffset: 32, as: Int32.self))
            form = p[PackedPoints.formOffset]
            uuid = (UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 40, as: UInt64.self)),
                    UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 48, as: UInt64.self)))
        }

        /// Writes the entry at the start of `p` (at least `size` bytes).
        func write(to p: UnsafeMutableRawBufferPointer) {
            p.storeBytes(of: key.littleEndian, toByteOffset: 0, as: Int64.self)
            p.storeBytes(of: device.littleEndian, toByteOffset: 8, as: Int64.self)
            p.storeBytes(of: series.littleEndian, toByteOffset: 16, as: Int64.self)
            p.storeBytes(of: time.littleEndian, toByteOffset: 24, as: Int64.self)
            p.storeBytes(of: part.littleEndian, toByteOffset: 32, as: Int32.self)
            p[PackedPoints.formOffset] = form
            p[37] = 0; p[38] = 0; p[39] = 0
            p.storeBytes(of: uuid.0.littleEndian, toByteOffset: 40, as: UInt64.self)
            p.storeBytes(of: uuid.1.littleEndian, toByteOffset: 48, as: UInt64.self)
        }
    }

    /// A blob of points made one at a time: the entries, and the texts of uuids after them.
    struct Builder {
        private var entries: [Entry] = []
        private var texts: [UInt8] = []

        init(capacity: Int) { entries.reserveCapacity(capacity) }

        var count: Int { entries.count }

        /// Adds a point; `uuid` is the UUID's stored form (`StoredKey.bytes`) or its text.
        mutating func add(key: Int64, device: Int64, series: Int64, time: Int64, part: Int?, uuid: (UInt64, UInt64, UInt8)?, text: String) {
            if let uuid {
                entries.append(Entry(key: key, device: device, series: series, time: time, part: Int32(clamping: part ?? -1),
                                     form: uuid.2, uuid: (uuid.0, uuid.1)))
            } else {
                var t = text
                let at = texts.count
                t.withUTF8 { texts.append(contentsOf: $0) }
                entries.append(Entry(key: key, device: device, series: series, time: time, part: Int32(clamping: part ?? -1),
                                     form: Entry.text, uuid: (UInt64(at), UInt64(texts.count - at))))
            }
        }

        /// The blob: the head, the entries (text offsets made absolute), the texts.
        func bytes() -> [UInt8] {
            let textsAt = headSize + entries.count * Entry.size
            return [UInt8](unsafeUninitializedCapacity: textsAt + texts.count) { buffer, initialized in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                raw.storeBytes(of: UInt64(entries.count).littleEndian, toByteOffset: 0, as: UInt64.self)
                for (i, e) in entries.enumerated() {
                    var e = e
                    if e.form == Entry.text { e.uuid.0 += UInt64(textsAt) }
                    e.write(to: UnsafeMutableRawBufferPointer(rebasing: raw[(headSize + i * Entry.size)...]))
                }
                texts.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[textsAt..<(textsAt + texts.count)]).copyMemory(from: $0) }
                initialized = textsAt + texts.count
            }
        }
    }

    /// How many points a blob's head says it holds (0 for a blob too short to have one).
    static func count(_ blob: UnsafeRawBufferPointer) -> Int {
        guard blob.count >= headSize else { return 0 }
        let n = Int(UInt64(littleEndian: blob.loadUnaligned(as: UInt64.self)))
        return min(n, (blob.count - headSize) / Entry.size)
    }

    /// The `i`th entry of a whole blob in memory.
    static func entry(_ blob: UnsafeRawBufferPointer, _ i: Int) -> Entry {
        Entry(UnsafeRawBufferPointer(rebasing: blob[(headSize + i * Entry.size)..<(headSize + (i + 1) * Entry.size)]))
    }

    /// A text uuid's bytes in a whole blob in memory (empty when they do not lie in it).
    static func text(of e: Entry, in blob: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let at = Int(clamping: e.uuid.0), n = Int(clamping: e.uuid.1)
        guard e.form == Entry.text, at >= 0, n >= 0, at <= blob.count, n <= blob.count - at else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(rebasing: blob[at..<(at + n)])
    }

    /// Whether the entry is `(device, uuid)`'s: `stored` is the uuid's stored form, `text` the uuid.
    static func matches(_ e: Entry, device: Int64, stored: PointIndex.StoredKey, text: String, textBytes: () throws -> [UInt8]) rethrows -> Bool {
        guard e.form != Entry.removed, e.key == stored.key, e.device == device else { return false }
        if let b = stored.bytes { return e.form == b.2 && e.uuid.0 == b.0 && e.uuid.1 == b.1 }
        guard e.form == Entry.text else { return false }
        var t = text
        let mine = t.withUTF8 { Array($0) }
        return try textBytes() == mine
    }
}

extension PackedPoints {
    /// A sealed chunk's keys, sorted: an 8-byte head (how many), then for each point its key
    /// (Int64), its run (UInt32: which of the chunk's runs, in order) and its place in it (UInt32);
    /// and the chunk's runs' rows, as Int64s.
    enum SortedKeys {
        static let size = 16

        static func bytes(_ sorted: [(key: Int64, run: UInt32, index: UInt32)]) -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: headSize + sorted.count * size) { buffer, initialized in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                raw.storeBytes(of: UInt64(sorted.count).littleEndian, toByteOffset: 0, as: UInt64.self)
                for (i, k) in sorted.enumerated() {
                    let at = headSize + i * size
                    raw.storeBytes(of: k.key.littleEndian, toByteOffset: at, as: Int64.self)
                    raw.storeBytes(of: k.run.littleEndian, toByteOffset: at + 8, as: UInt32.self)
                    raw.storeBytes(of: k.index.littleEndian, toByteOffset: at + 12, as: UInt32.self)
                }
                initialized = headSize + sorted.count * size
            }
        }

        static func runs(_ ids: [Int64]) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(ids.count * 8)
            for id in ids { withUnsafeBytes(of: id.littleEndian) { out.append(contentsOf: $0) } }
            return out
        }

        static func runIDs(_ bytes: [UInt8]) -> [Int64] {
            bytes.withUnsafeBytes { b in (0..<(b.count / 8)).map { Int64(littleEndian: b.loadUnaligned(fromByteOffset: $0 * 8, as: Int64.self)) } }
        }
    }
}

extension SQLite.Blob {
    /// How many keys a sealed chunk's sorted keys hold.
    func sortedCount() throws -> Int {
        guard count >= PackedPoints.headSize else { return 0 }
        var n: UInt64 = 0
        try withUnsafeMutableBytes(of: &n) { b in try read(into: b, at: 0) }
        return min(Int(clamping: UInt64(littleEndian: n)), (count - PackedPoints.headSize) / PackedPoints.SortedKeys.size)
    }

    /// The `i`th of a sealed chunk's sorted keys, read in place.
    func sortedKey(_ i: Int) throws -> (key: Int64, run: UInt32, index: UInt32) {
        var raw = (Int64(0), UInt32(0), UInt32(0))
        try withUnsafeMutableBytes(of: &raw) { b in
            try read(into: UnsafeMutableRawBufferPointer(rebasing: b[0..<PackedPoints.SortedKeys.size]),
                     at: PackedPoints.headSize + i * PackedPoints.SortedKeys.size)
        }
        return (Int64(littleEndian: raw.0), UInt32(littleEndian: raw.1), UInt32(littleEndian: raw.2))
    }

    /// The `i`th entry of a packed blob read in place.
    func entry(_ i: Int) throws -> PackedPoints.Entry {
        var raw = [UInt8](repeating: 0, count: PackedPoints.Entry.size)
        try raw.withUnsafeMutableBytes { b in try read(into: b, at: PackedPoints.headSize + i * PackedPoints.Entry.size) }
        return raw.withUnsafeBytes { PackedPoints.Entry($0) }
    }

    /// The key of the `i`th entry, read in place.
    func key(_ i: Int) throws -> Int64 {
        var k: Int64 = 0
        try withUnsafeMutableBytes(of: &k) { b in try read(into: b, at: PackedPoints.headSize + i * PackedPoints.Entry.size) }
        return Int64(littleEndian: k)
    }

    /// How many points the blob holds.
    func pointCount() throws -> Int {
        guard count >= PackedPoints.headSize else { return 0 }
        var n: UInt64 = 0
        try withUnsafeMutableBytes(of: &n) { b in try read(into: b, at: 0) }
        return min(Int(clamping: UInt64(littleEndian: n)), (count - PackedPoints.headSize) / PackedPoints.Entry.size)
    }

    /// A text uuid's bytes, read in place (none when they do not lie in the blob).
    func text(of e: PackedPoints.Entry) throws -> [UInt8] {
        let at = Int(clamping: e.uuid.0), n = Int(clamping: e.uuid.1)
        guard e.form == PackedPoints.Entry.text, at >= 0, n >= 0, at <= count, n <= count - at else { return [] }
        var out = [UInt8](repeating: 0, count: n)
        try out.withUnsafeMutableBytes { b in try read(into: b, at: at) }
        return out
    }

    /// Marks the `i`th entry removed.
    func remove(_ i: Int) throws {
        var form = PackedPoints.Entry.removed
        try withUnsafeBytes(of: &form) { b in
            try write(b, at: PackedPoints.headSize + i * PackedPoints.Entry.size + PackedPoints.formOffset)
        }
    }
}

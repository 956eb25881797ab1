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
}

/// Here, not in the struct, so that the struct keeps its memberwise initialiser.
extension PackedPoints.Entry {
    /// The entry at the start of `p` (at least `size` bytes).
    init(_ p: UnsafeRawBufferPointer) {
        key = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 0, as: Int64.self))
        device = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: Int64.self))
        series = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 16, as: Int64.self))
        time = Int64(littleEndian: p.loadUnaligned(fromByteOffset: 24, as: Int64.self))
        part = Int32(littleEndian: p.loadUnaligned(fromByteOffset: 32, as: Int32.self))
        form = p[PackedPoints.formOffset]
        uuid = (
            UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 40, as: UInt64.self)),
            UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 48, as: UInt64.self))
        )
    }
}

extension PackedPoints {
    /// A run's blob, written point by point where it goes (the number of points known at
    /// the start): the entries, then the texts of uuids that are not a UUID's.
    struct Builder {
        private var bytes: [UInt8]
        private var texts: [UInt8] = []
        private let points: Int
        private var added = 0

        init(points: Int) {
            self.points = points
            // Not zeroed first: the head is written here, and every entry whole by `add`
            // (`finish` checks that each was).
            bytes = [UInt8](unsafeUninitializedCapacity: headSize + points * Entry.size) { buffer, count in
                UnsafeMutableRawBufferPointer(buffer).storeBytes(of: UInt64(points).littleEndian, as: UInt64.self)
                count = buffer.count
            }
        }

        /// Adds a point; `uuid` is the UUID's stored form (`StoredKey.bytes`), nil for a text.
        mutating func add(key: Int64, device: Int64, series: Int64, time: Int64, part: Int?, uuid: (UInt64, UInt64, UInt8)?, text: String) {
            precondition(added < points, "PackedPoints.Builder: more points than said")
            let form: UInt8
            let place: (UInt64, UInt64)
            if let uuid {
                form = uuid.2
                place = (uuid.0, uuid.1)
            } else {
                var t = text
                let n = t.withUTF8 {
                    texts.append(contentsOf: $0); return $0.count
                }
                form = Entry.text
                place = (UInt64(headSize + points * Entry.size + texts.count - n), UInt64(n))
            }
            let e = Entry(key: key, device: device, series: series, time: time, part: Int32(clamping: part ?? -1), form: form, uuid: place)
            let at = headSize + added * Entry.size
            bytes.withUnsafeMutableBytes { e.write(to: UnsafeMutableRawBufferPointer(rebasing: $0[at..<(at + Entry.size)])) }
            added += 1
        }

        /// The blob: the head, the entries, the texts.
        consuming func finish() -> [UInt8] {
            precondition(added == points, "PackedPoints.Builder: fewer points than said")
            bytes.append(contentsOf: texts)
            return bytes
        }
    }

    /// Whether the entry is `(device, uuid)`'s: `stored` is the uuid's stored form, `uuid` its
    /// bytes, `text` reads an entry's text where it lies.
    static func matches(_ e: Entry, device: Int64, stored: PointIndex.StoredKey, uuid: [UInt8], text: () throws -> [UInt8]) rethrows -> Bool
    {
        guard e.form != Entry.removed, e.key == stored.key, e.device == device else { return false }
        if let b = stored.bytes { return e.form == b.2 && e.uuid.0 == b.0 && e.uuid.1 == b.1 }
        return e.form == Entry.text ? try text() == uuid : false
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
            bytes.withUnsafeBytes { b in
                (0..<(b.count / 8)).map { Int64(littleEndian: b.loadUnaligned(fromByteOffset: $0 * 8, as: Int64.self)) }
            }
        }
    }
}

/// Packed bytes read where they lie: a run read whole into memory, or a blob read in place
/// (a binary search reads a few pages of it, not all). The layouts are `PackedPoints`'.
protocol PackedBytes {
    var count: Int { get }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws
}

extension UnsafeRawBufferPointer: PackedBytes {
    /// In bounds, checked here (an unsafe buffer's own subscripts check in debug builds only).
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) {
        precondition(offset >= 0 && offset <= count && buffer.count <= count - offset, "PackedBytes: a read past the run's end")
        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: self[offset..<(offset + buffer.count)]))
    }
}

extension SQLite.Blob: PackedBytes {}

extension PackedBytes {
    /// How many items of `size` bytes the head says follow it (never more than there is room for).
    func headCount(size: Int) throws -> Int {
        guard count >= PackedPoints.headSize else { return 0 }
        var n: UInt64 = 0
        try withUnsafeMutableBytes(of: &n) { try read(into: $0, at: 0) }
        return min(Int(clamping: UInt64(littleEndian: n)), (count - PackedPoints.headSize) / size)
    }

    /// Each entry of a run, with its place.
    func forEachEntry(_ body: (PackedPoints.Entry, Int) throws -> Void) throws {
        for i in 0..<(try headCount(size: PackedPoints.Entry.size)) { try body(try entry(i), i) }
    }

    /// The `i`th entry of a run.
    func entry(_ i: Int) throws -> PackedPoints.Entry {
        var raw = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        return try withUnsafeMutableBytes(of: &raw) { b in
            let e = UnsafeMutableRawBufferPointer(rebasing: b[0..<PackedPoints.Entry.size])
            try read(into: e, at: PackedPoints.headSize + i * PackedPoints.Entry.size)
            return PackedPoints.Entry(UnsafeRawBufferPointer(e))
        }
    }

    /// A text uuid's bytes (none when they do not lie in the bytes).
    func text(of e: PackedPoints.Entry) throws -> [UInt8] {
        let at = Int(clamping: e.uuid.0), n = Int(clamping: e.uuid.1)
        guard e.form == PackedPoints.Entry.text, at >= 0, n >= 0, at <= count, n <= count - at else { return [] }
        var out = [UInt8](repeating: 0, count: n)
        try out.withUnsafeMutableBytes { try read(into: $0, at: at) }
        return out
    }

    /// The `i`th of a sealed chunk's sorted keys.
    func sortedKey(_ i: Int) throws -> (key: Int64, run: UInt32, index: UInt32) {
        var raw = (Int64(0), UInt32(0), UInt32(0))
        try withUnsafeMutableBytes(of: &raw) { b in
            try read(
                into: UnsafeMutableRawBufferPointer(rebasing: b[0..<PackedPoints.SortedKeys.size]),
                at: PackedPoints.headSize + i * PackedPoints.SortedKeys.size)
        }
        return (Int64(littleEndian: raw.0), UInt32(littleEndian: raw.1), UInt32(littleEndian: raw.2))
    }
}

extension SQLite.Blob {
    /// Marks the `i`th entry of a run removed (a blob opened to write).
    func remove(_ i: Int) throws {
        var form = PackedPoints.Entry.removed
        try withUnsafeBytes(of: &form) { b in
            try write(b, at: PackedPoints.headSize + i * PackedPoints.Entry.size + PackedPoints.formOffset)
        }
    }
}

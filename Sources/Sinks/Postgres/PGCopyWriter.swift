import HealthgateCore

/// Rows in `COPY … FROM STDIN`'s text format: columns split by tabs, rows by line feeds, NULL as
/// `\N`, and in every value a backslash, tab, line feed and carriage return escaped. The one
/// place a string from a phone is made fit for PostgreSQL's bulk path (statements take their
/// values as parameters instead). A NUL byte cannot be said in this format: PostgreSQL refuses
/// the row (SQLSTATE 22021), which the sink's halving sends to the dead letters.
struct PGCopyWriter {
    var bytes: [UInt8] = []
    private var column = 0

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    private mutating func separate() {
        if column > 0 { bytes.append(0x09) }
        column += 1
    }

    mutating func null() {
        separate()
        bytes.append(0x5C); bytes.append(0x4E) // \N
    }

    mutating func text(_ s: String?) {
        guard let s else { return null() }
        separate()
        var text = s
        text.withUTF8 { escape($0) }
    }

    /// Bytes already valid as the column's input (JSON from our writer, digits, dates), escaped.
    mutating func raw(_ b: [UInt8]?) {
        guard let b else { return null() }
        separate()
        b.withUnsafeBufferPointer { escape($0) }
    }

    private mutating func escape(_ b: UnsafeBufferPointer<UInt8>) {
        // Runs without a byte to escape (nearly every value is one run) are copied whole.
        var run = 0
        for i in 0..<b.count {
            let c = b[i]
            guard c == 0x5C || c == 0x09 || c == 0x0A || c == 0x0D else { continue }
            if i > run { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: b[run..<i])) }
            bytes.append(0x5C)
            bytes.append(c == 0x5C ? 0x5C : c == 0x09 ? 0x74 : c == 0x0A ? 0x6E : 0x72)
            run = i + 1
        }
        if b.count > run { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: b[run..<b.count])) }
    }

    mutating func int(_ v: Int?) {
        guard let v else { return null() }
        separate()
        if v < 0 { bytes.append(0x2D) }
        var m = v.magnitude
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[n] = UInt8(truncatingIfNeeded: m % 10) + 0x30
                m /= 10
                n += 1
            } while m > 0
            for k in stride(from: n - 1, through: 0, by: -1) { bytes.append(d[k]) }
        }
    }

    mutating func double(_ v: Double?) {
        guard let v, v.isFinite else { return null() }
        separate()
        bytes.append(contentsOf: v.description.utf8)
    }

    /// `2026-10-14T07:01:00Z` (timestamptz), or with `local` the same wall-clock time without a
    /// zone (timestamp).
    mutating func time(_ t: Timestamp?, local: Bool = false) {
        guard let t else { return null() }
        separate()
        t.appendRFC3339(to: &bytes)
        if local { bytes.removeLast() } // the Z
    }

    /// `2026-10-14` (date).
    mutating func date(_ t: Timestamp?) {
        guard let t else { return null() }
        separate()
        bytes.append(contentsOf: t.utcDate().utf8)
    }

    mutating func endRow() {
        bytes.append(0x0A)
        column = 0
    }
}

import Glibc
import HealthgateCore
import Synchronization

/// UTC offsets of IANA time zones ("Europe/Budapest") at a given instant, from the system's
/// tz database (`/usr/share/zoneinfo`, Debian's tzdata) in its TZif format (RFC 8536), read
/// once per zone. Past the last transition the zone's last offset holds (the footer's rule,
/// which only matters for instants past 2037, is not evaluated). Offsets are whole minutes: the
/// database's local mean times before standard time (Budapest's +1:16:20 until 1890) are rounded
/// to the nearest minute, as a record's `utc_offset` (±hh:mm) can only say — a record must be
/// what its journal line decodes to.
public enum TimeZones {
    /// One zone's offsets, read from the tz database once: what a receiver holds for a body whose
    /// samples all name the same zone, so each sample's offset is a binary search, not a lookup
    /// by name under a lock.
    public struct Zone: Sendable {
        var transitions: [Int64]
        var offsetAfter: [Int32]
        var initialOffset: Int32

        /// The zone's UTC offset in seconds at `instant` (Unix seconds).
        public func offset(at instant: Int64) -> Int {
            // The last transition at or before the instant.
            var lo = 0, hi = transitions.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if transitions[mid] <= instant { lo = mid + 1 } else { hi = mid }
            }
            return Int(lo == 0 ? initialOffset : offsetAfter[lo - 1])
        }
    }

    private static let cache = Locked<[String: Zone?]>([:])

    /// What a config says when it names a zone the system's tz database has not got; nil when it has it.
    public static func problem(_ name: String) -> String? {
        offset(name, at: 0) == nil ? "\"\(name)\" is not a time zone of the system's tz database (e.g. Europe/Budapest)" : nil
    }

    public static func offset(_ name: String, at instant: Int64) -> Int? {
        zone(name)?.offset(at: instant)
    }

    /// The zone named `name`, or nil when the system's tz database has not got it.
    public static func zone(_ name: String) -> Zone? {
        guard valid(name) else { return nil }
        return cache.withLock { c -> Zone? in
            if let z = c[name] { return z }
            let z = load(name)
            c[name] = z
            return z
        }
    }

    /// Names like `Europe/Budapest`, `UTC`, `America/Argentina/Buenos_Aires`: ASCII letters,
    /// digits, `/ _ - +` (so never `..`), not starting with `/`. Byte by byte: it runs for every
    /// sample a receiver gives a zone (the generic `contains` was a twelfth of the ingest API's CPU).
    public static func valid(_ name: String) -> Bool {
        !name.utf8.isEmpty && name.utf8.count < 64 && name.utf8.first != 0x2F
            && name.utf8.allSatisfy {
                ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39)
                    || $0 == 0x2F || $0 == 0x5F || $0 == 0x2D || $0 == 0x2B
            }
    }

    static func load(_ name: String) -> Zone? {
        guard let b = try? FileIO.readAll("/usr/share/zoneinfo/" + name), b.count >= 44,
            b[0] == 0x54, b[1] == 0x5A, b[2] == 0x69, b[3] == 0x66
        else { return nil }
        func u32(_ at: Int) -> Int { Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3]) }
        func i32(_ at: Int) -> Int32 { Int32(bitPattern: UInt32(u32(at))) }
        func i64(_ at: Int) -> Int64 { Int64(bitPattern: UInt64(u32(at)) << 32 | UInt64(u32(at + 4))) }
        // Header: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt at 20…43.
        func counts(_ at: Int) -> (Int, Int, Int, Int, Int, Int) {
            (u32(at + 20), u32(at + 24), u32(at + 28), u32(at + 32), u32(at + 36), u32(at + 40))
        }
        var (isut, isstd, leap, timecnt, typecnt, charcnt) = counts(0)
        var base = 44
        var timeSize = 4
        if b[4] >= 0x32 { // version 2+: skip the 32-bit block, read the 64-bit one
            base += timecnt * 4 + timecnt + typecnt * 6 + charcnt + leap * 8 + isstd + isut
            guard b.count >= base + 44 else { return nil }
            (isut, isstd, leap, timecnt, typecnt, charcnt) = counts(base)
            base += 44
            timeSize = 8
        }
        _ = (isut, isstd, leap, charcnt)
        let typesAt = base + timecnt * timeSize + timecnt
        guard b.count >= typesAt + typecnt * 6, typecnt > 0 else { return nil }
        var transitions: [Int64] = []
        var offsets: [Int32] = []
        for i in 0..<timecnt {
            transitions.append(timeSize == 8 ? i64(base + i * 8) : Int64(i32(base + i * 4)))
            let type = Int(b[base + timecnt * timeSize + i])
            guard type < typecnt else { return nil }
            offsets.append(wholeMinutes(i32(typesAt + type * 6)))
        }
        return Zone(transitions: transitions, offsetAfter: offsets, initialOffset: wholeMinutes(i32(typesAt)))
    }

    /// `seconds` rounded to the nearest whole minute (halves away from zero).
    static func wholeMinutes(_ seconds: Int32) -> Int32 {
        let m = (Int(seconds.magnitude) + 30) / 60 * 60
        return Int32(seconds < 0 ? -m : m)
    }
}

/// The system's tz database, for transforms (`TransformContext.timeZones`).
public struct SystemTimeZones: TimeZoneLookup {
    public init() {}

    public func utcOffset(zone: String, at unixSeconds: Int64) -> Int? { TimeZones.offset(zone, at: unixSeconds) }
}

import Foundation

/// Times for samples "a few minutes ago" that tests of today's totals count on.
public enum TestTime {
    /// `now - seconds`, except in the first `window` seconds of a day (at UTC offset `offset`
    /// seconds): then the offsets shrink in proportion, so that what was minutes ago still falls
    /// in today, in the same order, and a test of today's totals passes at any time of day (it
    /// failed in the ten minutes after midnight). Offsets past the window are left as they are.
    public static func ago(
        _ seconds: Int64, now: Int64 = Int64(Date().timeIntervalSince1970), offset: Int64 = 0,
        window: Int64 = 3600
    ) -> Int64 {
        let sinceMidnight = ((now + offset) % 86_400 + 86_400) % 86_400
        guard seconds > 0, seconds <= window, sinceMidnight < window else { return now - seconds }
        return now - seconds * max(sinceMidnight - 1, 0) / window
    }
}

/// UTC offsets of IANA zones ("Europe/Budapest"); the system's is `Posix.SystemTimeZones`.
public protocol TimeZoneLookup: Sendable {
    /// Seconds east of UTC at the instant, or nil for an unknown zone.
    func utcOffset(zone: String, at unixSeconds: Int64) -> Int?
}

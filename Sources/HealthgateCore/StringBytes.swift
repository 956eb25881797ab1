extension String {
    /// Calls `body` with the string's UTF-8 bytes where they lie: no copy of the string, so no
    /// retain and release (`var s = self; s.withUTF8` took both, a few times for every record).
    /// A string that is not contiguous UTF-8 (bridged) is made so first.
    @inlinable public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let r = utf8.withContiguousStorageIfAvailable(body) { return r }
        var s = self
        return s.withUTF8(body)
    }

    /// Whether `other` is the same text, lengths first: they tell most different types and
    /// units apart without comparing bytes (`==` on two different strings compares them
    /// through Unicode's rules; on the same storage it is a pointer's compare). Two
    /// spellings of one text in different Unicode forms differ here: for the caches that use
    /// it, that is a miss, and the registry is asked.
    @inlinable public func isSameText(_ other: String) -> Bool {
        utf8.count == other.utf8.count && self == other
    }
}

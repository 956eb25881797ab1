/// A key `RecentAnswers` compares, one after another, before anything is hashed or asked.
public protocol RecentKey {
    /// Whether this is the same key; cheap for keys that differ (lengths first).
    func isSame(as other: Self) -> Bool
}

extension String: RecentKey {
    @inlinable public func isSame(as other: String) -> Bool { isSameText(other) }
}

/// The last eight answers worked out for keys, kept in a ring in place of the oldest. A body's
/// records come from a few types, units and series, in runs or taken in turn: comparing eight
/// keys costs less than hashing one, asking the registry again or looking in a database. The
/// registry's answers on ingest (`KnownCache`, the receivers), a transform's per type and unit
/// (`PerTypeCache`), the InfluxDB point index's series all keep theirs here.
public struct RecentAnswers<Key: RecentKey, Value> {
    @usableFromInline var keys: [Key] = []
    @usableFromInline var values: [Value] = []
    @usableFromInline var next = 0

    public init() {}

    /// Answers kept.
    @inlinable public static var kept: Int { 8 }

    /// The kept answer for `key`, if any.
    @inlinable public func answer(for key: Key) -> Value? {
        for i in keys.indices where keys[i].isSame(as: key) { return values[i] }
        return nil
    }

    /// Keeps an answer, in place of the oldest when eight are kept.
    @inlinable public mutating func keep(_ key: Key, _ value: Value) {
        if keys.count < Self.kept {
            keys.append(key)
            values.append(value)
        } else {
            keys[next] = key
            values[next] = value
            next = (next + 1) % Self.kept
        }
    }

    /// The answer for `key`: a kept one, else `make()`'s, then kept.
    @inlinable public mutating func value(_ key: Key, _ make: () -> Value) -> Value {
        if let v = answer(for: key) { return v }
        let v = make()
        keep(key, v)
        return v
    }

    /// Forgets every answer (what they were answers about has changed).
    @inlinable public mutating func removeAll() {
        keys.removeAll()
        values.removeAll()
        next = 0
    }
}

extension RecentAnswers: Sendable where Key: Sendable, Value: Sendable {}

import HealthgateCrypto
import Pipeline
import SinkPostgres

/// The fleet's record of who delivers each sink's partition, and what its transforms hold, in
/// the shared PostgreSQL (`fleet.state`): one row per sink and partition. A worker that begins
/// taking a partition claims it, which raises the row's epoch; it saves the transforms' state
/// only while the epoch is still its own, so a worker the broker gave up on (and whose partition
/// moved) cannot overwrite what its successor saved. With the state it saves the ids of the
/// messages that state already holds: a message delivered again after a crash (saved, not yet
/// acknowledged) is recognised and changes nothing.
/// Used by one worker thread (the connection is not shared).
public final class PartitionStates {
    public struct Claim {
        public var epoch: Int64
        public var states: [String: [UInt8]]
        /// The messages the saved state already holds.
        public var applied: Set<String>
    }

    public struct Save {
        public var partition: Int
        public var epoch: Int64
        public var states: [String: [UInt8]]
        public var applied: [String]
        /// When the newest of them was published (Unix seconds; nil: keep what was saved).
        public var lastPublished: Int64?

        public init(partition: Int, epoch: Int64, states: [String: [UInt8]], applied: [String], lastPublished: Int64? = nil) {
            self.partition = partition
            self.epoch = epoch
            self.states = states
            self.applied = applied
            self.lastPublished = lastPublished
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    static let table = FleetDatabase.table("partitions")
    let db: FleetDatabase
    let holder: String

    /// `holder` names this worker in the table (for `status`): its host and process.
    public init(url: String, holder: String) {
        db = FleetDatabase(
            url: url, purpose: "fleet partitions",
            schema: [
                """
                CREATE TABLE IF NOT EXISTS \(PartitionStates.table) (
                    sink text NOT NULL, partition integer NOT NULL, epoch bigint NOT NULL, holder text NOT NULL,
                    claimed_at timestamptz NOT NULL, state text, applied text, saved_at timestamptz,
                    last_published bigint, handover_at timestamptz, PRIMARY KEY (sink, partition))
                """
            ])
        self.holder = holder
    }

    public func close() { db.close() }

    /// How long a claim waits for a handover its holder began and did not end (it died).
    public static let handoverLimit = 30

    /// Takes `partition` of `sink` for this worker: its epoch raised, its state as last saved;
    /// nil while its holder is handing it over (delivering what it had been sent of it).
    public func claim(sink: String, partition: Int) throws(Failure) -> Claim? {
        let rows = try run { c in
            try c.execute(
                """
                INSERT INTO \(PartitionStates.table) AS t (sink, partition, epoch, holder, claimed_at)
                VALUES ($1, $2, 1, $3, now())
                ON CONFLICT (sink, partition) DO UPDATE
                SET epoch = t.epoch + 1, holder = excluded.holder, claimed_at = now(), handover_at = NULL
                WHERE t.handover_at IS NULL OR t.handover_at < now() - interval '\(PartitionStates.handoverLimit) seconds'
                RETURNING epoch, state, applied
                """, [sink, String(partition), holder])
        }
        guard let row = rows.rows.first else { return nil }
        guard let epoch = row[0].flatMap({ Int64($0) }) else {
            throw Failure(description: "fleet state: claiming \(sink) partition \(partition) returned no row")
        }
        var states: [String: [UInt8]] = [:]
        if let text = row[1] {
            guard let bytes = Crypto.base64Decode(text), let decoded = CursorStore.decode(bytes) else {
                throw Failure(description: "fleet state: the saved state of \(sink) partition \(partition) cannot be read")
            }
            states = decoded.states
        }
        let applied = Set((row[2] ?? "").split(separator: "\n").map(String.init))
        return Claim(epoch: epoch, states: states, applied: applied)
    }

    /// Saves each partition's state in one transaction; returns the partitions whose epoch moved
    /// on (another worker claimed them since): theirs was not saved.
    public func save(sink: String, _ saves: [Save]) throws(Failure) -> [Int] {
        guard !saves.isEmpty else { return [] }
        return try run { c in
            try c.transaction { () throws(PGError) -> [Int] in
                var fenced: [Int] = []
                for s in saves {
                    let state = Crypto.base64(CursorStore.encode(CursorStore.Committed(states: s.states)))
                    let r = try c.execute(
                        """
                        UPDATE \(PartitionStates.table)
                        SET state = $4, applied = $5, saved_at = now(), last_published = coalesce($6, last_published)
                        WHERE sink = $1 AND partition = $2 AND epoch = $3
                        """,
                        [
                            sink, String(s.partition), String(s.epoch), state, s.applied.joined(separator: "\n"),
                            s.lastPublished.map { String($0) }
                        ])
                    if r.affected == 0 { fenced.append(s.partition) }
                }
                return fenced
            }
        }
    }

    /// Marks a handover of a partition this worker holds (false: it holds it no more): the next
    /// worker's claim waits until `endHandover`, or `handoverLimit`.
    public func beginHandover(sink: String, partition: Int, epoch: Int64) throws(Failure) -> Bool {
        try run { c in
            try c.execute(
                "UPDATE \(PartitionStates.table) SET handover_at = now() WHERE sink = $1 AND partition = $2 AND epoch = $3",
                [sink, String(partition), String(epoch)]
            ).affected == 1
        }
    }

    public func endHandover(sink: String, partition: Int, epoch: Int64) throws(Failure) {
        _ = try run { c in
            try c.execute(
                "UPDATE \(PartitionStates.table) SET handover_at = NULL WHERE sink = $1 AND partition = $2 AND epoch = $3",
                [sink, String(partition), String(epoch)])
        }
    }

    /// A partition as `healthgate status` shows it: who holds it, how long since its state was
    /// saved, and since the newest message in it was published (nil: never saved).
    public struct Holder: Sendable {
        public var sink: String
        public var partition: Int
        public var holder: String
        public var secondsSinceSaved: Int?
        public var secondsSincePublished: Int?
    }

    /// Every partition claimed so far.
    public func holders() throws(Failure) -> [Holder] {
        try run { c in
            try c.execute(
                """
                SELECT sink, partition, holder, extract(epoch FROM now() - saved_at)::bigint,
                  extract(epoch FROM now())::bigint - last_published
                FROM \(PartitionStates.table) ORDER BY sink, partition
                """
            ).rows.map { r in
                Holder(
                    sink: r[0] ?? "?", partition: Int(r[1] ?? "") ?? -1, holder: r[2] ?? "?",
                    secondsSinceSaved: r[3].flatMap { Int($0) }, secondsSincePublished: r[4].flatMap { Int($0) })
            }
        }
    }

    private func run<R>(_ body: (PGConnection) throws -> R) throws(Failure) -> R {
        do {
            return try db.with(body)
        } catch {
            throw Failure(description: "fleet state: \(error)")
        }
    }
}

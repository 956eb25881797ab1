import Fleet
import Glibc
import HealthgateCore
import Synchronization

/// A fleet's signatures of the last 300 s (`fleet.state`), which every ingest machine notes
/// and asks: a signature taken by one machine is a replay on all of them.
public final class SharedSignatures: Sendable {
    let db: FleetDatabase
    let receiver: String
    private let notedSinceSweep = Atomic<Int>(0)

    static let table = FleetDatabase.table("signatures")

    public init(url: String, receiver: String) {
        db = FleetDatabase(
            url: url, purpose: "fleet signatures",
            schema: [
                """
                CREATE TABLE IF NOT EXISTS \(SharedSignatures.table) (
                    receiver text NOT NULL, key text NOT NULL, at bigint NOT NULL, PRIMARY KEY (receiver, key))
                """
            ])
        self.receiver = receiver
    }

    /// Notes `key` as taken at `at`: true when no machine took it within the window, false
    /// for a replay, nil when the database cannot say (then nothing is noted).
    func note(_ key: String, at: Int64, now: Int64) -> Bool? {
        let sweep = notedSinceSweep.wrappingAdd(1, ordering: .relaxed).newValue % 1000 == 0
        return try? db.with { c in
            if sweep {
                try c.execute("DELETE FROM \(SharedSignatures.table) WHERE at < $1", [String(now - SynckySignature.window)])
            }
            // A row comes back when the key is new, or its last use has left the window.
            let r = try c.execute(
                """
                INSERT INTO \(SharedSignatures.table) AS t (receiver, key, at) VALUES ($1, $2, $3)
                ON CONFLICT (receiver, key) DO UPDATE SET at = excluded.at WHERE $4::bigint - t.at > \(SynckySignature.window)
                RETURNING 1
                """, [receiver, key, String(at), String(now)])
            return !r.rows.isEmpty
        }
    }
}

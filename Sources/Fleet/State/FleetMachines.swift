import Glibc
import HealthgateCore

/// The fleet's machines as they say they are alive (every 10 s, from each `serve` with
/// `fleet:`), for `healthgate status`.
public final class FleetMachines: Sendable {
    static let table = FleetDatabase.table("machines")
    let db: FleetDatabase

    public init(url: String) {
        db = FleetDatabase(
            url: url, purpose: "fleet machines",
            schema: [
                """
                CREATE TABLE IF NOT EXISTS \(FleetMachines.table) (
                    machine text PRIMARY KEY, role text NOT NULL, started_at timestamptz NOT NULL, seen_at timestamptz NOT NULL)
                """
            ])
    }

    /// This process, as the fleet's tables name it: its host and pid.
    public static let me: String = {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        return "\(String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) pid \(getpid())"
    }()

    /// Notes this machine alive now; machines not seen for a day are forgotten.
    public func beat(role: FleetRole) throws(FleetDatabase.Failure) {
        try db.with { c in
            try c.execute(
                """
                INSERT INTO \(FleetMachines.table) (machine, role, started_at, seen_at) VALUES ($1, $2, now(), now())
                ON CONFLICT (machine) DO UPDATE SET role = excluded.role, seen_at = now()
                """, [FleetMachines.me, role.rawValue])
            try c.execute("DELETE FROM \(FleetMachines.table) WHERE seen_at < now() - interval '1 day'")
        }
    }

    public func close() { db.close() }

    /// How many machines that deliver (`deliver` or `all`) said they were alive within the last
    /// `seconds`: each runs a worker for every sink.
    public func deliverers(seenWithin seconds: Int) throws(FleetDatabase.Failure) -> Int {
        try db.with { c in
            Int(
                try c.execute(
                    """
                    SELECT count(*) FROM \(FleetMachines.table)
                    WHERE role IN ('\(FleetRole.deliver.rawValue)', '\(FleetRole.all.rawValue)') AND seen_at >= now() - $1 * interval '1 second'
                    """, [String(seconds)]
                ).rows.first?[0] ?? "") ?? 0
        }
    }

    public func list() throws(FleetDatabase.Failure) -> [FleetReport.Machine] {
        try db.with { c in
            try c.execute(
                """
                SELECT machine, role, extract(epoch FROM now() - seen_at)::bigint FROM \(FleetMachines.table)
                ORDER BY role, machine
                """
            ).rows.map { r in
                FleetReport.Machine(name: r[0] ?? "?", role: r[1] ?? "?", secondsSinceSeen: Int(r[2] ?? "") ?? 0)
            }
        }
    }
}

import HealthgateCore
import Posix

/// Refused credentials (401/403 before a body is read) in the log without flooding it: the
/// first refusal after a quiet minute is said at once, the rest are summed up per receiver at
/// most once a minute. Counted in `/metrics` as `healthgate_requests_refused_total` as well.
/// Never the token or header a client sent: only the receiver, the status and the address.
final class RefusalLog: @unchecked Sendable {
    struct Pending {
        var count = 0
        var statuses: Set<Int> = []
        var whys: Set<String> = []
        var addresses: Set<String> = []
    }

    private let monitor = Monitor()
    private var pending: [String: Pending] = [:]
    private var lastSaid: Int64 = -(1 << 40)
    let intervalSeconds: Int64
    let logger: Logger

    init(logger: Logger, intervalSeconds: Int64 = 60) {
        self.logger = logger
        self.intervalSeconds = intervalSeconds
    }

    /// `why`: what was wrong, where the status alone does not say it.
    func note(receiver: String, status: Int, address: String, now: Timestamp, why: String? = nil) {
        let why = why ?? RefusalLog.why(status)
        let sayNow: Bool = monitor.withLock {
            if pending.isEmpty && now.seconds - lastSaid >= intervalSeconds {
                lastSaid = now.seconds
                return true
            }
            var p = pending[receiver] ?? Pending()
            p.count += 1
            p.statuses.insert(status)
            p.whys.insert(why)
            if p.addresses.count < 5 { p.addresses.insert(address) }
            pending[receiver] = p
            return false
        }
        if sayNow {
            logger.warning(
                "\(receiver): refused a request from \(address) (\(status): \(why)); "
                    + "more refusals are summed up once a minute")
        } else {
            flush(now: now)
        }
    }

    /// Says what was refused since the last line, once `intervalSeconds` have passed.
    func flush(now: Timestamp) {
        let due: [(String, Pending)] = monitor.withLock {
            guard !pending.isEmpty, now.seconds - lastSaid >= intervalSeconds else { return [] }
            lastSaid = now.seconds
            defer { pending.removeAll() }
            return pending.sorted { $0.key < $1.key }
        }
        for (receiver, p) in due {
            let statuses = p.statuses.sorted().map { "\($0)" }.joined(separator: "/")
            logger.warning(
                "\(receiver): refused \(p.count) more request(s) in the last minute (\(statuses): "
                    + "\(p.whys.sorted().joined(separator: "; "))) from \(p.addresses.sorted().joined(separator: ", "))"
                    + (p.addresses.count >= 5 ? " and others" : ""))
        }
    }

    static func why(_ status: Int) -> String {
        status == 403 ? "credentials not allowed here" : "missing or wrong credentials"
    }
}

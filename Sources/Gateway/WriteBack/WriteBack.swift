import HealthgateCore
import Posix
import Synchronization
import CanonicalJSON

/// Write-back for one Syncky receiver: the pending commands go out in the reply to each data
/// request (signed over the request's delivery id, guide section 10) until a result for their
/// latest version comes back.
public final class WriteBack: Sendable {
    let receiver: String
    let dataDir: String
    let logger: Logger
    /// Opened at the first use, so that `check` and `link` do not create the store.
    private let store = Locked<CommandStore?>(nil)
    private let warnedUnsigned = Atomic<Bool>(false)

    /// `fleet.state`: in a fleet, the commands are the fleet's, in its PostgreSQL.
    let fleetState: String?

    public init(receiver: String, dataDir: String, fleetState: String? = nil, logger: Logger) {
        self.receiver = receiver
        self.dataDir = dataDir
        self.fleetState = fleetState
        self.logger = logger
    }

    func withStore<R>(_ body: (CommandStore) throws -> R) throws -> R {
        try store.withLock { s in
            if s == nil { s = try fleetState.map { CommandStore(fleetState: $0) } ?? CommandStore(dataDir: dataDir) }
            return try body(s!)
        }
    }

    /// The reply to a data request: `fallback` when nothing is pending, else a signed commands
    /// message. Over plain HTTP the app only reads signed replies, so without a secret nothing
    /// is sent (and that is said once).
    func reply(
        to request: HTTPRequest, default fallback: HTTPResponse, signature: SynckySignature?,
        now: Timestamp
    ) -> HTTPResponse {
        do {
            return try withStore { store in
                let pending = try store.pending(receiver: receiver)
                guard !pending.isEmpty else { return fallback }
                if signature == nil && !request.isTLS {
                    if !warnedUnsigned.exchange(true, ordering: .relaxed) {
                        logger.warning(
                            "\(receiver): \(pending.count) write-back command(s) wait, but over plain HTTP the app "
                                + "reads only signed replies: set receivers.\(receiver).hmac (and the same secret in the app)")
                    }
                    return fallback
                }
                // The reply signature covers the request's delivery id.
                let delivery = request.header("x-syncky-delivery") ?? ""
                if signature != nil && delivery.isEmpty {
                    logger.warning("\(receiver): a data request without X-Syncky-Delivery; commands wait for the next one")
                    return fallback
                }
                let (body, included) = CommandsMessage.encode(pending)
                guard !included.isEmpty else { return fallback }
                var headers = [HTTPHeader("Content-Type", "application/json")]
                if let signature {
                    headers.append(
                        HTTPHeader(
                            "X-Syncky-Signature",
                            signature.signReply(delivery: delivery, t: now.seconds, body: body)))
                }
                try store.markSent(receiver: receiver, ids: included.map(\.id), at: now.seconds)
                logger.info("\(receiver): sent \(included.count) write-back command(s) in a reply")
                return HTTPResponse(status: 200, headers: headers, body: body)
            }
        } catch {
            logger.error("\(receiver): cannot read the write-back commands (\(error)); the reply carries none")
            return fallback
        }
    }

    /// Stores the results of one request, and says them in the log: a line per command for the
    /// first few, then one summary line (results for commands never sent are not stored).
    func record(_ results: [(id: String, version: Int, status: String, reason: String?)], now: Timestamp) {
        do {
            let (recorded, unknown) = try withStore { store in
                try store.record(receiver: receiver, results: results, at: now.seconds)
            }
            let said = WriteBack.resultLinesSaid
            for r in results.prefix(said) where !unknown.contains(r.id) {
                logger.info(
                    "\(receiver): command \(QuarantinedRecord.name(r.id)) version \(r.version): "
                        + "\(QuarantinedRecord.name(r.status))\(r.reason.map { " (\(QuarantinedRecord.name($0)))" } ?? "")")
            }
            if results.count > said && recorded > 0 {
                logger.info("\(receiver): \(recorded) write-back result(s) recorded in all")
            }
            if !unknown.isEmpty {
                logger.warning(
                    "\(receiver): \(unknown.count) result(s) for commands this receiver never had, not stored "
                        + "(first: \(unknown.prefix(3).map { QuarantinedRecord.name($0) }.joined(separator: ", ")))")
            }
        } catch {
            logger.error("\(receiver): cannot record write-back results (\(error))")
        }
    }

    /// Results said one line each, per request.
    static let resultLinesSaid = 5
}

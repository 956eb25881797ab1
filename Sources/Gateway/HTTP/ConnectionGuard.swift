import Glibc
import HealthgateCore
import Posix
import Synchronization

/// Keeps slow and idle clients from starving the gateway (libmicrohttpd 0.9.75 has one idle
/// timeout, reset by every byte, and refuses new connections once its limit is reached):
/// - a request's headers must be complete within `headerTimeout` of the connection opening
///   (or of the previous response on a kept-alive connection);
/// - a body must arrive at `minBodyRate` bytes a second or more, after a grace period;
/// - a response must be taken by the client within `sendTimeout`;
/// - at `maxConnections`, a new connection makes room by closing the one that has waited
///   longest for a request head (idle kept-alive or unauthenticated ones), and is itself
///   closed only when every other connection is busy with a request.
/// Closing is `shutdown(2)` of the socket: libmicrohttpd sees the end and cleans up itself.
public final class ConnectionGuard: @unchecked Sendable {
    public struct Limits: Sendable {
        public var maxConnections: Int
        public var headerTimeout: Double
        public var minBodyRate: Int
        public var bodyGrace: Double
        public var sendTimeout: Double

        public init(
            maxConnections: Int = 1024, headerTimeout: Double = 10, minBodyRate: Int = 1024, bodyGrace: Double = 10,
            sendTimeout: Double = 30
        ) {
            self.maxConnections = maxConnections
            self.headerTimeout = headerTimeout
            self.minBodyRate = minBodyRate
            self.bodyGrace = bodyGrace
            self.sendTimeout = sendTimeout
        }
    }

    final class Tracked {
        /// Waiting for a request head; receiving its body; our handler runs; the response goes out.
        enum Phase { case head, body, handling, sending }
        let fd: Int32
        var phase = Phase.head
        var since: Double
        var bytes = 0
        var closing = false

        init(fd: Int32, now: Double) {
            self.fd = fd
            since = now
        }
    }

    public let limits: Limits
    private let monitor = Monitor()
    private var open: [ObjectIdentifier: Tracked] = [:]
    /// Open connections not yet being closed: what the limit counts.
    private var live = 0
    private var stopping = false
    private var thread: pthread_t?
    let logger: Logger?

    /// Connections closed, by why; for `/metrics` and the log's once-a-minute summary.
    public let closedSlowHead = Atomic<Int>(0)
    public let closedSlowBody = Atomic<Int>(0)
    public let closedSlowReader = Atomic<Int>(0)
    public let closedToMakeRoom = Atomic<Int>(0)
    public let refusedFull = Atomic<Int>(0)
    private var said = (head: 0, body: 0, room: 0, full: 0, reader: 0)
    private var lastSaid = 0.0

    public init(limits: Limits, logger: Logger? = nil) {
        self.limits = limits
        self.logger = logger
    }

    public var openConnections: Int { monitor.withLock { open.count } }

    // MARK: events (from libmicrohttpd's threads)

    func started(fd: Int32) -> Tracked {
        let now = monotonicSeconds()
        let t = Tracked(fd: fd, now: now)
        monitor.withLock {
            open[ObjectIdentifier(t)] = t
            live += 1
            if live > limits.maxConnections {
                // The one that has waited longest for a request head goes; if none waits, the new one.
                let victim = open.values.filter { $0.phase == .head && !$0.closing }.min { $0.since < $1.since }
                if let victim {
                    close(victim)
                    closedToMakeRoom.add(1, ordering: .relaxed)
                } else {
                    close(t)
                    refusedFull.add(1, ordering: .relaxed)
                }
            }
        }
        return t
    }

    func ended(_ t: Tracked) {
        monitor.withLock {
            if open.removeValue(forKey: ObjectIdentifier(t)) != nil && !t.closing { live -= 1 }
        }
    }

    func headComplete(_ t: Tracked) {
        monitor.withLock {
            t.phase = .body
            t.since = monotonicSeconds()
            t.bytes = 0
        }
    }

    func bodyBytes(_ t: Tracked, _ n: Int) {
        monitor.withLock { t.bytes += n }
    }

    func handling(_ t: Tracked) {
        monitor.withLock { t.phase = .handling }
    }

    /// The response is queued: the client has `sendTimeout` to take it.
    func sending(_ t: Tracked) {
        monitor.withLock {
            t.phase = .sending
            t.since = monotonicSeconds()
        }
    }

    /// The response is out: on a kept-alive connection the next request's head is awaited.
    func responded(_ t: Tracked) {
        monitor.withLock {
            t.phase = .head
            t.since = monotonicSeconds()
        }
    }

    /// Caller holds the monitor. The socket stays open (libmicrohttpd closes it): no other
    /// connection can get its number while it is in `open`.
    private func close(_ t: Tracked) {
        guard !t.closing else { return }
        t.closing = true
        live -= 1
        _ = shutdown(t.fd, Int32(SHUT_RDWR))
    }

    // MARK: the watchdog

    func start() {
        if case .success(let t) = startThread({ [self] in watch() }) { thread = t }
    }

    func stop() {
        monitor.withLock {
            stopping = true
            monitor.broadcast()
        }
        if let th = thread {
            pthread_join(th, nil)
            thread = nil
        }
    }

    private func watch() {
        while true {
            let stop: Bool = monitor.withLock {
                if !stopping { monitor.wait(seconds: 0.25) }
                if stopping { return true }
                sweep(now: monotonicSeconds())
                return false
            }
            if stop { return }
            summarize()
        }
    }

    /// Caller holds the monitor.
    private func sweep(now: Double) {
        for t in open.values where !t.closing {
            let age = now - t.since
            switch t.phase {
            case .head where age > limits.headerTimeout:
                close(t)
                closedSlowHead.add(1, ordering: .relaxed)
            case .body where age > limits.bodyGrace && Double(t.bytes) < Double(limits.minBodyRate) * age:
                close(t)
                closedSlowBody.add(1, ordering: .relaxed)
            case .sending where age > limits.sendTimeout:
                close(t)
                closedSlowReader.add(1, ordering: .relaxed)
            default:
                break
            }
        }
    }

    /// At most one log line a minute, saying what was closed since the last one.
    private func summarize() {
        let now = monotonicSeconds()
        guard let logger, now - lastSaid >= 60 else { return }
        let current = (
            closedSlowHead.load(ordering: .relaxed), closedSlowBody.load(ordering: .relaxed),
            closedToMakeRoom.load(ordering: .relaxed), refusedFull.load(ordering: .relaxed),
            closedSlowReader.load(ordering: .relaxed)
        )
        let delta = (
            current.0 - said.head, current.1 - said.body, current.2 - said.room, current.3 - said.full,
            current.4 - said.reader
        )
        guard delta.0 + delta.1 + delta.2 + delta.3 + delta.4 > 0 else { return }
        said = current
        lastSaid = now
        var parts: [String] = []
        if delta.0 > 0 { parts.append("\(delta.0) sent no complete request head within \(Int(limits.headerTimeout)) s") }
        if delta.1 > 0 { parts.append("\(delta.1) sent a body slower than \(limits.minBodyRate) bytes/s") }
        if delta.2 > 0 {
            parts.append("\(delta.2) idle or unauthenticated closed to make room (http.max_connections \(limits.maxConnections))")
        }
        if delta.3 > 0 { parts.append("\(delta.3) new connection(s) refused: every connection was busy with a request") }
        if delta.4 > 0 { parts.append("\(delta.4) did not take a response within \(Int(limits.sendTimeout)) s") }
        logger.warning("closed connections: " + parts.joined(separator: "; "))
    }
}

import Glibc
import HealthgateCore
import Posix

/// Ingest's way to the broker: a request's messages are published and confirmed by a quorum
/// of nodes before its caller returns — the fleet's "durable before 2xx", as the journal's
/// fsync is one machine's. One thread owns the connection (rabbitmq-c shares nothing between
/// threads) and, as the journal shares one fsync, publishes the messages of every request
/// waiting at once and waits for their confirms together: they succeed together or fail
/// together, so a request is taken whole or not at all. Past `timeout` (no quorum, a broker
/// gone quiet) the request fails and the connection is dropped; any broker failure moves on
/// to the next of `brokers`.
public final class FleetPublisher: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// One request's messages, each to the exchange under its routing key.
    final class Job {
        let messages: [(key: String, body: [UInt8])]
        let deadline: Double
        var done = false
        var failure: Failure?

        init(messages: [(key: String, body: [UInt8])], deadline: Double) {
            self.messages = messages
            self.deadline = deadline
        }
    }

    let brokers: [AMQPURL]
    let queues: FleetQueues
    let timeout: Double
    let logger: Logger
    private let monitor = Monitor()
    private var waiting: [Job] = []
    private var stopping = false
    /// Why the brokers cannot take records now (nil: the last publish or check went through).
    private var failing: String?
    private var thread: pthread_t?
    /// The publisher thread's own (no lock): its connection and the broker to try next.
    private var connection: AMQPConnection?
    private var next = 0

    public init(brokers: [AMQPURL], queues: FleetQueues, timeout: Double = 5, logger: Logger) throws(Failure) {
        precondition(!brokers.isEmpty, "a fleet has at least one broker")
        self.brokers = brokers
        self.queues = queues
        self.timeout = timeout
        self.logger = logger
        switch startThread({ [self] in run() }) {
        case .success(let t): thread = t
        case .failure(let e): throw Failure(description: "cannot start the publisher's thread: \(e)")
        }
    }

    /// Publishes `messages` and returns once the broker confirmed them all; throws when it
    /// refused any, or did not confirm them within the timeout (then none may be counted on).
    public func publish(_ messages: [(key: String, body: [UInt8])]) throws(Failure) {
        guard !messages.isEmpty else { return }
        let job = Job(messages: messages, deadline: monotonicSeconds() + timeout)
        let failure: Failure? = monitor.withLock {
            guard !stopping else { return Failure(description: "the gateway is stopping") }
            waiting.append(job)
            monitor.broadcast()
            while !job.done { monitor.wait() }
            return job.failure
        }
        if let failure { throw failure }
    }

    /// Why the brokers cannot take a request now (no broker reachable, no quorum confirming), as
    /// the last publish or idle check found; nil when they can. For `/healthz`.
    public var problem: String? { monitor.withLock { failing } }

    /// Fails what waits and ends the thread.
    public func stop() {
        monitor.withLock {
            stopping = true
            monitor.broadcast()
        }
        if let t = thread { pthread_join(t, nil) }
        thread = nil
    }

    private func run() {
        while true {
            let group: [Job] = monitor.withLock {
                if waiting.isEmpty && !stopping { monitor.wait(seconds: FleetPublisher.idleCheck) }
                defer { waiting.removeAll() }
                return waiting
            }
            let stop = monitor.withLock { stopping }
            if group.isEmpty {
                if stop { break }
                idle()
                continue
            }
            let failure = publish(group)
            monitor.withLock {
                failing = failure?.description
                for job in group {
                    job.failure = failure
                    job.done = true
                }
                monitor.broadcast()
            }
        }
        connection?.close()
        connection = nil
    }

    /// How often an idle publisher looks at its connection.
    static let idleCheck = 2.0

    /// Nothing to publish: keeps the connection alive (its heartbeats are answered only inside
    /// a call), or makes it again, and notes whether a broker takes it.
    private func idle() {
        var problem: String?
        do throws(Failure) {
            let c = try connected(until: monotonicSeconds() + 3)
            do throws(AMQPConnection.Failure) {
                try c.service()
            } catch {
                connection = nil
                next += 1
                problem = "\(error)"
            }
        } catch {
            problem = error.description
        }
        monitor.withLock { failing = problem }
    }

    /// Publishes a group's messages and waits for their confirms until the earliest deadline.
    /// A connection lost on the way is made again with the next broker, and a group the broker
    /// refused (a quorum queue nacks while it elects a new leader) is published again, while
    /// time is left: a message already taken is then there twice, and records are stored by
    /// key, so it counts once.
    private func publish(_ group: [Job]) -> Failure? {
        let deadline = group.map(\.deadline).min()!
        var lastError = "no broker was tried before the request's time ran out"
        while monotonicSeconds() < deadline {
            let c: AMQPConnection
            do throws(Failure) {
                c = try connected(until: deadline)
            } catch {
                return error
            }
            do throws(AMQPConnection.Failure) {
                for job in group {
                    for m in job.messages { try c.publish(exchange: FleetQueues.exchange, key: m.key, body: m.body) }
                }
                try c.waitForConfirms(until: deadline)
                return nil
            } catch {
                lastError = "\(error)"
                if error.refused && c.isOpen {
                    // A channel whose first publish to a queue was refused keeps refusing
                    // (RabbitMQ 3.10): a fresh one registers anew.
                    c.close()
                    connection = nil
                    usleep(UInt32(max(0, min(0.2, deadline - monotonicSeconds())) * 1e6))
                    continue
                }
                // Gone quiet, or gone: what it may still confirm cannot be waited for.
                c.close()
                connection = nil
                next += 1
                logger.warning("fleet: broker \(c.url.shown): \(error); publishing through the next broker")
                if error.timedOut { break }
            }
        }
        return Failure(description: "the broker did not confirm the request's records: \(lastError)")
    }

    /// The connection, made (the queues declared) with the first broker of `brokers` that
    /// takes it, from the one after the last that failed.
    private func connected(until deadline: Double) throws(Failure) -> AMQPConnection {
        if let c = connection, c.isOpen { return c }
        do throws(AMQPConnection.Failure) {
            let (c, broker) = try queues.connect(brokers, from: next) {
                let left = deadline - monotonicSeconds()
                return left > 0 ? min(left, 3) : nil
            }
            connection = c
            next = broker
            return c
        } catch {
            throw Failure(description: "no broker took the connection: \(error)")
        }
    }
}

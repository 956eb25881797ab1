import CRabbitMQ
import Glibc
import HealthgateCore
import Posix

/// One AMQP 0-9-1 connection to a RabbitMQ node over rabbitmq-c, with one channel, used by one
/// thread at a time (rabbitmq-c shares nothing between threads): declarations, publishes with
/// publisher confirms, and a consumer with manual acknowledgements. Everything the broker sends
/// is read by one loop (`pump`), so confirms, returns, deliveries and a closed channel are seen
/// whichever call is waiting. Any failure leaves the connection closed: make a new one.
public final class AMQPConnection {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
        /// The broker refused a message (a nack, or no queue took it): the connection is still good.
        public var refused = false
        /// The deadline passed before the broker answered.
        public var timedOut = false
    }

    /// A message taken from a queue, acknowledged by its `tag` once handled.
    public struct Delivery: Sendable {
        public var tag: UInt64
        public var redelivered: Bool
        public var routingKey: String
        /// The tag of the consumer it came to: which queue it was taken from.
        public var consumer: String
        public var messageID: String?
        /// When it was published (Unix seconds, the publisher's clock), if it says.
        public var published: Int64?
        public var body: [UInt8]
    }

    public let url: AMQPURL
    private let state: amqp_connection_state_t
    private let channel: amqp_channel_t = 1
    public private(set) var isOpen = false
    /// The broker's `connection.blocked` (a memory or disk alarm): publishes wait until it lifts.
    public private(set) var isBlocked = false
    /// The broker cancelled our consumer (its queue was deleted, or it moved).
    public private(set) var consumerCancelled = false

    private var confirming = false
    private var nextSeq: UInt64 = 1
    /// Publishes not confirmed yet, and those the broker refused (nacked, or returned as unroutable).
    private var unconfirmed = Set<UInt64>()
    private var refused = Set<UInt64>()
    private var deliveries: [Delivery] = []
    private var idsInFlight: [String: UInt64] = [:]
    /// Message ids are this connection's random prefix and its publish count: unique in the
    /// fleet, so a worker knows a message it already applied when it comes again.
    private let idPrefix = String(UInt64.random(in: .min ... .max), radix: 36)

    /// Connects and logs in within `timeout` seconds; `heartbeat` seconds between heartbeats
    /// (the broker closes a connection silent for two of them).
    public init(url: AMQPURL, timeout: Double = 5, heartbeat: Int = 10) throws(Failure) {
        self.url = url
        guard let s = amqp_new_connection() else { throw Failure(description: "rabbitmq-c: out of memory") }
        state = s
        let socket = url.tls ? amqp_ssl_socket_new(s) : amqp_tcp_socket_new(s)
        guard let socket else {
            amqp_destroy_connection(s)
            throw Failure(description: "\(url.shown): cannot make a socket")
        }
        var tv = AMQPConnection.timeval(timeout)
        let rc = amqp_socket_open_noblock(socket, url.host, Int32(url.port), &tv)
        if rc != AMQP_STATUS_OK.rawValue {
            amqp_destroy_connection(s)
            throw Failure(description: "\(url.shown): cannot connect: \(AMQPConnection.status(rc))")
        }
        // Every call below answers within the deadline, or the connection is given up.
        _ = amqp_set_handshake_timeout(s, &tv)
        _ = amqp_set_rpc_timeout(s, &tv)
        let fd = amqp_get_sockfd(s)
        if fd >= 0 { _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<Glibc.timeval>.size)) }
        let login = hg_amqp_login(s, url.vhost, Int32(heartbeat), url.user, url.password)
        if login.reply_type != AMQP_RESPONSE_NORMAL {
            let why = AMQPConnection.text(login)
            amqp_destroy_connection(s)
            throw Failure(description: "\(url.shown): login refused or failed: \(why)")
        }
        guard amqp_channel_open(s, channel) != nil else {
            let why = AMQPConnection.text(amqp_get_rpc_reply(s))
            amqp_destroy_connection(s)
            throw Failure(description: "\(url.shown): cannot open a channel: \(why)")
        }
        isOpen = true
    }

    deinit { close() }

    /// Closes the channel and the connection (politely when it is still open).
    public func close() {
        guard isOpen else { return }
        isOpen = false
        _ = amqp_channel_close(state, channel, AMQP_REPLY_SUCCESS)
        _ = amqp_connection_close(state, AMQP_REPLY_SUCCESS)
        amqp_destroy_connection(state)
    }

    // MARK: Declarations

    /// A durable queue: quorum (replicated on a majority of nodes) unless `quorum` is false;
    /// with `singleActiveConsumer` one consumer at a time takes it.
    public func declareQueue(
        _ name: String, quorum: Bool = true, singleActiveConsumer: Bool = false, deliveryLimit: Int = 0,
        deadLetterExchange: String? = nil, deadLetterKey: String? = nil
    ) throws(Failure) {
        try rpc("declare queue \(name)") {
            hg_amqp_declare_queue(
                state, channel, name, quorum ? 1 : 0, singleActiveConsumer ? 1 : 0, Int32(deliveryLimit), deadLetterExchange,
                deadLetterKey)
        }
    }

    /// How many messages wait in the queue `name`, not taken by a consumer (a queue that does
    /// not exist is a failure that closes the connection).
    public func depth(of name: String) throws(Failure) -> Int {
        var messages: UInt32 = 0
        try rpc("look at queue \(name)") { hg_amqp_queue_depth(state, channel, name, &messages) }
        return Int(messages)
    }

    public func declareExchange(_ name: String, type: String = "direct") throws(Failure) {
        try rpc("declare exchange \(name)") { hg_amqp_declare_exchange(state, channel, name, type) }
    }

    public func bind(queue: String, exchange: String, key: String) throws(Failure) {
        try rpc("bind \(queue) to \(exchange)") { hg_amqp_bind(state, channel, queue, exchange, key) }
    }

    // MARK: Publishing

    /// Puts the channel in confirm mode: the broker then acknowledges each publish once it has
    /// it safely (a quorum queue: on a majority of its replicas).
    public func selectConfirms() throws(Failure) {
        try rpc("confirm.select") { hg_amqp_confirm_select(state, channel) }
        confirming = true
    }

    /// Publishes one persistent message to `exchange` with routing key `key`, mandatory (a
    /// message no queue takes comes back, and counts as refused).
    public func publish(exchange: String, key: String, body: [UInt8]) throws(Failure) {
        guard isOpen else { throw Failure(description: "\(url.shown): the connection is closed") }
        let seq = nextSeq
        let id = "\(idPrefix)-\(seq)"
        let rc = body.withUnsafeBytes {
            hg_amqp_publish(state, channel, exchange, key, $0.baseAddress, $0.count, id, UInt64(max(0, time(nil))))
        }
        guard rc == AMQP_STATUS_OK.rawValue else { throw lost("publish", AMQPConnection.status(rc)) }
        if confirming {
            nextSeq += 1
            unconfirmed.insert(seq)
            idsInFlight[id] = seq
        }
    }

    /// Waits until the broker confirmed every message published so far. Throws `refused` when
    /// it refused any (each is then forgotten: publish again), `timedOut` when `deadline` (on
    /// `monotonicSeconds`) passes first — the messages may still be taken later.
    public func waitForConfirms(until deadline: Double) throws(Failure) {
        while !unconfirmed.isEmpty {
            let left = deadline - monotonicSeconds()
            if left <= 0 {
                throw Failure(description: "\(url.shown): \(unconfirmed.count) publish(es) not confirmed in time", timedOut: true)
            }
            try pump(waiting: left)
        }
        if !refused.isEmpty {
            let n = refused.count
            refused.removeAll()
            throw Failure(description: "\(url.shown): the broker refused \(n) message(s)", refused: true)
        }
    }

    // MARK: Consuming

    /// Starts taking messages from `queue`, at most `prefetch` unacknowledged at once.
    public func consume(queue: String, prefetch: Int, tag: String) throws(Failure) {
        try rpc("basic.qos") { hg_amqp_qos(state, channel, UInt16(clamping: prefetch)) }
        try rpc("consume \(queue)") { hg_amqp_consume(state, channel, queue, tag) }
    }

    /// Stops consumer `tag`. Once this returns the broker sends it nothing more; what it sent
    /// before comes from `nextDelivery` as usual (rabbitmq-c keeps the frames that came while
    /// it waited for the answer).
    public func cancel(tag: String) throws(Failure) {
        try rpc("cancel \(tag)") { hg_amqp_cancel(state, channel, tag) }
    }

    /// The next message, waiting up to `timeout` seconds (nil when none came).
    public func nextDelivery(timeout: Double) throws(Failure) -> Delivery? {
        let deadline = monotonicSeconds() + timeout
        while deliveries.isEmpty {
            let left = deadline - monotonicSeconds()
            if left <= 0 || consumerCancelled { return nil }
            try pump(waiting: left)
        }
        return deliveries.removeFirst()
    }

    /// Acknowledges the delivery `tag` (and, with `multiple`, every one before it).
    public func ack(_ tag: UInt64, multiple: Bool = false) throws(Failure) {
        guard isOpen else { throw Failure(description: "\(url.shown): the connection is closed") }
        let rc = amqp_basic_ack(state, channel, tag, multiple ? 1 : 0)
        guard rc == AMQP_STATUS_OK.rawValue else { throw lost("ack", AMQPConnection.status(rc)) }
    }

    /// Gives a delivery back to its queue (`requeue`) or to its dead-letter exchange.
    public func nack(_ tag: UInt64, requeue: Bool) throws(Failure) {
        guard isOpen else { throw Failure(description: "\(url.shown): the connection is closed") }
        let rc = amqp_basic_nack(state, channel, tag, 0, requeue ? 1 : 0)
        guard rc == AMQP_STATUS_OK.rawValue else { throw lost("nack", AMQPConnection.status(rc)) }
    }

    /// Reads what the broker sent meanwhile, waiting at most `seconds`: keeps an idle
    /// connection's heartbeats going (rabbitmq-c answers them only inside its calls) and finds
    /// it closed. Throws when it is gone.
    public func service(waiting seconds: Double = 0.01) throws(Failure) {
        try pump(waiting: seconds)
    }

    // MARK: The loop

    /// Reads what the broker sends for up to `seconds` (one frame, or none).
    private func pump(waiting seconds: Double) throws(Failure) {
        guard isOpen else { throw Failure(description: "\(url.shown): the connection is closed") }
        var tv = AMQPConnection.timeval(min(seconds, 1))
        var e = hg_amqp_event()
        let rc = hg_amqp_next_event(state, &tv, &e)
        guard rc == 0 else { throw lost("read", AMQPConnection.status(rc)) }
        switch e.kind {
        case Int32(HG_AMQP_ACK.rawValue), Int32(HG_AMQP_NACK.rawValue):
            let done = e.flag != 0 ? unconfirmed.filter { $0 <= e.tag } : (unconfirmed.contains(e.tag) ? [e.tag] : [])
            unconfirmed.subtract(done)
            if e.kind == Int32(HG_AMQP_NACK.rawValue) { refused.formUnion(done) }
            if unconfirmed.isEmpty { idsInFlight.removeAll(keepingCapacity: true) }
        case Int32(HG_AMQP_RETURN.rawValue):
            // The returned message's content follows; its id says which publish it was.
            let message = try readMessage()
            if let id = message.id, let seq = idsInFlight[id] { refused.insert(seq) }
        case Int32(HG_AMQP_DELIVER.rawValue):
            let key = String(decoding: UnsafeRawBufferPointer(start: e.text.bytes, count: e.text.len), as: UTF8.self)
            let consumer = String(decoding: UnsafeRawBufferPointer(start: e.consumer.bytes, count: e.consumer.len), as: UTF8.self)
            let (tag, redelivered) = (e.tag, e.flag != 0)
            let message = try readMessage()
            deliveries.append(
                Delivery(
                    tag: tag, redelivered: redelivered, routingKey: key, consumer: consumer, messageID: message.id,
                    published: message.published,
                    body: message.body))
        case Int32(HG_AMQP_CHANNEL_CLOSE.rawValue), Int32(HG_AMQP_CONNECTION_CLOSE.rawValue):
            let why = String(decoding: UnsafeRawBufferPointer(start: e.text.bytes, count: e.text.len), as: UTF8.self)
            throw lost(
                "", "the broker closed the \(e.kind == Int32(HG_AMQP_CHANNEL_CLOSE.rawValue) ? "channel" : "connection"): \(e.code) \(why)")
        case Int32(HG_AMQP_BLOCKED.rawValue): isBlocked = true
        case Int32(HG_AMQP_UNBLOCKED.rawValue): isBlocked = false
        case Int32(HG_AMQP_CANCEL.rawValue): consumerCancelled = true
        default: break
        }
        amqp_maybe_release_buffers(state)
    }

    private func readMessage() throws(Failure) -> (id: String?, published: Int64?, body: [UInt8]) {
        var m = amqp_message_t()
        let r = amqp_read_message(state, channel, &m, 0)
        guard r.reply_type == AMQP_RESPONSE_NORMAL else { throw lost("read a message", AMQPConnection.text(r)) }
        defer { amqp_destroy_message(&m) }
        let body = Array(UnsafeRawBufferPointer(start: m.body.bytes, count: m.body.len))
        var id: String?
        if m.properties._flags & amqp_flags_t(AMQP_BASIC_MESSAGE_ID_FLAG) != 0 {
            id = String(
                decoding: UnsafeRawBufferPointer(start: m.properties.message_id.bytes, count: m.properties.message_id.len), as: UTF8.self)
        }
        let published =
            m.properties._flags & amqp_flags_t(AMQP_BASIC_TIMESTAMP_FLAG) != 0 ? Int64(clamping: m.properties.timestamp) : nil
        return (id, published, body)
    }

    /// Runs a synchronous method; a failure closes the connection (a refused declaration closes
    /// the channel, and this client keeps one).
    private func rpc(_ what: String, _ call: () -> Int32) throws(Failure) {
        guard isOpen else { throw Failure(description: "\(url.shown): the connection is closed") }
        if call() != 0 { throw lost(what, AMQPConnection.text(amqp_get_rpc_reply(state))) }
    }

    private func lost(_ what: String, _ why: String) -> Failure {
        if isOpen {
            isOpen = false
            amqp_destroy_connection(state)
        }
        return Failure(description: "\(url.shown): \(what.isEmpty ? "" : what + ": ")\(why)")
    }

    static func text(_ r: amqp_rpc_reply_t) -> String {
        var buf = [CChar](repeating: 0, count: 512)
        hg_amqp_reply_text(r, &buf, buf.count)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func status(_ rc: Int32) -> String { String(cString: amqp_error_string2(rc)) }

    static func timeval(_ seconds: Double) -> Glibc.timeval {
        let s = max(0, seconds)
        return Glibc.timeval(tv_sec: Int(s), tv_usec: Int((s - s.rounded(.down)) * 1e6))
    }
}

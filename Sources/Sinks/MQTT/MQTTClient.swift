import CMosquitto
import Glibc
import HealthgateCore
import Posix

/// An MQTT 5 client over libmosquitto, driven by its owner's thread (no libmosquitto thread:
/// `mosquitto_loop` runs inside `connect`, `waitForAcks` and `service`), so it belongs to the
/// sink's drainer thread like the sink itself (not `Sendable`). A publish counts as delivered
/// when the broker acknowledged it (PUBACK for QoS 1, PUBCOMP for QoS 2) with a reason code
/// below 0x80; QoS 0 counts once written to the socket.
public final class MQTTClient {
    public struct Options: Sendable {
        public var host: String
        public var port: Int
        public var tls: Bool = false
        public var caFile: String?
        public var certFile: String?
        public var keyFile: String?
        public var username: String?
        public var password: String?
        public var clientID: String
        public var keepalive: Int = 60
        /// The last will: published by the broker when the connection drops without a goodbye.
        public var will: (topic: String, payload: String, retain: Bool)?
        public var timeoutSeconds: Double = 10

        public init(host: String, port: Int, clientID: String) {
            self.host = host
            self.port = port
            self.clientID = clientID
        }
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
        /// libmosquitto's error number (`MOSQ_ERR_*`), when it said one.
        public var code: Int32?
        public init(_ d: String, code: Int32? = nil) {
            description = d
            self.code = code
        }

        /// The message is larger than the broker takes (its maximum packet size): never sendable.
        public var isOversize: Bool { code == MOSQ_ERR_OVERSIZE_PACKET.rawValue }
    }

    let options: Options
    let mosq: OpaquePointer
    private(set) var connected = false
    var connack: Int32?
    var acks: [Int32: Int32] = [:]
    var dropped: Int32?
    /// Messages from subscriptions, as they arrive during a loop: topic and payload.
    public var onMessage: ((String, [UInt8]) -> Void)?

    private static let library: Void = { _ = mosquitto_lib_init() }()

    public init(options: Options) throws(Failure) {
        _ = MQTTClient.library
        self.options = options
        guard let m = mosquitto_new(options.clientID, true, nil) else {
            throw Failure("cannot make an MQTT client (\(String(cString: strerror(errno))))")
        }
        mosq = m
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        _ = mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V5))
        mosquitto_connect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            let c = Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue()
            c.connack = rc
            c.connected = rc == 0
        }
        mosquitto_disconnect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            let c = Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue()
            c.connected = false
            c.dropped = rc
        }
        mosquitto_publish_v5_callback_set(m) { _, obj, mid, reason, _ in
            guard let obj else { return }
            Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue().acks[mid] = reason
        }
        mosquitto_message_callback_set(m) { _, obj, message in
            guard let obj, let message, let topic = message.pointee.topic else { return }
            let c = Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue()
            let n = Int(message.pointee.payloadlen)
            let payload = n > 0 ? Array(UnsafeRawBufferPointer(start: message.pointee.payload, count: n)) : []
            c.onMessage?(String(cString: topic), payload)
        }
        if let u = options.username { _ = mosquitto_username_pw_set(m, u, options.password) }
        if let will = options.will {
            let bytes = Array(will.payload.utf8)
            _ = mosquitto_will_set(m, will.topic, Int32(bytes.count), bytes, 1, will.retain)
        }
    }

    deinit {
        if connected { _ = mosquitto_disconnect(mosq) }
        mosquitto_destroy(mosq)
    }

    public var isConnected: Bool { connected }

    func describe(_ rc: Int32) -> String {
        rc == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(rc))
    }

    /// Connects (TLS when asked) and waits for the broker's CONNACK.
    public func connect() throws(Failure) {
        connack = nil
        dropped = nil
        if options.tls {
            let rc = mosquitto_tls_set(
                mosq, options.caFile, options.caFile == nil ? "/etc/ssl/certs" : nil, options.certFile,
                options.keyFile, nil)
            if rc != MOSQ_ERR_SUCCESS.rawValue { throw Failure("TLS settings refused: \(describe(rc))") }
        }
        let rc = mosquitto_connect(mosq, options.host, Int32(options.port), Int32(options.keepalive))
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            throw Failure("cannot connect to \(options.host):\(options.port): \(describe(rc))")
        }
        let until = monotonicSeconds() + options.timeoutSeconds
        while connack == nil {
            if monotonicSeconds() > until { throw Failure("\(options.host):\(options.port) did not answer the MQTT connect") }
            let rc = loopOnce(100)
            if rc != MOSQ_ERR_SUCCESS.rawValue && connack == nil {
                throw Failure("connection to \(options.host):\(options.port) lost: \(describe(rc))")
            }
        }
        if let code = connack, code != 0 {
            throw Failure("the broker refused the connection: \(String(cString: mosquitto_reason_string(code)))")
        }
    }

    /// Queues a message; returns its message id.
    public func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool) throws(Failure) -> Int32 {
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { mosquitto_publish(mosq, &mid, topic, Int32(payload.count), $0.baseAddress, Int32(qos), retain) }
        if rc != MOSQ_ERR_SUCCESS.rawValue { throw Failure("publish to \(topic) failed: \(describe(rc))", code: rc) }
        return mid
    }

    public func subscribe(_ topic: String, qos: Int) throws(Failure) {
        let rc = mosquitto_subscribe(mosq, nil, topic, Int32(qos))
        if rc != MOSQ_ERR_SUCCESS.rawValue { throw Failure("subscribe to \(topic) failed: \(describe(rc))") }
    }

    /// Runs the network loop until every message id has its acknowledgement; returns the
    /// broker's reason code per id (below 0x80: accepted). Throws when the connection drops or
    /// the acknowledgements do not come in time: then nothing is known to be delivered.
    public func waitForAcks(_ mids: [Int32], qos: Int) throws(Failure) -> [Int32: Int32] {
        let until = monotonicSeconds() + options.timeoutSeconds
        var out: [Int32: Int32] = [:]
        var waiting = Set(mids)
        while true {
            for m in waiting { if let r = acks.removeValue(forKey: m) { out[m] = r } }
            waiting.subtract(out.keys)
            if waiting.isEmpty { return out }
            if monotonicSeconds() > until {
                throw Failure("\(waiting.count) message(s) not acknowledged by \(options.host):\(options.port) in time")
            }
            let rc = loopOnce(100)
            if rc != MOSQ_ERR_SUCCESS.rawValue || !connected {
                throw Failure("connection to \(options.host):\(options.port) lost: \(describe(rc == 0 ? dropped ?? rc : rc))")
            }
        }
    }

    /// Writes out what is queued (QoS 0 has no acknowledgement to wait for). Throws when the
    /// connection drops or the socket does not drain in time.
    public func flush() throws(Failure) {
        let until = monotonicSeconds() + options.timeoutSeconds
        while mosquitto_want_write(mosq) {
            if monotonicSeconds() > until { throw Failure("\(options.host):\(options.port) does not take what is sent") }
            let rc = loopOnce(10)
            if rc != MOSQ_ERR_SUCCESS.rawValue || !connected {
                throw Failure("connection to \(options.host):\(options.port) lost: \(describe(rc))")
            }
        }
    }

    /// Keeps the connection alive and takes incoming messages, for up to `milliseconds`.
    public func service(milliseconds: Int) {
        guard connected else { return }
        let rc = loopOnce(Int32(milliseconds))
        if rc != MOSQ_ERR_SUCCESS.rawValue { connected = false }
    }

    /// A clean goodbye: the broker does not publish the last will.
    public func disconnect() {
        guard connected else { return }
        _ = mosquitto_disconnect(mosq)
        _ = loopOnce(100)
        connected = false
    }

    /// One turn of the network loop: waits up to `milliseconds` for the socket with poll(2),
    /// then reads, writes and does the housekeeping (keepalive pings, retries). Not
    /// `mosquitto_loop`: it uses select(2), which refuses a socket numbered 1024 or more — and a
    /// busy serve (or test run) has more descriptors open than that.
    func loopOnce(_ milliseconds: Int32) -> Int32 {
        let fd = mosquitto_socket(mosq)
        guard fd >= 0 else {
            connected = false
            return MOSQ_ERR_NO_CONN.rawValue
        }
        var p = pollfd(fd: fd, events: Int16(POLLIN) | (mosquitto_want_write(mosq) ? Int16(POLLOUT) : 0), revents: 0)
        let n = poll(&p, 1, milliseconds)
        if n < 0 && errno != EINTR { return MOSQ_ERR_ERRNO.rawValue }
        var rc = MOSQ_ERR_SUCCESS.rawValue
        if n > 0 && p.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { rc = mosquitto_loop_read(mosq, 1) }
        if rc == MOSQ_ERR_SUCCESS.rawValue && mosquitto_want_write(mosq) { rc = mosquitto_loop_write(mosq, 1) }
        if rc == MOSQ_ERR_SUCCESS.rawValue { rc = mosquitto_loop_misc(mosq) }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            // mosquitto_loop would have closed the socket and said so; the manual loop does not.
            connected = false
            if dropped == nil { dropped = rc }
        }
        return rc
    }

    /// The socket, for tests that cut the connection as a crash would.
    var socket: Int32 { mosquitto_socket(mosq) }
}

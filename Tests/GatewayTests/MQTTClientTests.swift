import Foundation
import Glibc
@testable import HealthgateTesting
@testable import SinkMQTT
import Testing

/// The MQTT client the Home Assistant sink will use, against a real mosquitto: a QoS 1 publish
/// counts once the broker acknowledged it, the last will goes out when the connection dies
/// without a goodbye, subscriptions deliver, and a broker that is not there is an error.
@Suite(.serialized) struct MQTTClientTests {
    func client(_ broker: DatabaseProcess, id: String = "healthgate-test", will: (String, String, Bool)? = nil) throws -> MQTTClient {
        var o = MQTTClient.Options(host: "127.0.0.1", port: Int(broker.port), clientID: id)
        o.timeoutSeconds = 5
        if let will { o.will = (will.0, will.1, will.2) }
        return try MQTTClient(options: o)
    }

    /// The first message on `topic` (retained ones included), or "" within 5 s.
    func first(_ broker: DatabaseProcess, _ topic: String) throws -> String {
        let r = try MQTTRecorder(port: broker.port, topic: topic)
        let until = Date().addingTimeInterval(5)
        while r.payloads.isEmpty && Date() < until { usleep(10_000) }
        r.stop()
        return r.payloads.first ?? ""
    }

    @Test func aQoS1PublishCountsOnceAcknowledged() throws {
        let broker = try DatabaseProcess.mosquitto()
        let c = try client(broker)
        try c.connect()
        #expect(c.isConnected)
        let mids = try (0..<20).map { try c.publish(topic: "healthgate/test/\($0)", payload: Array("v\($0)".utf8), qos: 1, retain: true) }
        let acks = try c.waitForAcks(mids, qos: 1)
        #expect(acks.count == 20)
        #expect(acks.values.allSatisfy { $0 < 0x80 })
        #expect(try first(broker, "healthgate/test/7") == "v7")
        c.disconnect()
    }

    @Test func theLastWillGoesOutWhenTheConnectionDies() throws {
        let broker = try DatabaseProcess.mosquitto()
        let c = try client(broker, will: ("healthgate/status", "offline", true))
        try c.connect()
        _ = try c.waitForAcks([try c.publish(topic: "healthgate/status", payload: Array("online".utf8), qos: 1, retain: true)], qos: 1)
        #expect(try first(broker, "healthgate/status") == "online")
        // As a SIGKILL would: the socket goes without a DISCONNECT.
        shutdown(c.socket, Int32(SHUT_RDWR))
        #expect(ServeProcess.eventually { (try? first(broker, "healthgate/status")) == "offline" })
    }

    @Test func aCleanDisconnectSendsNoWill() throws {
        let broker = try DatabaseProcess.mosquitto()
        let c = try client(broker, will: ("healthgate/status", "offline", true))
        try c.connect()
        _ = try c.waitForAcks([try c.publish(topic: "healthgate/status", payload: Array("online".utf8), qos: 1, retain: true)], qos: 1)
        c.disconnect()
        usleep(300_000)
        #expect(try first(broker, "healthgate/status") == "online")
    }

    @Test func subscriptionsDeliverWhileServiced() throws {
        let broker = try DatabaseProcess.mosquitto()
        let c = try client(broker)
        var got: [(String, String)] = []
        c.onMessage = { topic, payload in got.append((topic, String(decoding: payload, as: UTF8.self))) }
        try c.connect()
        try c.subscribe("homeassistant/status", qos: 1)
        for _ in 0..<5 { c.service(milliseconds: 50) }
        try DatabaseProcess.run(
            "/usr/bin/mosquitto_pub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "homeassistant/status",
                "-m", "online"
            ])
        let until = Date().addingTimeInterval(5)
        while got.isEmpty && Date() < until { c.service(milliseconds: 50) }
        #expect(got.first?.0 == "homeassistant/status")
        #expect(got.first?.1 == "online")
    }

    @Test func aBrokerThatIsNotThereIsAnError() throws {
        var o = MQTTClient.Options(host: "127.0.0.1", port: Int(ScriptedEndpoint.freePort()), clientID: "nobody")
        o.timeoutSeconds = 2
        let c = try MQTTClient(options: o)
        #expect(throws: MQTTClient.Failure.self) { try c.connect() }
        #expect(!c.isConnected)
    }

    /// A broker that goes away mid-stream: waiting for the acknowledgements fails (nothing is
    /// taken as delivered), and a new connect once it is back works.
    @Test func aBrokerRestartFailsTheWaitAndReconnects() throws {
        var broker: DatabaseProcess? = try DatabaseProcess.mosquitto()
        let port = broker!.port
        let dir = broker!.dir
        let c = try client(broker!)
        try c.connect()
        broker = nil // killed
        let mid = try? c.publish(topic: "healthgate/x", payload: Array("1".utf8), qos: 1, retain: false)
        #expect(throws: MQTTClient.Failure.self) { _ = try c.waitForAcks(mid.map { [$0] } ?? [1], qos: 1) }
        let again = try DatabaseProcess.mosquitto(port: port, dir: dir)
        #expect(ServeProcess.eventually { (try? c.connect()) != nil })
        let acks = try c.waitForAcks([try c.publish(topic: "healthgate/x", payload: Array("2".utf8), qos: 1, retain: true)], qos: 1)
        #expect(acks.count == 1)
        #expect(try first(again, "healthgate/x") == "2")
    }
}

extension MQTTClientTests {
    @Test func qos0IsWrittenOutOnFlush() throws {
        let broker = try DatabaseProcess.mosquitto()
        let c = try client(broker, id: "qos0")
        try c.connect()
        _ = try c.publish(topic: "healthgate/q0", payload: Array("zero".utf8), qos: 0, retain: true)
        try c.flush()
        #expect(try first(broker, "healthgate/q0") == "zero")
    }
}

extension MQTTClientTests {
    @Test func qos2CountsOnceTheHandshakeCompletes() throws {
        let broker = try DatabaseProcess.mosquitto()
        let c = try client(broker, id: "qos2")
        try c.connect()
        let mids = try (0..<5).map { try c.publish(topic: "healthgate/q2/\($0)", payload: Array("two\($0)".utf8), qos: 2, retain: true) }
        let acks = try c.waitForAcks(mids, qos: 2)
        #expect(acks.count == 5 && acks.values.allSatisfy { $0 < 0x80 })
        #expect(try first(broker, "healthgate/q2/3") == "two3")
    }

    /// mqtts:// with a private CA: the broker's certificate is checked against `ca_file`; without
    /// it (the system's CAs), the connection is refused.
    @Test func tlsWithAPrivateCA() throws {
        let dir = ServeProcess.makeTempDir("mqtts")
        let (rc, _) = try DatabaseProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem",
                "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1"
            ])
        #expect(rc == 0)
        // mosquitto started as root reads its files as the mosquitto user.
        chmod(dir, 0o755)
        chmod(dir + "/key.pem", 0o644)
        let broker = try DatabaseProcess.mosquitto(extra: "certfile \(dir)/cert.pem\nkeyfile \(dir)/key.pem")
        var o = MQTTClient.Options(host: "127.0.0.1", port: Int(broker.port), clientID: "tls")
        o.tls = true
        o.timeoutSeconds = 5
        var trusting = o
        trusting.caFile = dir + "/cert.pem"
        let c = try MQTTClient(options: trusting)
        try c.connect()
        let acks = try c.waitForAcks([try c.publish(topic: "healthgate/tls", payload: Array("ok".utf8), qos: 1, retain: false)], qos: 1)
        #expect(acks.count == 1)
        c.disconnect()
        let stranger = try MQTTClient(options: o)
        #expect(throws: MQTTClient.Failure.self) { try stranger.connect() }
    }
}

extension MQTTClientTests {
    /// A busy serve has more than 1024 descriptors open; the client must work with a socket
    /// numbered past FD_SETSIZE (mosquitto_loop's select(2) refused it: "Invalid function
    /// arguments provided" under a parallel test run).
    @Test func worksWithASocketNumberedPast1024() throws {
        let broker = try DatabaseProcess.mosquitto()
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        while held.last.map({ $0 < 1100 }) ?? true {
            let fd = open("/dev/null", O_RDONLY)
            guard fd >= 0 else { break }
            held.append(fd)
        }
        try #require((held.last ?? 0) >= 1100, "cannot open enough descriptors here")
        let c = try client(broker, id: "many-fds")
        try c.connect()
        #expect(c.socket >= 1024)
        let mids = try (0..<10).map { try c.publish(topic: "healthgate/fd/\($0)", payload: Array("x".utf8), qos: 1, retain: false) }
        #expect(try c.waitForAcks(mids, qos: 1).count == 10)
        c.disconnect()
    }
}

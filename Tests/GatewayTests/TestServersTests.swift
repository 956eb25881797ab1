import Foundation
@testable import HealthgateTesting
import Testing

/// The real servers the sink tests run against start, answer, and stop: mosquitto (for the MQTT
/// sink) and PostgreSQL (for the postgres sink), as Debian packages them.
@Suite(.serialized) struct TestServersTests {
    @Test func mosquittoCarriesAMessage() throws {
        let broker = try DatabaseProcess.mosquitto()
        let sub = Process()
        sub.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_sub")
        sub.arguments = ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "healthgate/test", "-C", "1"]
        let out = Pipe()
        sub.standardOutput = out
        try sub.run()
        // Retained, so it reaches the subscriber whenever that one has subscribed.
        let (rc, _) = try DatabaseProcess.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t",
                                                                         "healthgate/test", "-r", "-m", "hello"])
        #expect(rc == 0)
        #expect(sub.waitUntilExit(within: 20), "mosquitto_sub got nothing")
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text == "hello\n")
    }

    @Test func postgresAnswersAQuery() throws {
        let db = try DatabaseProcess.postgres()
        _ = try db.psql("CREATE TABLE t (k text PRIMARY KEY, v double precision)")
        _ = try db.psql("INSERT INTO t VALUES ('a', 40), ('b', 2)")
        #expect(try db.psql("SELECT sum(v)::int FROM t") == "42")
    }
}

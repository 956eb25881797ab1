import Foundation
@testable import HealthgateTesting
import Testing

/// The real servers the sink tests run against start, answer, and stop: mosquitto (for the MQTT
/// sink) and PostgreSQL (for the postgres sink), as Debian packages them.
@Suite(.serialized) struct TestServersTests {
    /// A program a test runs cannot hold the run: past its timeout it is killed with what it
    /// started, whether it hangs itself or leaves a child behind (Foundation's Process counts a
    /// program as running while a child it left holds on: before, a pipe read waited for it too).
    @Test func aProgramATestRunsEndsByItsTimeoutWhateverItLeavesBehind() throws {
        var started = Date()
        let (_, said) = try Command.run("/bin/sh", ["-c", "sleep 60 & echo started"], timeout: 2)
        #expect(said.hasPrefix("started\n"), "\(said)")
        #expect(Date().timeIntervalSince(started) < 10)
        started = Date()
        let (hung, text) = try Command.run("/bin/sh", ["-c", "sleep 60 & sleep 60"], timeout: 1)
        #expect(hung != 0 && text.contains("was killed"), "\(text)")
        #expect(Date().timeIntervalSince(started) < 10)
        // What leaves for a session of its own (as `script` does for its terminal: CI once hung
        // on a serve left there) is out of the group's reach; it is found by its environment.
        started = Date()
        let mark = "600.\(UInt32.random(in: 1 ... 999_999))"
        let (_, escaped) = try Command.run("/bin/sh", ["-c", "setsid sleep \(mark) & sleep 60"], timeout: 1)
        #expect(escaped.contains("was killed"), "\(escaped)")
        #expect(Date().timeIntervalSince(started) < 15)
        let (_, left) = try Command.run("/bin/sh", ["-c", "pgrep -f '[s]leep \(mark)' || true"], timeout: 10)
        #expect(left.isEmpty, "still running: \(left)")
    }

    @Test func mosquittoCarriesAMessage() throws {
        let broker = try DatabaseProcess.mosquitto()
        let sub = Process()
        sub.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_sub")
        sub.arguments = ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "healthgate/test", "-C", "1"]
        let out = Pipe()
        sub.standardOutput = out
        try sub.run()
        // Retained, so it reaches the subscriber whenever that one has subscribed.
        let (rc, _) = try DatabaseProcess.run(
            "/usr/bin/mosquitto_pub",
            [
                "-h", "127.0.0.1", "-p", "\(broker.port)", "-t",
                "healthgate/test", "-r", "-m", "hello"
            ])
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

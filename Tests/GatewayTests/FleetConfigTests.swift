import Fleet
import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Testing
import YAMLConfig

/// `fleet:` in the config, and `serve --role` (docs/fleet.md).
@Suite struct FleetConfigTests {
    let logger = Logger(component: "test", sink: MemoryLogSink())
    static let base = """
        data_dir: /tmp/x
        receivers:
          phone: {kind: syncky, auth: {type: bearer, token: abcdefghijklmnopqrstuvwxyz123456}}
        routes:
          - from: [phone]
            to: [archive]
        sinks:
          archive: {kind: file, path: "/tmp/x/{device}.ndjson"}

        """

    func load(_ fleet: String, env: [String: String] = [:]) -> Result<Topology, ConfigProblems> {
        Result { () throws(ConfigProblems) in
            try ConfigLoader.load(text: Self.base + fleet, file: "healthgate.yaml", environment: env, logger: logger)
        }
    }

    func problems(_ fleet: String) -> [String] {
        if case .failure(let e) = load(fleet) { return e.problems.map(\.description) }
        return []
    }

    @Test func theFleetOfTheDesignIsCheckedIntoItsSettings() throws {
        let t = try load(
            """
            fleet:
              brokers: ["amqp://healthgate:${AMQP_PASSWORD}@rmq1:5672/%2f", "amqp://healthgate:${AMQP_PASSWORD}@rmq2:5672/%2f"]
              state: "postgres://healthgate@db/healthgate"
              partitions: 16
            """, env: ["AMQP_PASSWORD": "s3cret"]
        ).get()
        let f = try #require(t.fleet)
        #expect(f.brokers.map(\.host) == ["rmq1", "rmq2"])
        #expect(f.brokers[0].password == "s3cret")
        #expect(f.state == "postgres://healthgate@db/healthgate")
        #expect(f.partitions == 16)
        // Without it: one machine.
        #expect(try load("").get().fleet == nil)
        // partitions may be left out.
        let d = try load("fleet: {brokers: [\"amqp://h\"], state: \"postgres://db/x\"}").get()
        #expect(d.fleet?.partitions == FleetSettings.defaultPartitions)
    }

    @Test func eachWrongFleetKeyIsNamedWithWhereItIsAndShowsNoPassword() {
        let p = problems(
            """
            fleet:
              brokers: ["amqp://u:hunter2@rmq1/%2f", "http://u:hunter2@rmq2/", "amqp://u:hunter2@rmq1/%2f"]
              state: "mysql://u:hunter2@db/x"
              partitions: 0
            """)
        #expect(p.count == 4, "\(p)")
        #expect(
            p.contains { $0.contains("healthgate.yaml:10:42: fleet.brokers[1]: not an AMQP URL (it must start with amqp:// or amqps://)") },
            "\(p)")
        #expect(
            p.contains { $0.contains("healthgate.yaml:10:68: fleet.brokers[2]: amqp://u:***@rmq1:5672/%2f is in the list twice") }, "\(p)")
        #expect(p.contains { $0.contains("fleet.state: state is a PostgreSQL URL") }, "\(p)")
        #expect(p.contains { $0.contains("fleet.partitions: partitions is 1 to 1024") }, "\(p)")
        #expect(!p.joined().contains("hunter2"))
        let missing = problems("fleet: {partitions: 4}")
        #expect(missing.contains { $0.contains("fleet.brokers: fleet needs brokers") }, "\(missing)")
        #expect(missing.contains { $0.contains("fleet.state: fleet needs state") }, "\(missing)")
        let unknown = problems("fleet: {brokers: [\"amqp://h\"], state: \"postgres://db/x\", replicas: 3}")
        #expect(unknown.contains { $0.contains("replicas") }, "\(unknown)")
    }

    @Test func serveRefusesAWrongRoleAndARoleWithoutAFleet() throws {
        let dir = ServeProcess.makeTempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let plain = dir + "/one.yaml", fleet = dir + "/fleet.yaml"
        try Self.base.replacing("/tmp/x", with: dir).write(toFile: plain, atomically: true, encoding: .utf8)
        try (Self.base.replacing("/tmp/x", with: dir) + "fleet: {brokers: [\"amqp://u:hunter2@h\"], state: \"postgres://db/x\"}")
            .write(toFile: fleet, atomically: true, encoding: .utf8)
        let bin = ServeProcess.binary
        let (badRole, badRoleOut) = try Command.run(bin, ["serve", "--config", plain, "--role", "worker"], timeout: 30)
        #expect(badRole == 2)
        #expect(badRoleOut.contains("--role is ingest, deliver or all"), "\(badRoleOut)")
        let (noFleet, noFleetOut) = try Command.run(bin, ["serve", "--config", plain, "--role", "ingest"], timeout: 30)
        #expect(noFleet == 2)
        #expect(noFleetOut.contains("needs a fleet: section"), "\(noFleetOut)")
        let (check, checkOut) = try Command.run(bin, ["check", "--config", fleet], timeout: 30)
        #expect(check == 0, "\(checkOut)")
        #expect(checkOut.contains("fleet: 1 broker(s) (amqp://u:***@h:5672/%2f), 16 partitions"), "\(checkOut)")
        #expect(!checkOut.contains("hunter2"))
    }

    /// A deliver machine no broker takes says so at once, then every 20 s, not every 2 s, and
    /// never shows the password.
    @Test func aWorkerWithoutABrokerSaysSoWithoutFloodingTheLog() throws {
        let closed = ScriptedEndpoint.freePort()
        let config =
            Self.base.replacing("/tmp/x", with: "DATA_DIR").replacing("data_dir: DATA_DIR", with: "listen: 127.0.0.1:0\ndata_dir: DATA_DIR")
            + "fleet: {brokers: [\"amqp://u:hunter2@127.0.0.1:\(closed)\"], state: \"postgres://u:pw@127.0.0.1:\(closed)/x\"}"
        let serve = try ServeProcess(config: config, arguments: ["--role", "deliver"])
        defer { serve.stop() }
        #expect(ServeProcess.eventually(10) { serve.stderrText.contains("no broker takes its consumer") })
        sleep(7)
        let said = serve.stderrText.components(separatedBy: "no broker takes its consumer").count - 1
        #expect(said == 1, "\(serve.stderrText)")
        #expect(!serve.stderrText.contains("hunter2"))
    }
}

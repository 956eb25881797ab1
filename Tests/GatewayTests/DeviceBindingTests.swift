import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Posix
import Testing

/// A receiver's credentials write only for the devices it is bound to (`devices:`): a HealthSync
/// token with someone else's X-Device-Id used to add to, and delete from, that person's data.
@Suite(.serialized) struct DeviceBindingTests {
    static func config(_ devices: String) -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          healthsync:
            kind: healthsync
            auth: {type: bearer, token: hs-token}
            devices: \(devices)
          ingest:
            kind: ingest
            auth: {type: bearer, token: hs-token}
            devices: \(devices)
        routes:
          - {name: all, from: ["*"], to: [archive]}
        sinks:
          archive: {kind: file, path: "archive.ndjson", batch: {max_wait: 10ms}}
        """
    }

    static func sync(_ device: String, uuid: String, delete: Bool = false) -> (headers: [(String, String)], body: [UInt8]) {
        let body =
            delete
            ? #"{"schema_version": 2, "deletions": [{"id": "healthkit:\#(uuid)", "kind": "metric"}]}"#
            : #"{"schema_version": 2, "metrics": [{"id": "healthkit:\#(uuid)", "type": "stepCount", "value": 5, "unit": "count", "start_date": "2026-10-14T07:01:00Z"}]}"#
        return (
            [("Authorization", "Bearer hs-token"), ("Content-Type", "application/json"), ("X-Device-Id", device)],
            Array(body.utf8)
        )
    }

    static func chunk(_ device: String) -> [UInt8] {
        Array(
            #"{"device_id": "\#(device)", "samples": [{"source_uuid": "C-\#(device)", "data_type": "stepCount", "ts": "2026-08-11T07:15:00Z", "value": 3, "unit": "count"}]}"#
                .utf8)
    }

    @Test func aListedReceiverRefusesWritesAndDeletesForOtherDevices() throws {
        let serve = try ServeProcess(config: Self.config("[alice-iphone, \"family-*\"]"))
        let c = serve.client()
        let alice = Self.sync("alice-iphone", uuid: "A-1")
        #expect(try c.request("POST", "/api/apple-health/sync", headers: alice.headers, body: alice.body).status == 200)
        let kid = Self.sync("family-ipad", uuid: "K-1")
        #expect(try c.request("POST", "/api/apple-health/sync", headers: kid.headers, body: kid.body).status == 200)
        // Mallory holds the same token but is not Alice: neither her samples nor her deletion of
        // Alice's record are taken.
        let forged = Self.sync("mallory", uuid: "M-1")
        let r = try c.request("POST", "/api/apple-health/sync", headers: forged.headers, body: forged.body)
        #expect(r.status == 403, "\(r.text)")
        #expect(r.header("content-type") == "application/problem+json")
        #expect(r.text.contains("mallory") && r.text.contains("receivers.healthsync.devices"), "\(r.text)")
        let delete = Self.sync("mallory", uuid: "A-1", delete: true)
        #expect(try c.request("POST", "/api/apple-health/sync", headers: delete.headers, body: delete.body).status == 403)
        let ingest = try c.request("POST", "/v1/ingest", headers: [("Authorization", "Bearer hs-token")], body: Self.chunk("mallory"))
        #expect(ingest.status == 403, "\(ingest.text)")
        #expect(
            try c.request(
                "POST", "/v1/ingest", headers: [("Authorization", "Bearer hs-token")],
                body: Self.chunk("alice-iphone")
            ).status == 202)
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = serve.ndjson(under: ""); return got.count == 3
            }, "\(got.count)")
        #expect(Set(got.compactMap { $0["device"] as? String }) == ["alice-iphone", "family-ipad"])
        #expect(!got.contains { $0["op"] as? String == "delete" })
        // Counted as refused for the device, per receiver.
        let metrics = try c.request("GET", "/metrics").text
        #expect(metrics.contains(#"healthgate_requests_refused_total{receiver="healthsync",reason="device"} 2"#), "\(metrics)")
        #expect(metrics.contains(#"healthgate_requests_refused_total{receiver="ingest",reason="device"} 1"#))
        #expect(
            ServeProcess.eventually { serve.stderrText.contains("a device the receiver's devices: does not allow") },
            "\(serve.stderrText)")
    }

    @Test func firstSeenBindsTheFirstDeviceAndKeepsItAcrossARestart() throws {
        let serve = try ServeProcess(config: Self.config("first_seen"))
        let c = serve.client()
        let first = Self.sync("phone-A", uuid: "A-1")
        #expect(try c.request("POST", "/api/apple-health/sync", headers: first.headers, body: first.body).status == 200)
        let other = Self.sync("phone-B", uuid: "B-1")
        let r = try c.request("POST", "/api/apple-health/sync", headers: other.headers, body: other.body)
        #expect(r.status == 403 && r.text.contains("phone-A") && r.text.contains("first_seen"), "\(r.text)")
        // Each receiver binds its own first device.
        #expect(
            try c.request("POST", "/v1/ingest", headers: [("Authorization", "Bearer hs-token")], body: Self.chunk("phone-B")).status == 202)
        let file = FileIO.join(serve.dataDir, "devices/healthsync")
        #expect(String(decoding: try FileIO.readAll(file), as: UTF8.self) == "phone-A\n")
        var st = stat()
        #expect(stat(file, &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(ServeProcess.eventually { serve.stderrText.contains("bound to device phone-A") }, "\(serve.stderrText)")
        serve.stop()
        let again = try ServeProcess(config: Self.config("first_seen"), dataDir: serve.dataDir)
        let c2 = again.client()
        #expect(try c2.request("POST", "/api/apple-health/sync", headers: other.headers, body: other.body).status == 403)
        #expect(try c2.request("POST", "/api/apple-health/sync", headers: first.headers, body: first.body).status == 200)
        #expect(
            try c2.request("POST", "/v1/ingest", headers: [("Authorization", "Bearer hs-token")], body: Self.chunk("phone-A")).status == 403
        )
    }

    /// A HealthSync export resent under another device id is refused too, not answered as stored.
    @Test func aResentExportIsCheckedForItsDevice() throws {
        let serve = try ServeProcess(config: Self.config("[phone-A]"))
        let c = serve.client()
        let body = Array(
            #"{"schema_version": 2, "export_id": "e1", "metrics": [{"id": "healthkit:X", "type": "stepCount", "value": 5, "unit": "count", "start_date": "2026-10-14T07:01:00Z"}]}"#
                .utf8)
        let a = Self.sync("phone-A", uuid: "unused").headers
        #expect(try c.request("POST", "/api/apple-health/sync", headers: a, body: body).status == 200)
        #expect(try c.request("POST", "/api/apple-health/sync", headers: a, body: body).json?["duplicate"] as? Bool == true)
        let b = Self.sync("phone-B", uuid: "unused").headers
        #expect(try c.request("POST", "/api/apple-health/sync", headers: b, body: body).status == 403)
    }

    @Test func aFirstRequestForSeveralDevicesBindsNone() throws {
        let dir = ServeProcess.makeTempDir("gate")
        let gate = DeviceGate(receiver: "r", binding: .firstSeen, dataDir: dir, logger: Logger(component: "t", sink: MemoryLogSink()))
        #expect(gate.refusal(devices: ["a", "b"])?.status == 403)
        #expect(!FileIO.exists(FileIO.join(dir, "devices/r")))
        #expect(gate.refusal(devices: []) == nil)
        #expect(gate.refusal(devices: ["b"]) == nil)
        #expect(gate.refusal(devices: ["b", "a"])?.status == 403)
        #expect(gate.refusal(devices: ["a"])?.status == 403)
        #expect(gate.refusal(devices: ["b"]) == nil)
    }

    @Test func devicesIsCheckedInTheConfig() {
        let logger = Logger(component: "test", sink: MemoryLogSink())
        func problems(_ devices: String) -> [String] {
            do {
                _ = try ConfigLoader.load(
                    text: Self.config(devices).replacingOccurrences(of: "DATA_DIR", with: "/tmp/x"),
                    file: "healthgate.yaml", environment: [:], logger: logger)
                return []
            } catch { return error.problems.map(\.description) }
        }
        #expect(problems("first_seen").isEmpty && problems("any").isEmpty && problems("[a, \"b-*\"]").isEmpty)
        #expect(problems("[]").first?.contains("refuse every request") == true, "\(problems("[]"))")
        #expect(problems("sometimes").first?.contains("healthgate.yaml:7") == true, "\(problems("sometimes"))")
        #expect(problems("{a: 1}").first?.contains("devices is any, first_seen, or a list") == true)
    }
}

import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
import Testing

/// `tls: {client_ca}`: the ingest API's "behind mutual TLS", with a handshake that fails for a
/// client without a good certificate; receivers that take only some certificates; and TLS ≥ 1.2
/// with forward-secret suites only (RFC 8996).
@Suite(.serialized) struct MutualTLSTests {
    static func curl(_ args: String) throws -> (Int32, String) {
        try Command.run("/bin/sh", ["-c", "curl -s -o /dev/null -w '%{http_code}' --max-time 10 " + args + " 2>/dev/null"], timeout: 30)
    }

    static let chunk =
        #"{"device_id": "alice-phone", "samples": [{"source_uuid": "S-1", "data_type": "stepCount", "ts": "2026-08-11T07:15:00Z", "value": 3, "unit": "count"}]}"#

    @Test func aClientWithoutAGoodCertificateFailsItsHandshake() throws {
        let dir = ServeProcess.makeTempDir("mtls")
        try TestCertificates.make(in: dir)
        try Self.chunk.write(toFile: dir + "/chunk.json", atomically: true, encoding: .utf8)
        let carol = try TestCertificates.fingerprint("carol", in: dir)
        let serve = try ServeProcess(
            config: """
                listen: 127.0.0.1:0
                data_dir: DATA_DIR
                tls: {cert: \(dir)/server.pem, key: \(dir)/server.key, client_ca: \(dir)/ca.pem}
                receivers:
                  ingest:
                    kind: ingest
                    auth: {type: client_cert, subjects: ["CN=alice,O=Example"]}
                  hae:
                    kind: hae
                    device: carol-phone
                    auth: {type: bearer, token: hae-token, sha256: ["\(carol)"]}
                routes:
                  - {name: all, from: ["*"], to: [archive]}
                sinks:
                  archive: {kind: file, path: "archive.ndjson", batch: {max_wait: 10ms}}
                """)
        let url = "https://localhost:\(serve.port)"
        let post = "--cacert \(dir)/ca.pem -H 'Content-Type: application/json' --data-binary @\(dir)/chunk.json \(url)/v1/ingest"
        func with(_ name: String) -> String { "--cert \(dir)/\(name).pem --key \(dir)/\(name).key " }
        // The right certificate: taken.
        let (rc, status) = try Self.curl(with("alice") + post)
        #expect(rc == 0 && status == "202", "\(rc) \(status)")
        // None, another CA's (with alice's very subject), an expired one: no HTTP at all.
        for who in ["", with("mallory"), with("expired")] {
            let (rc, status) = try Self.curl(who + post)
            #expect(rc != 0 && status == "000", "\(who): \(rc) \(status)")
        }
        // A good certificate that this receiver does not take: 403, nothing stored.
        let (crc, cstatus) = try Self.curl(with("carol") + post)
        #expect(crc == 0 && cstatus == "403", "\(cstatus)")
        // Carol's fingerprint opens the hae receiver, with its token as well.
        let hae =
            "--cacert \(dir)/ca.pem -H 'Content-Type: application/json' "
            + #"--data-binary '{"data": {"metrics": [{"name": "step_count", "units": "count", "data": [{"date": "2026-08-11 07:00:00 +0000", "qty": 5}]}]}}' "#
            + "\(url)/api/data"
        #expect(try Self.curl(with("carol") + "-H 'Authorization: Bearer hae-token' " + hae).1 == "200")
        #expect(try Self.curl(with("carol") + hae).1 == "401")
        #expect(try Self.curl(with("alice") + "-H 'Authorization: Bearer hae-token' " + hae).1 == "403")
        var got: [[String: Any]] = []
        #expect(
            ServeProcess.eventually {
                got = serve.ndjson(under: ""); return got.count == 2
            }, "\(got.count)")
        #expect(Set(got.compactMap { $0["device"] as? String }) == ["alice-phone", "carol-phone"])
        // openssl s_client as well: no certificate, no session.
        let (src, _) = try Command.run(
            "/bin/sh",
            [
                "-c",
                "echo | openssl s_client -connect 127.0.0.1:\(serve.port) -CAfile \(dir)/ca.pem "
                    + "-servername localhost -verify_return_error 2>&1; "
                    + "printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n' | openssl s_client -quiet "
                    + "-connect 127.0.0.1:\(serve.port) -CAfile \(dir)/ca.pem 2>/dev/null | grep -q '200 OK'"
            ],
            timeout: 30)
        #expect(src != 0)
    }

    @Test func oldVersionsAndStaticRSAAreRefusedByDefault() throws {
        let dir = ServeProcess.makeTempDir("tlsv")
        try TestCertificates.make(in: dir)
        func serve(_ extra: String) throws -> ServeProcess {
            try ServeProcess(
                config: """
                    listen: 127.0.0.1:0
                    data_dir: DATA_DIR
                    tls: {cert: \(dir)/rsa-server.pem, key: \(dir)/rsa-server.key\(extra)}
                    receivers: {hae: {kind: hae, auth: {type: bearer, token: t}}}
                    routes: [{name: all, from: ["*"], to: [archive]}]
                    sinks: {archive: {kind: file, path: "a.ndjson"}}
                    """)
        }
        let s = try serve("")
        let url = "--cacert \(dir)/rsa-server.pem https://localhost:\(s.port)/healthz"
        #expect(try Self.curl(url).1 == "200")
        #expect(try Self.curl("--tls-max 1.2 " + url).1 == "200")
        #expect(try Self.curl("--tlsv1.1 --tls-max 1.1 --ciphers 'DEFAULT@SECLEVEL=0' " + url).1 == "000")
        #expect(try Self.curl("--tlsv1.0 --tls-max 1.0 --ciphers 'DEFAULT@SECLEVEL=0' " + url).1 == "000")
        #expect(try Self.curl("--tls-max 1.2 --ciphers AES128-GCM-SHA256 " + url).1 == "000")
        #expect(try Self.curl("--tls-max 1.2 --ciphers 'AES128-SHA@SECLEVEL=0' " + url).1 == "000")
        s.stop()
        // Configurable: TLS 1.3 only, or GnuTLS's own priority string (here: the old defaults).
        let s13 = try serve(", min_version: \"1.3\"")
        #expect(try Self.curl("--tls-max 1.2 --cacert \(dir)/rsa-server.pem https://localhost:\(s13.port)/healthz").1 == "000")
        #expect(try Self.curl("--cacert \(dir)/rsa-server.pem https://localhost:\(s13.port)/healthz").1 == "200")
        s13.stop()
        let old = try serve(", priorities: \"NORMAL\"")
        #expect(
            try Self.curl(
                "--tls-max 1.2 --ciphers AES128-GCM-SHA256 --cacert \(dir)/rsa-server.pem "
                    + "https://localhost:\(old.port)/healthz"
            ).1 == "200")
    }

    @Test func theConfigIsChecked() throws {
        let dir = ServeProcess.makeTempDir("tlsc")
        try TestCertificates.make(in: dir)
        let logger = Logger(component: "test", sink: MemoryLogSink())
        func problems(_ tls: String, auth: String = "{type: bearer, token: t}") -> [String] {
            let text = """
                listen: 127.0.0.1:0
                data_dir: \(dir)/data
                \(tls)
                receivers: {hae: {kind: hae, auth: \(auth)}}
                routes: [{name: all, from: ["*"], to: [archive]}]
                sinks: {archive: {kind: file, path: "a.ndjson"}}
                """
            do { _ = try ConfigLoader.load(text: text, file: "healthgate.yaml", environment: [:], logger: logger); return [] } catch {
                return error.problems.map(\.description)
            }
        }
        let base = "tls: {cert: \(dir)/server.pem, key: \(dir)/server.key"
        #expect(
            problems(
                base + ", client_ca: \(dir)/ca.pem}",
                auth: "{type: client_cert, sha256: [\"\(try TestCertificates.fingerprint("alice", in: dir))\"]}"
            ).isEmpty)
        #expect(problems(base + ", client_ca: \(dir)/nope.pem}").first?.contains("tls.client_ca \(dir)/nope.pem cannot be read") == true)
        #expect(problems(base + ", client_ca: \(dir)/server.key}").first?.contains("holds no PEM certificate") == true)
        #expect(problems(base + ", min_version: \"1.1\"}").first?.contains("RFC 8996") == true)
        #expect(
            problems(base + ", priorities: \"NORMAL:+BOGUS\"}").first?.contains("goes wrong at \"+BOGUS\"") == true,
            "\(problems(base + ", priorities: \"NORMAL:+BOGUS\"}"))")
        #expect(problems(base + "}", auth: "{type: client_cert, subjects: [\"CN=alice\"]}").first?.contains("client_ca") == true)
        #expect(
            problems(base + ", client_ca: \(dir)/ca.pem}", auth: "{type: client_cert}").first?.contains("needs \"subjects\" or \"sha256\"")
                == true)
        #expect(
            problems(base + ", client_ca: \(dir)/ca.pem}", auth: "{type: client_cert, sha256: [abc]}").first?.contains("not a SHA-256")
                == true)
    }
}

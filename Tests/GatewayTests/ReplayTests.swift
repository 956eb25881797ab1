import CanonicalJSON
import Foundation
@testable import Gateway
import HealthgateCore
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// `healthgate replay`: dead letters go out again once their cause is fixed; archives can be
/// delivered again to any sink; both while serve runs.
@Suite(.serialized) struct ReplayTests {
    @Test func deadLettersAreSentAgainOnceTheCauseIsFixed() throws {
        let endpoint = try ScriptedEndpoint { r in
            ScriptedEndpoint.uuids(r).contains("poison") ? HTTPResponse(status: 422, body: Array("no".utf8)) : HTTPResponse(status: 200)
        }
        let config = QueueLimitTests.config(port: endpoint.port, queue: "")
        let serve = try ServeProcess(config: config)
        let body = Vectors.syncBody(samples: ["good-1", "poison", "good-2"].map(CrashTests.sample))
        #expect(
            try serve.client().request(
                "POST", "/hook", headers: LiveServeTests.signedHeaders(body),
                body: Array(body.utf8)
            ).status == 200)
        let deadPath = serve.dataDir + "/sinks/hook/dead-letters.ndjson"
        #expect(ServeProcess.eventually { FileManager.default.fileExists(atPath: deadPath) })
        #expect(Set(endpoint.requests.flatMap(ScriptedEndpoint.uuids)).isSuperset(of: ["good-1", "good-2"]))
        // The endpoint is fixed; the dead letters go out again, while serve runs.
        endpoint.answer { _ in HTTPResponse(status: 200) }
        let r = try CLITests.run(["replay", deadPath, "--sink", "hook", "--config", serve.configPath])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("hook: 1 record(s) delivered"), "\(r.out)")
        #expect(endpoint.requests.last.map(ScriptedEndpoint.uuids) == ["poison"])
        #expect(!FileManager.default.fileExists(atPath: deadPath))
        #expect(try FileManager.default.contentsOfDirectory(atPath: serve.dataDir + "/sinks/hook").allSatisfy { !$0.contains("replaying") })
    }

    /// An archive replayed into a data dir no serve has made yet (a new machine, a new sink):
    /// the dir is made (0700) and the records delivered, not "open …/lock: No such file".
    @Test func aReplayMakesADataDirNotThereYet() throws {
        let base = ServeProcess.makeTempDir("fresh")
        let dataDir = base + "/data"
        let archive = base + "/archive.ndjson"
        let lines = CanonicalCodec.encodeLines([SinkComplianceTests.record("fresh-1"), SinkComplianceTests.record("fresh-2", second: 1)])
        try Data(lines).write(to: URL(fileURLWithPath: archive))
        let config = base + "/config.yaml"
        try """
        data_dir: \(dataDir)
        receivers:
          phone: {kind: syncky, path: /hook, auth: {type: bearer, token: \(Vectors.token)}}
        sinks:
          copy: {kind: file, path: copy.ndjson}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let r = try CLITests.run(["replay", archive, "--sink", "copy", "--config", config])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("copy: 2 record(s) delivered"), "\(r.out) \(r.err)")
        let mode = try FileManager.default.attributesOfItem(atPath: dataDir)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        #expect(try String(contentsOfFile: dataDir + "/copy.ndjson", encoding: .utf8).contains("fresh-2"))
    }

    @Test func anArchiveCanBeDeliveredAgainToOneSink() throws {
        let endpoint = try ScriptedEndpoint { _ in HTTPResponse(status: 200) }
        let serve = try ServeProcess(config: QueueLimitTests.config(port: endpoint.port, queue: ""))
        var sent: [String] = []
        for i in 0..<3 {
            let uuids = (0..<30).map { "arch-\(i)-\($0)" }
            sent += uuids
            let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample))
            #expect(
                try serve.client().request(
                    "POST", "/hook", headers: LiveServeTests.signedHeaders(body),
                    body: Array(body.utf8)
                ).status == 200)
        }
        #expect(ServeProcess.eventually { serve.ndjson(under: "").compactMap { $0["uuid"] as? String }.count == 90 })
        // The webhook's own deliveries are over before the replay's are counted.
        #expect(ServeProcess.eventually { endpoint.requests.flatMap(ScriptedEndpoint.uuids).count == 90 })
        let before = endpoint.requests.count
        let r = try CLITests.run(["replay", serve.dataDir + "/archive.ndjson", "--sink", "hook", "--config", serve.configPath])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("hook: 90 record(s) delivered"), "\(r.out)")
        // Not on a terminal: progress by tenths, then a summary with the rate.
        #expect(
            r.err.contains("replay: 100%, 90 records") && r.err.contains("replay: 90 records in ") && r.err.contains(" records/s)"),
            "\(r.err)")
        #expect(Array(endpoint.requests.dropFirst(before).flatMap(ScriptedEndpoint.uuids)) == sent)
        // On a terminal (util-linux `script` gives it one): the bar, with records and rate.
        let command = [ServeProcess.binary, "replay", serve.dataDir + "/archive.ndjson", "--sink", "hook", "--config", serve.configPath]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        let (trc, tty) = try DatabaseProcess.run("/usr/bin/script", ["-qfec", command, "/dev/null"], timeout: 60)
        #expect(trc == 0 && tty.contains("[##############################] 100%  90 records, ") && tty.contains(" records/s"), "\(tty)")
        // The journal still holds them too (the newest segment is always kept; journal.retention
        // keeps older ones): replay from there, or only what came after a time.
        let fromJournal = try CLITests.run(["replay", "--journal", "--sink", "hook", "--config", serve.configPath])
        #expect(fromJournal.status == 0, "\(fromJournal.err)")
        #expect(fromJournal.out.contains("hook: 90 record(s) delivered"), "\(fromJournal.out)")
        let none = try CLITests.run([
            "replay", "--journal", "--since", "2100-01-01T00:00:00Z", "--sink", "hook",
            "--config", serve.configPath
        ])
        #expect(none.out.contains("hook: 0 record(s) delivered"), "\(none.out)")
        #expect(try CLITests.run(["replay", "--config", serve.configPath]).status == 2)
        // Asking for a sink that does not exist says which ones do.
        let wrong = try CLITests.run(["replay", serve.dataDir + "/archive.ndjson", "--sink", "hok", "--config", serve.configPath])
        #expect(wrong.status == 2)
        #expect(wrong.err.contains("did you mean \"hook\""))
    }
}

import Foundation
import Glibc
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// A full disk never corrupts anything: requests get 503 with Retry-After and keep their data
/// on the phone, nothing acknowledged is lost, and the gateway recovers by itself when space
/// returns. The data dir is a small tmpfs (mounting it needs root, as CI runs).
@Suite(.serialized) struct DiskFullTests {
    static func sh(_ command: String) -> Int32 {
        (try? Command.run("/bin/sh", ["-c", command], timeout: 60))?.0 ?? -1
    }

    @Test func aFullDiskAnswers503AndLosesNothingAcknowledged() throws {
        try #require(getuid() == 0, "this test mounts a tmpfs and needs root (CI runs as root)")
        let mountPoint = ServeProcess.makeTempDir("diskfull")
        #expect(Self.sh("mount -t tmpfs -o size=6m tmpfs \(mountPoint)") == 0)
        defer { _ = Self.sh("umount -l \(mountPoint)") }
        let dataDir = mountPoint + "/data"
        // Short retries: the archive fails while the disk is full, and the default backoff (up to
        // 5 min) would make "recovers by itself" a matter of minutes under a loaded CI machine.
        let config = LiveServeTests.config.replacingOccurrences(
            of: "batch: {max_wait: 10ms}}",
            with: "batch: {max_wait: 10ms}, retry: {initial: 100ms, max: 1s}}")
        #expect(config != LiveServeTests.config)
        let serve = try ServeProcess(config: config, dataDir: dataDir)
        // Leave about 1.5 MB: the journal and the archive both need room.
        #expect(Self.sh("head -c 3000000 /dev/zero > \(mountPoint)/filler") == 0)
        let c = serve.client()
        var acked: [String] = []
        var refused: RawHTTPClient.Response?
        for i in 0..<200 where refused == nil {
            let uuids = (0..<100).map { "full-\(i)-\($0)" }
            let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample))
            let r = try c.request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
            if r.status == 200 { acked += uuids } else { refused = r }
        }
        let full = try #require(refused, "the disk never filled up")
        #expect(full.status == 503)
        #expect(full.header("Retry-After") != nil)
        #expect(full.header("Content-Type") == "application/problem+json")
        #expect(full.text.contains("disk is full"))
        #expect(!acked.isEmpty)
        // Space returns: requests are taken again, and every acknowledged sample reaches the archive.
        #expect(Self.sh("rm \(mountPoint)/filler") == 0)
        var later: [String] = []
        for i in 0..<3 {
            let uuids = (0..<100).map { "after-\(i)-\($0)" }
            let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample))
            let r = try c.request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
            #expect(r.status == 200, "\(r.text)")
            if r.status == 200 { later += uuids }
        }
        let want = Set(acked + later)
        var archived = Set<String>()
        #expect(
            ServeProcess.eventually(20) {
                archived = Set(serve.ndjson(under: "archive").compactMap { $0["uuid"] as? String })
                return want.isSubset(of: archived)
            }, "\(want.subtracting(archived).count) acknowledged samples are missing")
        // And a restart finds a journal with no damage.
        serve.stop(signal: SIGKILL)
        let again = try ServeProcess(config: config, dataDir: dataDir)
        #expect(!again.stderrText.contains("damage"))
        again.stop()
    }
}

import Foundation
import Glibc
@testable import HealthgateTesting
@testable import Pipeline
import SinkKit
import Testing

/// The promise: a sample acknowledged with 2xx is never lost, whatever happens to the process.
@Suite(.serialized) struct CrashTests {
    static func sample(_ uuid: String) -> String {
        #"{"uuid":"\#(uuid)","type":"heart_rate","value":61,"unit":"count/min","start":"2026-10-14T07:01:00Z","end":"2026-10-14T07:01:00Z","source":{"app":"com.apple.Health","device":"Apple Watch"}}"#
    }

    @Test func everyAcknowledgedSampleSurvivesSIGKILL() throws {
        let serve = try ServeProcess(config: LiveServeTests.config)
        let port = serve.port
        let acked = LockedSet()
        let stop = LockedFlag()
        let group = DispatchGroup()
        for t in 0..<6 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                let c = RawHTTPClient(port: port)
                var i = 0
                while !stop.isSet {
                    let uuids = (0..<25).map { "t\(t)-r\(i)-s\($0)" }
                    let body = Vectors.syncBody(samples: uuids.map(CrashTests.sample))
                    guard
                        let r = try? c.request(
                            "POST", "/hook", headers: LiveServeTests.signedHeaders(body),
                            body: Array(body.utf8))
                    else { break }
                    if r.status == 200 { acked.insert(uuids) } else { break }
                    i += 1
                }
            }
        }
        // Let the clients get going, then pull the plug mid-flight.
        let deadline = Date().addingTimeInterval(10)
        while acked.count < 2_000 && Date() < deadline { usleep(5_000) }
        serve.stop(signal: SIGKILL)
        stop.set()
        group.wait()
        let before = acked.snapshot
        #expect(before.count >= 500, "the clients got too few answers before the kill: \(before.count)")

        let again = try ServeProcess(config: LiveServeTests.config, dataDir: serve.dataDir)
        var archived = Set<String>()
        let complete = ServeProcess.eventually(30) {
            archived = Set(again.ndjson(under: "archive").compactMap { $0["uuid"] as? String })
            return before.isSubset(of: archived)
        }
        #expect(complete, "\(before.subtracting(archived).count) acknowledged samples are missing after the restart")
        again.stop()
    }
}

final class LockedSet: @unchecked Sendable {
    private let lock = NSLock()
    private var set = Set<String>()

    func insert(_ items: [String]) {
        lock.lock()
        set.formUnion(items)
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return set.count
    }

    var snapshot: Set<String> {
        lock.lock()
        defer { lock.unlock() }
        return set
    }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    func set() {
        lock.lock()
        value = true
        lock.unlock()
    }

    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

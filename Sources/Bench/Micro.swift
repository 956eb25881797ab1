import HealthgateCrypto
import CanonicalJSON
import FastJSON
import Foundation
import Gateway
import HealthgateCore
import Posix

/// `healthgate-bench --micro`: the hot path's stages, one at a time, on one core.
enum Micro {
    static func run(samples: Int) {
        let body = BenchMain.makeBody(samples: samples).bytes
        let logger = Logger(component: "micro", sink: StderrLogSink(minimum: .warning))
        let receiver = SynckyReceiver(name: "phone", path: "/syncky", maxBodyBytes: 4 << 20,
                                      auth: Authenticator(kind: .bearer, token: token), hmacSecret: nil, device: nil,
                                      parsers: ParserPool(), logger: logger)
        let request = HTTPRequest(method: "POST", path: "/syncky",
                                  headers: [(name: "X-Syncky-Format", value: "native"),
                                            (name: "Authorization", value: "Bearer \(token)")], body: body)
        let context = ReceiveContext(now: Timestamp(seconds: 1_791_961_500))
        func time(_ name: String, _ n: Int = 40, _ f: () -> Void) {
            f()
            let t0 = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<n { f() }
            let ms = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6 / Double(n)
            print(String(format: "%-28@ %7.2f ms per body  (%.0f samples/s)", name as NSString, ms, Double(samples) / ms * 1000))
        }
        let parser = JSONParser()
        time("simdjson parse only") { _ = try? parser.parse(body) }
        var lines: [UInt8] = []
        time("receive (parse, map, encode)") {
            if case .accept(let b, _) = receiver.receive(request, context: context) { lines = b.payload }
        }
        let records = CanonicalCodec.decodeLines(lines, parser: parser)
        time("encode canonical NDJSON") { _ = CanonicalCodec.encodeLines(records) }
        time("decode canonical NDJSON") { _ = CanonicalCodec.decodeLines(lines, parser: parser) }
        time("HMAC-SHA256") { _ = Crypto.hmacSHA256(key: Array(secret.utf8), Array("1.".utf8), body) }
        print("records: \(records.count), NDJSON bytes: \(lines.count), CanonicalRecord stride: \(MemoryLayout<CanonicalRecord>.stride) bytes")
    }
}

import CanonicalJSON
import Glibc
import FastJSON
@testable import Gateway
import HealthgateCore
import HealthgateCrypto
import Pipeline
import YAMLConfig

/// The fuzz targets: every parser a stranger reaches, fed through the receiver as the gateway
/// calls it (or through the config loader), each with the oracles a user would hold us to.
/// A finding is a crash, a sanitizer report or a broken oracle (`fatalError`, with the reason):
///   - no request gets a 5xx answer: what cannot be read is the sender's problem (4xx; a partial
///     write is accepted with a 400, as InfluxDB answers it);
///   - what a receiver accepts is canonical NDJSON that decodes back, record for record, read by
///     the parser and read by a `Record` field by field alike, each line written back as it was;
///   - a setup link made from whatever a config holds is one URL: no space, control byte or
///     non-ASCII byte in it.
/// Used by `healthgate-fuzz` (libFuzzer, `make fuzz`) and by the tests, which run every committed
/// corpus file through its target.
public enum FuzzTargets {
    public struct Target: Sendable {
        public let name: String
        public let summary: String
        let run: @Sendable ([UInt8]) -> Void

        public func callAsFunction(_ input: [UInt8]) { run(input) }
    }

    public static let all: [Target] = [
        Target(name: "syncky-native", summary: "Syncky native JSON bodies") { body in
            receive(receiver: "native", body: body, headers: [("X-Syncky-Format", "native")])
        },
        Target(name: "syncky-csv", summary: "Syncky CSV bodies") { body in
            receive(receiver: "native", body: body, headers: [("X-Syncky-Format", "csv")])
        },
        Target(name: "syncky-influx", summary: "Syncky line-protocol bodies") { body in
            receive(receiver: "native", body: body, headers: [("X-Syncky-Format", "influx")])
        },
        Target(name: "influx", summary: "InfluxDB line protocol, gzip'd or not (a first line starting with ? is the query)") { input in
            var body = input[...]
            var query = "precision=ns"
            if body.first == UInt8(ascii: "?") {
                let end = body.firstIndex(of: 0x0A) ?? body.endIndex
                query = String(decoding: body[body.index(after: body.startIndex)..<end], as: UTF8.self)
                body = end < body.endIndex ? body[body.index(after: end)...] : []
            }
            var headers: [(String, String)] = [("Content-Type", "text/plain")]
            if body.starts(with: [0x1F, 0x8B]) { headers.append(("Content-Encoding", "gzip")) }
            receive(receiver: "influx", body: Array(body), headers: headers, query: query)
        },
        json("hae", "Health Auto Export JSON bodies"),
        json("ingest", "/v1/ingest chunks"),
        json("healthsync", "HealthSync exports", headers: [("X-Device-Id", "fuzz-device")]), // as HealthSync sends it
        Target(name: "headers", summary: "auth and signature headers (lines `name: value`, a blank line, the body)") { input in
            headers(input)
        },
        Target(name: "config", summary: "YAML configs, and the setup links made from them") { input in
            config(input)
        }
    ]

    public static func named(_ name: String) -> Target? { all.first { $0.name == name } }

    /// JSON bodies to the receiver of the same name.
    static func json(_ name: String, _ summary: String, headers: [(String, String)] = []) -> Target {
        Target(name: name, summary: summary) { body in
            receive(receiver: name, body: body, headers: [("Content-Type", "application/json")] + headers)
        }
    }

    // MARK: receivers

    static let secret = "fuzz-hmac-secret-0123456789abcdef"
    static let token = "fuzz-token-0123456789abcdef"
    /// The time requests are received at; signed requests carry it.
    static let now = Timestamp(seconds: 1_796_000_000)

    /// Where the receivers keep what they remember (the signed one's replay cache).
    static let dataDir = (getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp") + "/healthgate-fuzz-\(getpid())"

    static let receiversConfig = """
        listen: 127.0.0.1:0
        data_dir: \(dataDir)
        receivers:
          native: {kind: syncky, path: /native, device: fuzz-phone}
          signed: {kind: syncky, path: /signed, auth: {type: bearer, token: \(token)}, hmac: {secret: \(secret)}}
          basic: {kind: hae, path: /basic, auth: {type: basic, user: fuzz, token: \(token)}}
          hae: {kind: hae, device: fuzz-phone}
          influx: {kind: influx, device: fuzz-phone}
          ingest: {kind: ingest}
          healthsync: {kind: healthsync}
        sinks:
          out: {kind: file, path: out.ndjson}
        routes:
          - {from: [native, signed, basic, hae, influx, ingest, healthsync], to: [out]}
        """

    static let receivers: [String: any Receiver] = {
        let topology: Topology
        do {
            topology = try ConfigLoader.load(
                text: receiversConfig, file: "fuzz.yaml", environment: [:],
                logger: Logger(component: "fuzz", sink: MemoryLogSink()))
        } catch {
            fatalError("the fuzz targets' own config does not load: \(error)")
        }
        return Dictionary(uniqueKeysWithValues: topology.receivers.map { ($0.name, $0.receiver) })
    }()

    static func receive(receiver name: String, body: [UInt8], headers: [(String, String)], query: String = "") {
        guard let receiver = receivers[name] else { fatalError("no fuzz receiver \(name)") }
        // As the server hands a body over: with `HTTPRequest.bodySlack` bytes of room after it, so
        // a JSON body is parsed in place; the room holds what a longer body before might have
        // left there (quotes: they would close an open string if read as the body's).
        var roomy = body
        roomy.reserveCapacity(body.count + HTTPRequest.bodySlack)
        roomy.append(contentsOf: repeatElement(UInt8(ascii: "\""), count: HTTPRequest.bodySlack))
        roomy.removeLast(HTTPRequest.bodySlack)
        let request = HTTPRequest(
            method: "POST", path: receiver.paths[0], query: query,
            headers: headers.map { (name: $0.0, value: $0.1) }, body: roomy)
        if let p = problem(receiver.authorize(request), receiver.receive(request, context: ReceiveContext(now: now)), of: name) {
            fatalError(p)
        }
    }

    /// The oracles on what a receiver decided: what is wrong with it, or nil.
    public static func problem(_ early: HTTPResponse?, _ reception: Reception, of name: String) -> String? {
        if let early, early.status >= 500 { return "\(name): authorize answered \(early.status)" }
        switch reception {
        case .answer(let response):
            if response.status >= 500 { return "\(name): answered \(response.status)" }
        case .refused(let response, _):
            if response.status < 400 || response.status >= 500 { return "\(name): refused with status \(response.status)" }
        case .unreadable(let status, _):
            if status >= 500 || status < 400 { return "\(name): unreadable with status \(status)" }
        case .accept(let batch, let reply):
            // 2xx, or 4xx for a partial write (InfluxDB's answer when some lines are refused).
            if reply.status >= 500 || reply.status < 200 { return "\(name): accepted with status \(reply.status)" }
            var failure: String?
            let records = CanonicalCodec.decodeLines(batch.payload, parser: JSONParser()) { line, error, _ in
                if failure == nil { failure = "line \(line): \(error)" }
            }
            if let failure { return "\(name): accepted a record that does not decode back: \(failure)" }
            if records.count != batch.count { return "\(name): accepted \(batch.count) records, \(records.count) decode back" }
            if let p = problem(lines: batch.payload, decoded: records) { return "\(name): \(p)" }
        }
        return nil
    }

    /// What is wrong with the records of a batch's lines as the sinks read them, or nil: each line
    /// read as a `Record` must give, field by field, what the parser read, and write back the line.
    static func problem(lines payload: [UInt8], decoded: [CanonicalRecord]) -> String? {
        var failure: String?
        let records = Record.records(in: payload) { index, _, error in
            if failure == nil { failure = "line \(index + 1) does not read as a record: \(error)" }
        }
        if let failure { return failure }
        if records.count != decoded.count { return "\(records.count) lines read as records, \(decoded.count) decode back" }
        let lines = payload.split(separator: 0x0A)
        for (i, (r, _)) in records.enumerated() {
            if r.canonical != decoded[i] { return "record \(i) read field by field is not what its line decodes to" }
            if r.line[...] != lines[i] { return "record \(i) does not write back its line" }
        }
        return nil
    }

    /// What is wrong with a setup link, or nil: one URL, no space, control or non-ASCII byte.
    public static func problem(link: String) -> String? {
        link.utf8.first { $0 <= 0x20 || $0 >= 0x7F }.map { "the setup link holds byte \($0): \(link)" }
    }

    /// Header lines, a blank line, then the body, to the signed Syncky receiver and to the one
    /// behind Basic auth. Without an X-Syncky-Signature line the right one is added, so the
    /// fuzzer gets past the signature too.
    static func headers(_ input: [UInt8]) {
        var split = input.endIndex
        var i = input.startIndex
        while i + 1 < input.endIndex {
            if input[i] == 0x0A && input[i + 1] == 0x0A { split = i; break }
            i += 1
        }
        let head = String(decoding: input[..<split], as: UTF8.self)
        let body = split < input.endIndex ? Array(input[(split + 2)...]) : []
        var headers: [(String, String)] = []
        for line in head.split(separator: "\n", omittingEmptySubsequences: true) {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].drop { $0 == " " }
            headers.append((String(line[..<colon]), String(value)))
        }
        var signed = headers
        if !signed.contains(where: { $0.0.lowercased() == "x-syncky-signature" }) {
            let t = signed.first { $0.0.lowercased() == "x-syncky-timestamp" }?.1 ?? "\(now.seconds)"
            if !signed.contains(where: { $0.0.lowercased() == "x-syncky-timestamp" }) { signed.append(("X-Syncky-Timestamp", t)) }
            let mac = Crypto.hmacSHA256(key: Array(secret.utf8), Array("\(t).".utf8), body)
            signed.append(("X-Syncky-Signature", "v1=" + Crypto.lowercaseHex(mac)))
        }
        receive(receiver: "signed", body: body, headers: signed)
        receive(receiver: "basic", body: body, headers: headers)
    }

    // MARK: config

    static func config(_ input: [UInt8]) {
        let text = String(decoding: input, as: UTF8.self)
        let topology: Topology
        do {
            topology = try ConfigLoader.load(
                text: text, file: "fuzz.yaml", environment: ["FUZZ": "x"],
                logger: Logger(component: "fuzz", sink: MemoryLogSink()))
        } catch {
            // Typed throws: a config refused says at least one problem.
            if error.problems.isEmpty { fatalError("config refused without a problem said") }
            return
        }
        for r in topology.receivers where r.config.kind == "syncky" {
            for format in SetupLink.formats {
                guard
                    let link = try? SetupLink.build(
                        receiver: r.name, config: r.config, topology: topology, host: "h.example",
                        format: format, scheme: "syncky")
                else { continue }
                if let p = problem(link: link) { fatalError("receiver \(r.name): \(p)") }
            }
        }
    }
}

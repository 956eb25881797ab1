import CZlib
import HealthgateCrypto
import HealthgateCore
import YAMLConfig

/// InfluxDB's write endpoints, so anything that speaks line protocol — Syncky's InfluxDB
/// template among them — can point at healthgate: `POST /write` (v1: `db`, `rp`, `precision`,
/// `u`/`p` or Basic) and `POST /api/v2/write` (`org`, `bucket`, `precision`; `Token` or
/// `Bearer`, which InfluxDB itself refuses), gzip bodies, the full line-protocol grammar. Each
/// line is a canonical record: measurement → type, the Syncky tags and fields in their places,
/// every other tag and field kept under `extra`.
public struct InfluxReceiver: Receiver {
    public let name: String
    public let paths: [String]
    public let maxBodyBytes: Int
    let auth: Authenticator
    let device: String

    /// `Token X` is InfluxDB 2's scheme: taken like `Bearer X`. v1's `u`/`p` query parameters
    /// are taken like Basic auth.
    func normalized(_ request: HTTPRequest) -> HTTPRequest {
        var r = request
        if let a = r.header("authorization"), a.lowercased().hasPrefix("token ") {
            r.headers = r.headers.map { $0.name == "authorization" ? ($0.name, "Bearer " + a.dropFirst(6)) : $0 }
        } else if r.header("authorization") == nil, let u = r.queryParameter("u"), let p = r.queryParameter("p") {
            r.headers.append(("authorization", "Basic " + Crypto.base64(Array("\(u):\(p)".utf8))))
        }
        return r
    }

    public func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse? { auth.check(normalized(headersOnly)) }

    public func receive(_ request: HTTPRequest, context: ReceiveContext) -> Reception {
        if let refusal = auth.check(normalized(request)) { return .answer(refusal) }
        var body = request.body
        if request.header("content-encoding")?.lowercased() == "gzip" {
            // max_body holds for the inflated body: a small gzip body cannot become a big one.
            switch InfluxReceiver.gunzip(body, limit: maxBodyBytes) {
            case .success(let b): body = b
            case .failure(let why): return .unreadable(status: why.tooLarge ? 413 : 400, reason: why.description)
            }
        }
        let precision = InfluxReceiver.precision(request.queryParameter("precision"))
        return SynckyInflux.read(
            body, precision: precision, receiver: name, device: device, now: context.now,
            answers: request.path.hasSuffix("/api/v2/write") ? .influxV2 : .influxV1)
    }

    /// v1 says `n`, `u`, `ms`, `s`, `m`, `h`; v2 says `ns`, `us`, `ms`, `s`.
    static func precision(_ p: String?) -> String? {
        switch p {
        case nil, "", "n", "ns": return "ns"
        case "u", "us", "µs": return "us"
        case "ms": return "ms"
        case "s": return "s"
        case "m": return "m"
        case "h": return "h"
        default: return p
        }
    }

    struct GzipFailure: Error, CustomStringConvertible {
        var description: String
        var tooLarge = false
    }

    /// Inflates a gzip body, refusing one that grows past `limit` (a compression bomb).
    static func gunzip(_ data: [UInt8], limit: Int) -> Result<[UInt8], GzipFailure> {
        var stream = z_stream()
        guard inflateInit2_(&stream, 16 + MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure(GzipFailure(description: "cannot start gzip decoding"))
        }
        defer { inflateEnd(&stream) }
        var out = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        var input = data
        let result: Result<[UInt8], GzipFailure> = input.withUnsafeMutableBufferPointer { inp in
            stream.next_in = inp.baseAddress
            stream.avail_in = UInt32(inp.count)
            while true {
                let rc = chunk.withUnsafeMutableBufferPointer { c -> Int32 in
                    stream.next_out = c.baseAddress
                    stream.avail_out = UInt32(c.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                // Checked before it is kept: at most one chunk past the limit is ever held.
                if out.count + produced > limit {
                    return .failure(
                        GzipFailure(
                            description: "the gzip body inflates past this receiver's max_body of \(limit) bytes; "
                                + "send smaller batches", tooLarge: true))
                }
                if out.isEmpty { out.reserveCapacity(min(limit, max(data.count * 4, 1 << 16))) }
                out.append(contentsOf: chunk[0..<produced])
                if rc == Z_STREAM_END { return .success(out) }
                if rc != Z_OK {
                    return .failure(GzipFailure(description: "the body is not valid gzip (zlib error \(rc))"))
                }
                if stream.avail_in == 0 && produced == 0 {
                    return .failure(GzipFailure(description: "the gzip body is truncated"))
                }
            }
        }
        return result
    }

    static let build: ReceiverRegistry.Builder = { name, c, node, path, context throws(ConfigProblems) in
        let auth =
            try c.auth.map { a throws(ConfigProblems) in try Authenticator(config: a, node: node, path: path + ".auth") }
            ?? Authenticator(kind: .none)
        let configured = c.path ?? "/api/v2/write"
        // On the default path it answers both APIs' paths.
        let paths = configured == "/api/v2/write" ? ["/api/v2/write", "/write"] : [configured]
        return InfluxReceiver(
            name: name, paths: paths, maxBodyBytes: Int(c.max_body?.bytes ?? 25_000_000), auth: auth,
            device: c.device ?? name)
    }
}

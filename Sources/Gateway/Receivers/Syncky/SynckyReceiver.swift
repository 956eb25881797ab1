import FastJSON
import HealthgateCore
import CanonicalJSON

/// The Syncky Health webhook (the guide's sections 3–8): one receiver, the format chosen by
/// `X-Syncky-Format`, auth and HMAC signatures checked before the body is read.
public struct SynckyReceiver: Receiver {
    public let name: String
    public let paths: [String]
    public let maxBodyBytes: Int
    let auth: Authenticator
    let signature: SynckySignature?
    /// The device name for bodies that carry none.
    let device: String?
    let parsers: ParserPool
    let logger: Logger
    /// Set when `write_back: true`.
    let writeBack: WriteBack?

    public init(
        name: String, path: String, maxBodyBytes: Int, auth: Authenticator, hmacSecret: String?,
        device: String?, parsers: ParserPool, logger: Logger, replays: ReplayCache = ReplayCache(),
        writeBack: WriteBack? = nil
    ) {
        self.writeBack = writeBack
        self.name = name
        self.paths = [path]
        self.maxBodyBytes = maxBodyBytes
        self.auth = auth
        self.signature = hmacSecret.map { SynckySignature(secret: $0, replays: replays) }
        self.device = device
        self.parsers = parsers
        self.logger = logger
    }

    public func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse? {
        auth.check(headersOnly)
    }

    public func receive(_ request: HTTPRequest, context: ReceiveContext) -> Reception {
        if let refusal = auth.check(request) { return .answer(refusal) }
        if let signature {
            let failure = request.body.withUnsafeBytes {
                signature.verify(
                    timestamp: request.header("x-syncky-timestamp"),
                    signature: request.header("x-syncky-signature"), body: $0, now: context.now)
            }
            if failure == .unverifiable {
                return .answer(
                    problem(503, "Cannot check the signature now", failure!.description, headers: [HTTPHeader("Retry-After", "30")]))
            }
            if let failure {
                return .refused(problem(401, "Bad signature", failure.description), reason: failure.description)
            }
        }
        if request.header("x-syncky-kind")?.lowercased() == "results" {
            return receiveResults(request, now: context.now)
        }
        guard let format = request.header("x-syncky-format")?.trimmingSpaces.lowercased() else {
            return .unreadable(status: 400, reason: "the X-Syncky-Format header is missing (native, hae, csv or influx)")
        }
        let reception: Reception
        switch format {
        case "native":
            reception = parsers.withParser { SynckyNative.read(request.body, parser: $0, receiver: name, device: device) }
        case "csv":
            reception = SynckyCSV.read(request.body, receiver: name, device: device ?? name)
        case "influx":
            reception = SynckyInflux.read(
                request.body, precision: request.queryParameter("precision"), receiver: name,
                device: device ?? name, now: context.now)
        case "hae":
            reception = parsers.withParser { HAEBody.read(request.body, parser: $0, receiver: name, device: device ?? name) }
        default:
            return .unreadable(
                status: 400, reason: "unknown X-Syncky-Format \"\(QuarantinedRecord.name(format))\" (native, hae, csv or influx)")
        }
        // A data request's reply carries the pending write-back commands (never the Check
        // connection request's, which is answered without storing).
        if case .accept(let batch, let reply) = reception, let writeBack {
            return .accept(batch, reply: writeBack.reply(to: request, default: reply, signature: signature, now: context.now))
        }
        return reception
    }

    /// Results of write-back commands. Write-back is not built yet: the request is verified
    /// (above), its body must be a results message, and it is acknowledged without storing.
    /// Results of write-back commands (guide section 10): verified like any request above,
    /// recorded in the command store, answered 200 with no body.
    func receiveResults(_ request: HTTPRequest, now: Timestamp) -> Reception {
        parsers.withParser { parser in
            let results: [(id: String, version: Int, status: String, reason: String?)]? = request.body.withUnsafeBytes { bytes in
                guard let doc = try? parser.parse(bytes), doc.root["type"]?.string == "results",
                    let list = doc.root["results"], list.kind == .array
                else { return nil }
                var out: [(id: String, version: Int, status: String, reason: String?)] = []
                for r in list.elements {
                    guard let id = r["command_id"]?.string, let v = r["version"]?.int64, let status = r["status"]?.string else {
                        continue
                    }
                    out.append((id, Int(v), status, r["reason"]?.string))
                }
                return out
            }
            guard let results else {
                return .unreadable(status: 400, reason: "a results request must be a JSON results message")
            }
            guard let writeBack else {
                logger.warning("\(name): a results request came, but write_back is off for this receiver; nothing recorded")
                return .answer(HTTPResponse(status: 200))
            }
            writeBack.record(results, now: now)
            return .answer(HTTPResponse(status: 200))
        }
    }
}

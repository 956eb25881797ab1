import FastJSON
import HealthgateCore

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

    public init(name: String, path: String, maxBodyBytes: Int, auth: Authenticator, hmacSecret: String?,
                device: String?, parsers: ParserPool, logger: Logger, replays: ReplayCache = ReplayCache()) {
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
                signature.verify(timestamp: request.header("x-syncky-timestamp"),
                                 signature: request.header("x-syncky-signature"), body: $0, now: context.now)
            }
            if let failure {
                logger.warning("\(name): refused a request from \(request.remoteAddress): \(failure)")
                return .answer(problem(401, "Bad signature", failure.description))
            }
        }
        if request.header("x-syncky-kind")?.lowercased() == "results" {
            return receiveResults(request)
        }
        guard let format = request.header("x-syncky-format")?.trimmingSpaces.lowercased() else {
            return .unreadable(status: 400, reason: "the X-Syncky-Format header is missing (native, hae, csv or influx)")
        }
        switch format {
        case "native":
            return parsers.withParser { SynckyNative.read(request.body, parser: $0, receiver: name, device: device) }
        case "csv":
            return SynckyCSV.read(request.body, receiver: name, device: device ?? name)
        case "influx":
            return SynckyInflux.read(request.body, precision: request.queryParameter("precision"), receiver: name,
                                     device: device ?? name)
        case "hae":
            return .answer(problem(415, "Format not supported yet",
                                   "This healthgate reads Syncky's native, CSV and InfluxDB formats; set the server's "
                                   + "format to one of them in the app. Health Auto Export support is on the way."))
        default:
            return .unreadable(status: 400, reason: "unknown X-Syncky-Format \"\(format)\" (native, hae, csv or influx)")
        }
    }

    /// Results of write-back commands. Write-back is not built yet: the request is verified
    /// (above), its body must be a results message, and it is acknowledged without storing.
    func receiveResults(_ request: HTTPRequest) -> Reception {
        parsers.withParser { parser in
            let ok = request.body.withUnsafeBytes { bytes -> Bool in
                guard let doc = try? parser.parse(bytes) else { return false }
                return doc.root["type"]?.string == "results"
            }
            if !ok { return .unreadable(status: 400, reason: "a results request must be a JSON results message") }
            logger.info("\(name): results request acknowledged (write-back commands are not sent by this version)")
            return .answer(HTTPResponse(status: 200))
        }
    }
}

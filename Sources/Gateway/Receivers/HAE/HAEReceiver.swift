import HealthgateCore
import YAMLConfig

/// Health Auto Export's own "REST API" automation (`POST /api/data`): the same body as
/// Syncky's `hae` format, with the app's auth: any header (`api-key: …`, say) or Bearer.
public struct HAEReceiver: Receiver {
    public let name: String
    public let paths: [String]
    public let maxBodyBytes: Int
    let auth: Authenticator
    let device: String
    let parsers: ParserPool

    public func authorize(_ headersOnly: HTTPRequest) -> HTTPResponse? { auth.check(headersOnly) }

    public func receive(_ request: HTTPRequest, context: ReceiveContext) -> Reception {
        if let refusal = auth.check(request) { return .answer(refusal) }
        return parsers.withParser { HAEBody.read(request.body, parser: $0, receiver: name, device: device) }
    }

    static let build: ReceiverRegistry.Builder = { name, c, node, path, context throws(ConfigProblems) in
        let auth =
            try c.auth.map { a throws(ConfigProblems) in try Authenticator(config: a, node: node, path: path + ".auth") }
            ?? Authenticator(kind: .none)
        return HAEReceiver(
            name: name, paths: [c.path ?? "/api/data"],
            maxBodyBytes: Int(c.max_body?.bytes ?? Int64(ReceiverConfig.defaultMaxJSONBody)), auth: auth,
            device: c.device ?? name, parsers: context.parsers)
    }
}

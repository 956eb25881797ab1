import SinkKit
import YAMLConfig

/// `kind: http` — batches of canonical records POSTed to a URL, for automation tools
/// (n8n, Node-RED, Home Assistant webhooks, any endpoint).
///
/// ```yaml
/// webhook:
///   kind: http
///   url: https://n8n.example.net/webhook/health
///   format: json                 # json: one JSON array per batch; ndjson: one record per line
///   auth: {type: bearer, token: "${HOOK_TOKEN}"}     # or {type: basic, user: u, password: p}
///   headers: {X-Source: healthgate}
///   hmac: {secret: "${HOOK_HMAC}"}  # X-Healthgate-Timestamp / X-Healthgate-Signature, Syncky's scheme
///   timeout: 30s
///   ca_file: /etc/ssl/private-ca.pem
/// ```
public struct HTTPSinkConfig: Decodable, Sendable {
    public enum Format: String, Decodable, Sendable, CaseIterable {
        case json
        case ndjson
    }

    public struct Auth: Decodable, Sendable {
        public enum Kind: String, Decodable, Sendable, CaseIterable {
            case bearer, basic
        }

        public var type: Kind
        public var token: String?
        public var user: String?
        public var password: String?
    }

    public struct HMAC: Decodable, Sendable {
        public var secret: String
    }

    public var kind: String
    public var url: String
    public var format: Format?
    public var auth: Auth?
    public var headers: [String: String]?
    public var hmac: HMAC?
    public var timeout: ConfigDuration?
    public var ca_file: String?
    public var batch: BatchConfig?
    public var retry: RetryConfig?
    public var queue: QueueConfig?
}

import Pipeline
import HealthgateCore
import YAMLConfig

/// The keys a receiver takes (DESIGN.md "Config"). Each kind uses the ones that apply to it.
public struct ReceiverConfig: Decodable, Sendable {
    public var kind: String
    public var path: String?
    public var auth: AuthConfig?
    public var hmac: HMACConfig?
    /// The device name for formats whose body names none.
    public var device: String?
    /// The devices this receiver's credentials may write for (`DeviceGate`); unset: any.
    public var devices: DeviceBinding?
    public var write_back: Bool?
    /// Shown by the app when a setup link is imported.
    public var name: String?
    /// The URL as the phone reaches it, for setup links.
    public var public_url: String?
    /// The types a setup link asks for.
    public var types: [String]?
    /// The largest body taken; larger ones get 413. Default 1 MB (the app's first limit).
    public var max_body: ByteSize?
    /// `kind: ingest`: most items in one chunk (default 50,000); more is 413.
    public var max_items: Int?

    public static let defaultMaxBody = 1_000_000
    /// The default for JSON bodies of the other senders: parsing costs about 13 times a body's
    /// size while it lasts, so 16 MB keeps one request under 300 MB of memory.
    public static let defaultMaxJSONBody = 16_000_000
}

public struct AuthConfig: Decodable, Sendable {
    public var type: Authenticator.Kind
    public var token: String?
    public var user: String?
    public var header: String?
    /// With `tls.client_ca`: the client certificates taken, by subject (as GnuTLS writes it,
    /// `CN=alice,O=Example`) or SHA-256 fingerprint (hex, colons and case as you like).
    public var subjects: [String]?
    public var sha256: [String]?
}

public struct HMACConfig: Decodable, Sendable {
    public var secret: String
}

public struct TLSConfig: Decodable, Sendable {
    public var cert: String
    public var key: String
    /// Mutual TLS: the CAs (PEM) a client's certificate must chain to. Set, every connection
    /// must show a valid, unexpired certificate for client auth, or its handshake fails.
    public var client_ca: String?
    /// The oldest TLS version taken: "1.2" (the default, RFC 8996) or "1.3".
    public var min_version: String?
    /// GnuTLS's priority string, for those who need another choice of suites (replaces the
    /// default, which takes forward-secret key exchanges only).
    public var priorities: String?

    /// The priority string the listener uses.
    public var effectivePriorities: String {
        if let priorities { return priorities }
        return min_version == "1.3"
            ? "NORMAL:-VERS-ALL:+VERS-TLS1.3"
            : "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA"
    }
}

/// The journal's limits (an extension of DESIGN.md's config).
public struct JournalConfig: Decodable, Sendable {
    /// The journal's disk budget: once it is reached, receivers answer 503 with Retry-After
    /// (phones keep their data and retry) until sinks catch up and segments are deleted.
    public var max_bytes: ByteSize?
    /// Segments are kept at least this long after their last entry, even once every sink has
    /// passed them (for looking back at what came in).
    public var retention: ConfigDuration?
    /// The size at which a new segment file is started (default 64 MiB).
    public var segment_bytes: ByteSize?

    public init() {}
}

/// The quarantine's disk budget (an extension of DESIGN.md's config).
public struct QuarantineConfig: Decodable, Sendable {
    /// Bodies, records and reason lines together (default 100 MiB); past it the oldest kept
    /// bodies go first, then new entries keep only their reason line.
    public var max_bytes: ByteSize?

    public init() {}
}

/// The dead letters' disk budget, per sink (an extension of DESIGN.md's config).
public struct DeadLettersConfig: Decodable, Sendable {
    /// What the records a sink's destination rejected take at most (default 100 MiB); past it
    /// new ones are kept as their keys and reason only, and past another eighth only counted.
    public var max_bytes: ByteSize?

    public var maxBytes: Int { max_bytes.map { Int($0.bytes) } ?? DeadLetters.defaultMaxBytes }

    public init() {}
}

/// HTTP server tuning (an extension of DESIGN.md's config).
public struct HTTPTuning: Decodable, Sendable {
    /// Worker threads of the HTTP server (default 8); each may wait on a journal fsync.
    public var threads: Int?
    /// Idle or slow connections are closed after this long (default 30s).
    public var connection_timeout: ConfigDuration?
    public var max_connections: Int?
    /// Request bodies held at once across all connections (default 256 MiB); past it 503.
    public var max_buffered: ByteSize?
    /// A request's headers must be complete this soon after the connection opens or the
    /// previous response (default 10s); it also bounds an idle kept-alive connection.
    public var header_timeout: ConfigDuration?
    /// A body slower than this, after 10 s, is cut off (default 1KB, bytes a second).
    public var min_body_rate: ByteSize?
}

import YAMLConfig

// A model of the healthgate configuration, as the integrator might write it, used by
// the end-to-end tests. Optional fields that are absent from the sample config check
// that "asked for but missing" keys do not count as unknown.

struct HealthgateConfig: Decodable, Equatable {
    var listen: String
    var dataDir: String
    var logLevel: LogLevel?
    var receivers: [String: Receiver]
    var routes: [Route]
    var sinks: [String: Sink]

    enum CodingKeys: String, CodingKey {
        case listen, receivers, routes, sinks
        case dataDir = "data_dir"
        case logLevel = "log_level"
    }
}

enum LogLevel: String, Decodable, CaseIterable {
    case debug, info, warning, error
}

struct Receiver: Decodable, Equatable {
    var kind: ReceiverKind
    var path: String
    var auth: Auth
    var hmac: HMACSettings?
    var maxBody: ByteSize?

    enum CodingKeys: String, CodingKey {
        case kind, path, auth, hmac
        case maxBody = "max_body"
    }
}

enum ReceiverKind: String, Decodable, CaseIterable {
    case syncky, webhook
}

struct Auth: Decodable, Equatable {
    var type: AuthType
    var token: String
}

enum AuthType: String, Decodable, CaseIterable {
    case bearer, basic
}

struct HMACSettings: Decodable, Equatable {
    var secret: String
    var header: String?
}

struct Route: Decodable, Equatable {
    var name: String
    var from: [String]
    var transforms: [Transform]?
    var to: [String]
}

struct Transform: Decodable, Equatable {
    var filter: Filter?
    var rename: [String: String]?
}

struct Filter: Decodable, Equatable {
    var types: [String]
}

struct Sink: Decodable, Equatable {
    var kind: SinkKind
    var path: String?
    var url: String?
    var bucket: String?
    var batch: Batch?
}

enum SinkKind: String, Decodable, CaseIterable {
    case file, influx, mqtt
}

struct Batch: Decodable, Equatable {
    var maxItems: Int
    var maxWait: ConfigDuration

    enum CodingKeys: String, CodingKey {
        case maxItems = "max_items"
        case maxWait = "max_wait"
    }
}

let sampleConfig = """
    listen: 0.0.0.0:8080
    data_dir: ./healthgate-data
    receivers:
      my-iphone:
        kind: syncky
        path: /syncky/my-iphone
        auth: {type: bearer, token: "${PHONE_TOKEN}"}
        hmac: {secret: "${PHONE_HMAC}"}
        max_body: 1MB
    routes:
      - name: live
        from: [my-iphone]
        transforms:
          - filter: {types: [steps, heart_rate, "body_*"]}
        to: [archive]
    sinks:
      archive:  {kind: file, path: "archive/{device}/{date}.ndjson", batch: {max_items: 500, max_wait: 1s}}
    """

let sampleEnvironment = ["PHONE_TOKEN": "tok-123", "PHONE_HMAC": "s3cret"]

import SinkKit
import YAMLConfig

/// `kind: influxdb` — records as line protocol into InfluxDB 1.x, 2.x or 3.x (or anything that
/// takes their write APIs, such as VictoriaMetrics).
///
/// ```yaml
/// influx:
///   kind: influxdb
///   url: http://localhost:8086
///   api: v2                      # v1: /write?db=&rp=   v2: /api/v2/write?org=&bucket=   v3: /api/v3/write_lp?db=
///   org: home                    # v2
///   bucket: health               # v2
///   token: "${INFLUX_TOKEN}"     # v2: Authorization: Token …; v3: Bearer
///   # database: health           # v1 and v3
///   # retention_policy: autogen  # v1
///   # username: u, password: p   # v1: Basic
///   precision: s                 # ns | us | ms | s (default ns)
///   gzip: true                   # default: true, but false to a server on loopback (localhost, 127.x, ::1)
///   gzip_level: 1                # 1 (fastest, the default) to 9 (smallest)
///   phone_tag: phone             # the tag naming the phone (the record's device); "" for none
///   tags: {person: me, app: "{source}"}  # tags on every point; values may be templates
///   measurement: "{type}"        # template: {type}, {kind}, {receiver}, {phone}, {source}, {unit}
/// ```
public struct InfluxDBSinkConfig: Decodable, Sendable {
    public enum API: String, Decodable, Sendable, CaseIterable {
        case v1, v2, v3
    }

    public enum Precision: String, Decodable, Sendable, CaseIterable {
        case ns, us, ms, s
    }

    public var kind: String
    public var url: String
    public var api: API?
    public var org: String?
    public var bucket: String?
    public var database: String?
    public var retention_policy: String?
    public var username: String?
    public var password: String?
    public var token: String?
    public var precision: Precision?
    public var gzip: Bool?
    public var gzip_level: Int?
    public var phone_tag: String?
    public var tags: [String: String]?
    public var measurement: String?
    public var timeout: ConfigDuration?
    public var ca_file: String?
    public var batch: BatchConfig?
    public var retry: RetryConfig?
    public var queue: QueueConfig?
}

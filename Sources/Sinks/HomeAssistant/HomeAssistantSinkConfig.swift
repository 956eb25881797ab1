import SinkKit
import YAMLConfig

/// `kind: homeassistant` — history in Home Assistant's long-term statistics, written through its
/// websocket API: hourly sums of cumulative types, hourly mean/min/max of the others, as external
/// statistics `healthgate:<device>_<type>`, for the weeks before today as well as now.
///
/// ```yaml
/// ha-history:
///   kind: homeassistant
///   url: http://homeassistant.local:8123     # https:// for TLS
///   token: ${HA_TOKEN}                       # a long-lived access token (an administrator's)
///   history: 30d                             # samples older than this are never written
///   names: {d_zsOZnTQUz_juWFVljuOOBQ: "Anna"}   # by device id or receiver name
///   include: ["*"]                           # type globs (default: every quantity type)
///   exclude: [walking_speed]
///   timeout: 10s                             # for each answer of Home Assistant
/// ```
public struct HomeAssistantSinkConfig: Decodable, Sendable {
    public var kind: String
    public var url: String
    public var token: String
    public var history: ConfigDuration?
    public var names: [String: String]?
    public var include: [String]?
    public var exclude: [String]?
    public var timeout: ConfigDuration?
    public var batch: BatchConfig?
    public var retry: RetryConfig?
    public var queue: QueueConfig?
}

import SinkKit
import YAMLConfig

/// `kind: mqtt` — Home Assistant over MQTT: one HA device per phone, sensors that announce
/// themselves (MQTT discovery), states that stay right through resends, deletions and backfills;
/// and, for automations, every record as JSON.
///
/// ```yaml
/// home:
///   kind: mqtt
///   url: mqtt://192.168.1.10:1883          # mqtts:// for TLS (port 8883 by default)
///   username: healthgate
///   password: ${MQTT_PASSWORD}
///   client_id: healthgate-home             # default healthgate-<sink name>; one per broker
///   keepalive: 60s
///   qos: 1                                 # 0, 1 or 2
///   base_topic: healthgate
///   discovery: true                        # announce sensors to Home Assistant
///   discovery_prefix: homeassistant
///   time_zone: Europe/Budapest             # the phones' day when a record has no UTC offset
///   names: {d_zsOZnTQUz_juWFVljuOOBQ: "Anna's iPhone"}   # by device id (the `device` of its records) or receiver name
///   people: {Anna: [d_zsOZnTQUz_juWFVljuOOBQ], Ben: [ben-hae]}   # whose phones: grouped under a device per person
///   sleep_day_starts: "18:00"              # a sleep day runs from this local time to the next day's
///   include: ["*"]                         # type globs of the entities (default: all the catalog has)
///   exclude: [walking_speed]
///   units: {body_mass: lb, body_temperature: °F, distance_walking_running: mi}   # shown in these
///   publish_records: false                 # every record as JSON on <base>/<device>/records/<type>
///   ca_file: /etc/ssl/private-ca.pem       # and cert_file / key_file for client certificates
///   timeout: 10s                           # for the broker's acknowledgements
/// ```
public struct MQTTSinkConfig: Decodable, Sendable {
    public var kind: String
    public var url: String
    public var username: String?
    public var password: String?
    public var client_id: String?
    public var keepalive: ConfigDuration?
    public var qos: Int?
    public var base_topic: String?
    public var discovery: Bool?
    public var discovery_prefix: String?
    public var time_zone: String?
    public var names: [String: String]?
    public var people: [String: [String]]?
    public var sleep_day_starts: String?
    public var include: [String]?
    public var exclude: [String]?
    public var units: [String: String]?
    public var publish_records: Bool?
    public var ca_file: String?
    public var cert_file: String?
    public var key_file: String?
    public var timeout: ConfigDuration?
    public var batch: BatchConfig?
    public var retry: RetryConfig?
    public var queue: QueueConfig?
}

import HealthgateCore
import Posix
import SinkKit
import YAMLConfig

extension MQTTSink {
    /// Checks the config; the connection is made when `serve` opens the sink.
    public static func build(name: String, node: YAMLNode, path: String, context: SinkBuildContext) throws(ConfigProblems) -> BuiltSink {
        let c = try YAMLDecoder().decode(MQTTSinkConfig.self, from: node, path: path)
        var problems = ConfigProblemList(node, path: path)
        var tls = false
        var rest = Substring(c.url)
        if rest.hasPrefix("mqtt://") {
            rest = rest.dropFirst(7)
        } else if rest.hasPrefix("mqtts://") {
            rest = rest.dropFirst(8)
            tls = true
        } else {
            problems.add("url", "the url must start with mqtt:// or mqtts:// (e.g. mqtt://192.168.1.10:1883)")
        }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let at = rest.lastIndex(of: "@") {
            problems.add("url", "give the username and password as `username` and `password`, not in the url")
            rest = rest[rest.index(after: at)...]
        }
        var host = String(rest)
        var port = tls ? 8883 : 1883
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            host = String(rest[..<colon])
            if let p = Int(rest[rest.index(after: colon)...]), p > 0 && p < 65536 {
                port = p
            } else {
                problems.add("url", "the port is not a number from 1 to 65535")
            }
        }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { problems.add("url", "the url names no host") }
        let qos = c.qos ?? 1
        if !(0...2).contains(qos) { problems.add("qos", "qos is 0, 1 or 2") }
        func topicRoot(_ key: String, _ value: String) {
            if value.isEmpty || value.hasPrefix("/") || value.hasSuffix("/") || value.contains("+") || value.contains("#")
                || value.utf8.contains(0)
            {
                problems.add(key, "\"\(value)\" is not a topic prefix: no wildcards (+, #), no leading or trailing /")
            }
        }
        let base = c.base_topic ?? "healthgate"
        let prefix = c.discovery_prefix ?? "homeassistant"
        topicRoot("base_topic", base)
        topicRoot("discovery_prefix", prefix)
        if let tz = c.time_zone, let why = TimeZones.problem(tz) { problems.add("time_zone", why) }
        if (c.cert_file == nil) != (c.key_file == nil) {
            problems.add("cert_file", "a client certificate needs both cert_file and key_file")
        }
        if !tls && (c.ca_file != nil || c.cert_file != nil) {
            problems.add("ca_file", "ca_file, cert_file and key_file need an mqtts:// url")
        }
        if c.password != nil && c.username == nil { problems.add("password", "a password needs a username") }
        // A name that is no sensor of the catalog would silently match nothing (`step`).
        for (key, names) in [("include", c.include), ("exclude", c.exclude)] {
            for n in names ?? [] where !n.contains("*") && !n.contains("?") && !HACatalog.all.contains(where: { $0.type == n }) {
                problems.add(
                    key,
                    HealthTypes.configProblem(n, nearest: closestMatch)
                        ?? "\(n) is a type healthgate knows, but not one of its Home Assistant sensors "
                        + "(\(HACatalog.all.map(\.type).joined(separator: ", ")))")
            }
        }
        let include = (c.include ?? ["*"]).map(Glob.init)
        let exclude = (c.exclude ?? []).map(Glob.init)
        var entities = HACatalog.all.filter { e in include.contains { $0.matches(e.type) } && !exclude.contains { $0.matches(e.type) } }
        for (type, unit) in (c.units ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let i = entities.firstIndex(where: { $0.type == type }) else {
                problems.add("units", "\"\(type)\" is not one of the sink's entities (\(entities.map(\.type).joined(separator: ", ")))")
                continue
            }
            guard let from = HealthTypes.named(type)?.unit, from != "%", Units.convert(1, from: from, to: unit) != nil else {
                problems.add("units", "\(type) cannot be shown in \"\(unit)\"")
                continue
            }
            entities[i].unit = unit
            entities[i].canonicalUnit = from
        }
        if entities.isEmpty && !(c.publish_records ?? false) {
            problems.add("include", "include and exclude leave no entity, and publish_records is off: the sink would publish nothing")
        }
        var people: [String: String] = [:]
        for (person, phones) in (c.people ?? [:]).sorted(by: { $0.key < $1.key }) {
            if MQTTSink.entitySlug(person) == nil { problems.add("people", "\"\(person)\" has no letter or digit to name a device by") }
            for phone in phones {
                if let other = people[phone] {
                    problems.add("people", "\(phone) is \(other)'s and \(person)'s: a phone belongs to one person")
                }
                people[phone] = person
            }
        }
        var sleepDayStart = 18 * 3600
        if let text = c.sleep_day_starts {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
            if parts.count == 2, let h = parts[0], let m = parts[1], (0...23).contains(h), (0...59).contains(m) {
                sleepDayStart = h * 3600 + m * 60
            } else {
                problems.add("sleep_day_starts", "\"\(text)\" is not a time of day such as \"18:00\"")
            }
        }
        let common = try SinkCommonConfig.checked(
            batch: c.batch, retry: c.retry, queue: c.queue, node: node, path: path,
            defaultMaxItems: 5000, adding: problems.problems)
        var options = MQTTClient.Options(host: host, port: port, clientID: c.client_id ?? "healthgate-\(name)")
        options.tls = tls
        options.caFile = c.ca_file
        options.certFile = c.cert_file
        options.keyFile = c.key_file
        options.username = c.username
        options.password = c.password
        options.keepalive = Int(c.keepalive?.seconds ?? 60)
        options.timeoutSeconds = c.timeout?.seconds ?? 10
        options.will = (base + "/status", "offline", true)
        let settings = Settings(
            name: name, client: options, qos: qos, base: base, prefix: prefix, discovery: c.discovery ?? true,
            publishRecords: c.publish_records ?? false, names: c.names ?? [:], entities: entities,
            timeZone: c.time_zone, sleepDayStart: sleepDayStart, people: people)
        let summary =
            "mqtt \(tls ? "mqtts" : "mqtt")://\(host):\(port) as \(options.clientID), qos \(qos), base \(base)"
            + (settings.discovery ? ", discovery under \(prefix)" : "") + (settings.publishRecords ? ", records" : "")
            + ", \(entities.count) entity kind(s)"
        return BuiltSink(kind: "mqtt", common: common, summary: summary) { ctx throws(SinkOpenError) in
            try MQTTSink(settings: settings, logger: ctx.logger, clock: ctx.clock, timeZones: SystemTimeZones())
        }
    }
}

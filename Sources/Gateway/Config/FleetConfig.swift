import Fleet
import SinkKit
import YAMLConfig

/// `fleet: {brokers, state, partitions}` as written.
struct FleetConfig: Decodable {
    var brokers: [String]?
    var state: String?
    var partitions: Int?
}

extension FleetSettings {
    /// `fleet:` checked: every problem added to `problems`, the settings when there is none.
    static func check(_ node: YAMLNode, problems: inout [ConfigProblem]) -> FleetSettings? {
        let c: FleetConfig
        do {
            c = try YAMLDecoder().decode(FleetConfig.self, from: node, path: "fleet")
        } catch {
            problems += error.problems
            return nil
        }
        let found = problems.count
        var list = ConfigProblemList(node, path: "fleet")
        var brokers: [AMQPURL] = []
        if let given = c.brokers, !given.isEmpty {
            // Each broker's problem where that broker is written.
            var items: [YAMLNode] = []
            if case .sequence(let nodes, _)? = node["brokers"] { items = nodes }
            func add(_ i: Int, _ message: String) {
                problems.append(
                    ConfigProblem(
                        location: i < items.count ? items[i].location : node["brokers"]?.location ?? node.location,
                        path: "fleet.brokers[\(i)]", message: message))
            }
            for (i, text) in given.enumerated() {
                do {
                    let url = try AMQPURL(text)
                    if brokers.contains(where: { $0.host == url.host && $0.port == url.port }) {
                        add(i, "\(url.shown) is in the list twice")
                    }
                    brokers.append(url)
                } catch {
                    add(i, "\(error)")
                }
            }
        } else {
            list.add(
                "brokers",
                "fleet needs brokers: the RabbitMQ nodes' URLs, e.g. [\"amqp://healthgate:${AMQP_PASSWORD}@rmq1:5672/%2f\", …] "
                    + "(three nodes: a quorum survives one)")
        }
        let state = c.state ?? ""
        if !(state.hasPrefix("postgres://") || state.hasPrefix("postgresql://")) {
            list.add(
                "state",
                state.isEmpty
                    ? "fleet needs state: the PostgreSQL URL every machine shares, e.g. \"postgres://healthgate@db/healthgate\""
                    : "state is a PostgreSQL URL (postgres://user@host/database), not \"\(SafeText.url(state))\"")
        }
        let partitions = c.partitions ?? FleetSettings.defaultPartitions
        if !(1...FleetSettings.maxPartitions).contains(partitions) {
            list.add("partitions", "partitions is 1 to \(FleetSettings.maxPartitions) (a device's records always go to one of them)")
        }
        problems += list.problems
        return problems.count == found ? FleetSettings(brokers: brokers, state: state, partitions: partitions) : nil
    }
}

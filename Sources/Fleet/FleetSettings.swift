/// `fleet:`, checked: the brokers, the shared PostgreSQL and the partitions (docs/fleet.md).
public struct FleetSettings: Sendable, Equatable {
    public var brokers: [AMQPURL]
    /// A libpq connection URL (`postgres://…`): write-back commands, the replay cache, export
    /// ids, the request log and the state of stateful transforms and sinks, shared by the fleet.
    public var state: String
    public var partitions: Int

    public static let defaultPartitions = 16
    public static let maxPartitions = 1024

    public init(brokers: [AMQPURL], state: String, partitions: Int) {
        self.brokers = brokers
        self.state = state
        self.partitions = partitions
    }
}

/// What `serve --role` runs: `all` (the default) is one machine; with `fleet:`, `ingest`
/// machines take requests and publish them, `deliver` machines deliver them.
public enum FleetRole: String, Sendable, CaseIterable {
    case ingest, deliver, all
}

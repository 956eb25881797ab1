import Glibc
import HealthgateCore
import Posix
import Sinks

/// The running gateway: journal, sink drainers and HTTP listener, started in that order and
/// stopped in reverse (stop accepting, finish what is in flight, let each sink finish its
/// write, close the journal).
public final class GatewayService: @unchecked Sendable {
    public let topology: Topology
    public let journal: Journal
    public let drainers: [SinkDrainer]
    public let handler: IngestHandler
    let server: HTTPServer
    let logger: Logger

    public init(topology: Topology, logger: Logger, clock: any Clock = SystemClock(),
                signatureClock: any Clock = SystemClock()) throws {
        self.topology = topology
        self.logger = logger
        try FileIO.makeDirectories(topology.dataDir, mode: 0o700)
        journal = try Journal(directory: FileIO.join(topology.dataDir, "journal"), logger: logger.child("journal"))
        if journal.truncatedBytes > 0 || journal.recoveredEntries > 0 {
            logger.info("journal: \(journal.recoveredEntries) entries in the newest segment, up to #\(journal.lastDurableSeq)")
        }
        var drainers: [SinkDrainer] = []
        for s in topology.sinks {
            let routes = topology.routes.filter { $0.to.contains(s.name) }
            drainers.append(SinkDrainer(name: s.name, built: s.built, routes: routes, journal: journal,
                                        dataDir: topology.dataDir, logger: logger.child("sink \(s.name)")))
        }
        self.drainers = drainers
        let quarantine = Quarantine(directory: FileIO.join(topology.dataDir, "quarantine"), clock: clock)
        let metrics = drainers.map(\.metrics)
        handler = IngestHandler(receivers: topology.receivers.map(\.receiver), journal: journal, quarantine: quarantine,
                                clock: clock, signatureClock: signatureClock, logger: logger.child("ingest"),
                                sinkMetrics: { metrics })
        var keyPEM: String?
        var certPEM: String?
        if let tls = topology.tls {
            keyPEM = String(decoding: try FileIO.readAll(tls.key), as: UTF8.self)
            certPEM = String(decoding: try FileIO.readAll(tls.cert), as: UTF8.self)
        }
        server = HTTPServer(options: .init(host: topology.listenHost, port: topology.listenPort,
                                           threads: topology.http.threads ?? 8,
                                           connectionTimeoutSeconds: Int(topology.http.connection_timeout?.seconds ?? 30),
                                           connectionLimit: topology.http.max_connections ?? 1024,
                                           tlsKeyPEM: keyPEM, tlsCertPEM: certPEM),
                            handler: handler)
        let journal = self.journal
        for d in drainers {
            d.onCommit = {
                // Every sink has passed the entries below the smallest cursor.
                let lowest = metrics.map { $0.cursorSeq.load(ordering: .relaxed) }.min() ?? 0
                if lowest > 1 { journal.deleteSegments(below: lowest) }
            }
        }
    }

    /// Starts everything; returns the HTTP port.
    public func start() throws -> UInt16 {
        for d in drainers { try d.start() }
        return try server.start()
    }

    public func stop() {
        server.stop()
        for d in drainers { d.stop() }
        journal.close()
    }
}

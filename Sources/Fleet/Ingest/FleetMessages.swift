import CanonicalJSON

/// A request's records as the broker takes them: one message per partition its devices fall
/// in, each holding that partition's canonical lines in the request's order, at most
/// `EntryCuts.entryBytes` a message (a longer line is a message of its own), as the journal
/// cuts a request into entries.
public enum FleetMessages {
    public static func make(_ batch: ReceivedBatch, partitions: Int) -> [(key: String, body: [UInt8])] {
        guard let first = batch.device else { return [] }
        let home = FleetQueues.partition(of: first, among: partitions)
        if batch.devices.count == 1 {
            // One phone (nearly every request): the journal's own cuts, no line read.
            let key = FleetQueues.key(home)
            return batch.cuts.parts(total: batch.payload.count).map { (key, Array(batch.payload[$0.range])) }
        }
        var open: [Int: [UInt8]] = [:]
        var out: [(key: String, body: [UInt8])] = []
        func add(_ line: ArraySlice<UInt8>, to p: Int) {
            if let body = open[p], !body.isEmpty, body.count + line.count + 1 > EntryCuts.entryBytes {
                out.append((FleetQueues.key(p), body))
                open[p] = []
            }
            open[p, default: []].append(contentsOf: line)
            open[p]!.append(0x0A)
        }
        var partitionOf: [String: Int] = [:]
        Record.forEach(
            in: batch.payload,
            bad: { _, line, _ in add(line, to: home) } // ingest's own lines: never, but never dropped either
        ) { record, _ in
            let device = record.device
            let p = partitionOf[device] ?? FleetQueues.partition(of: device, among: partitions)
            partitionOf[device] = p
            var line: [UInt8] = []
            record.appendLine(to: &line)
            add(line.dropLast(), to: p)
        }
        for (p, body) in open.sorted(by: { $0.key < $1.key }) where !body.isEmpty { out.append((FleetQueues.key(p), body)) }
        return out
    }
}

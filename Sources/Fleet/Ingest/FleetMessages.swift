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
        // A line appended to its partition's open message: past the entry size with lines
        // before it, those go as a message and it starts the next.
        func cut(_ p: Int, before: Int) {
            guard before > 0, let body = open[p], body.count > EntryCuts.entryBytes else { return }
            out.append((FleetQueues.key(p), Array(body[..<before])))
            open[p] = Array(body[before...])
        }
        var partitionOf: [String: Int] = [:]
        Record.forEach(
            in: batch.payload,
            bad: { _, line, _ in
                // ingest's own lines: never, but never dropped either
                let before = open[home]?.count ?? 0
                open[home, default: []].append(contentsOf: line)
                open[home]!.append(0x0A)
                cut(home, before: before)
            }
        ) { record, _ in
            let device = record.device
            let p = partitionOf[device] ?? FleetQueues.partition(of: device, among: partitions)
            partitionOf[device] = p
            let before = open[p]?.count ?? 0
            record.appendLine(to: &open[p, default: []])
            cut(p, before: before)
        }
        for (p, body) in open.sorted(by: { $0.key < $1.key }) where !body.isEmpty { out.append((FleetQueues.key(p), body)) }
        return out
    }
}

import CanonicalJSON
import Fleet
import HealthgateCore
import Testing

@Suite struct FleetMessagesTests {
    func sample(_ device: String, _ n: Int, padding: Int = 0) -> CanonicalRecord {
        var r = CanonicalRecord(kind: "quantity", device: device, receiver: "phone", uuid: "u-\(device)-\(n)", type: "steps")
        r.value = .number(Double(n))
        r.unit = "count"
        r.start = Timestamp(seconds: 1_760_400_000 + Int64(n))
        if padding > 0 { r.activity = String(repeating: "x", count: padding) }
        return r
    }

    /// Every message's lines, by partition key, as text.
    func lines(_ messages: [(key: String, body: [UInt8])]) -> [String: [String]] {
        var out: [String: [String]] = [:]
        for m in messages {
            out[m.key, default: []] += String(decoding: m.body, as: UTF8.self).split(separator: "\n").map(String.init)
            #expect(m.body.last == 0x0A)
        }
        return out
    }

    @Test func aRequestOfOnePhoneIsItsPartitionsMessagesAsTheJournalCutsIt() {
        var batch = ReceivedBatch()
        for n in 0..<3 { batch.append(sample("phone-a", n)) }
        let messages = FleetMessages.make(batch, partitions: 16)
        #expect(messages.count == 1)
        #expect(messages[0].key == FleetQueues.key(FleetQueues.partition(of: "phone-a", among: 16)))
        #expect(messages[0].body == batch.payload)
        #expect(FleetMessages.make(ReceivedBatch(), partitions: 16).isEmpty)
    }

    @Test func aRequestOfSeveralPhonesIsSplitByPartitionInItsOrderAndNothingIsLost() {
        var batch = ReceivedBatch()
        let devices = (0..<6).map { "phone-\($0)" }
        for n in 0..<60 { batch.append(sample(devices[n % devices.count], n)) }
        let all = String(decoding: batch.payload, as: UTF8.self).split(separator: "\n").map(String.init)
        let got = lines(FleetMessages.make(batch, partitions: 4))
        #expect(got.values.reduce(0) { $0 + $1.count } == all.count)
        for device in devices {
            let key = FleetQueues.key(FleetQueues.partition(of: device, among: 4))
            let expected = all.filter { $0.contains("\"device\":\"\(device)\"") }
            #expect(got[key, default: []].filter { $0.contains("\"device\":\"\(device)\"") } == expected)
        }
    }

    @Test func noMessageIsOverTheJournalsEntrySizeButALongerLineGoesAlone() {
        var batch = ReceivedBatch()
        for n in 0..<40 { batch.append(sample(n % 2 == 0 ? "phone-a" : "phone-b", n, padding: 100_000)) }
        batch.append(sample("phone-a", 99, padding: 1_500_000))
        let messages = FleetMessages.make(batch, partitions: 1)
        for m in messages where m.body.count > EntryCuts.entryBytes {
            #expect(m.body.split(separator: 0x0A).count == 1)
        }
        #expect(messages.count >= 5)
        let total = messages.reduce(0) { $0 + $1.body.count }
        #expect(total == batch.payload.count)
    }
}

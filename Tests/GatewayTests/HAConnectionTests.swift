import FastJSON
import Foundation
@testable import HealthgateTesting
import SinkHomeAssistant
import Testing

/// Home Assistant's websocket API from healthgate's client, against a real Home Assistant
/// (2024.3.3, with its recorder): the login, a command and its result, long-term statistics
/// imported and read back, and the failures a user meets (a wrong token, nobody there).
@Suite(.serialized) struct HAConnectionTests {
    @Test func itLogsInImportsStatisticsAndReadsThemBack() throws {
        let broker = try DatabaseProcess.mosquitto()
        let (ha, token) = try DatabaseProcess.homeAssistant(brokerPort: broker.port, recorder: true)
        let c = try HAConnection(url: ha.url, token: token)
        #expect(c.haVersion == "2024.3.3")
        let config = String(decoding: try c.call("get_config"), as: UTF8.self)
        #expect(config.contains(#""time_zone":"UTC""#), "\(config)")

        // Two hours of steps as an external statistic: hourly sums, the running sum from 0.
        let hour = (Int64(Date().timeIntervalSince1970) / 3600 - 3) * 3600
        func iso(_ t: Int64) -> String { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(t))) }
        _ = try c.call("recorder/import_statistics") { w in
            w.key("metadata"); w.beginObject()
            w.key("has_mean"); w.raw(Array("false".utf8))
            w.key("has_sum"); w.raw(Array("true".utf8))
            w.key("name"); w.string("Anna steps")
            w.key("source"); w.string("healthgate")
            w.key("statistic_id"); w.string("healthgate:anna_steps")
            w.key("unit_of_measurement"); w.string("steps")
            w.endObject()
            w.key("stats"); w.beginArray()
            for (i, (state, sum)) in [(1200.0, 1200.0), (300.0, 1500.0)].enumerated() {
                w.beginObject()
                w.key("start"); w.string(iso(hour + Int64(i) * 3600))
                w.key("state"); w.double(state)
                w.key("sum"); w.double(sum)
                w.endObject()
            }
            w.endArray()
        }
        var rows: [[String: Any]] = []
        let seen = ServeProcess.eventually(30) {
            guard
                let bytes = try? c.call(
                    "recorder/statistics_during_period",
                    { w in
                        w.key("start_time"); w.string(iso(hour - 3600))
                        w.key("statistic_ids"); w.beginArray(); w.string("healthgate:anna_steps"); w.endArray()
                        w.key("period"); w.string("hour")
                    })
            else { return false }
            let json = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
            rows = json?["healthgate:anna_steps"] as? [[String: Any]] ?? []
            return rows.count == 2
        }
        #expect(seen, "\(rows)")
        #expect(rows.map { $0["sum"] as? Double } == [1200, 1500], "\(rows)")
        #expect((rows.first?["start"] as? Double).map { Int64($0 / 1000) } == hour, "\(rows)")

        // A command HA refuses is a failure with its words, the connection still good.
        #expect {
            _ = try c.call("recorder/import_statistics") { w in
                w.key("metadata"); w.raw(Array("{}".utf8))
            }
        } throws: { error in
            "\(error)".contains("Home Assistant refused recorder/import_statistics")
        }
        #expect(!(try c.call("get_config")).isEmpty)

        #expect {
            _ = try HAConnection(url: ha.url, token: "not-the-token-0123456789")
        } throws: { error in
            "\(error)".contains("refused the access token") && !"\(error)".contains("not-the-token")
        }
    }

    @Test func nobodyThereAndNoURLAreClearFailures() {
        let port = ScriptedEndpoint.freePort()
        #expect {
            _ = try HAConnection(url: "http://127.0.0.1:\(port)", token: "t", timeout: 3)
        } throws: { error in
            "\(error)".contains("cannot reach Home Assistant at http://127.0.0.1:\(port)")
        }
        #expect(throws: HAConnection.Failure.self) { _ = try HAConnection(url: "mqtt://ha:1883", token: "t") }
        #expect(throws: HAConnection.Failure.self) { _ = try HAConnection(url: "http://:8123", token: "t") }
        #expect(throws: HAConnection.Failure.self) { _ = try HAConnection(url: "http://ha:99999", token: "t") }
    }
}

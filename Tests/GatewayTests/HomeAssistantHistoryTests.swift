import Foundation
import HealthgateCore
import Posix
@testable import HealthgateTesting
@testable import SinkHomeAssistant
import Testing

/// The `homeassistant` sink against a real Home Assistant (2024.3.3 with its recorder): what a
/// phone sent shows in HA's own `recorder/statistics_during_period` as hourly sums and means;
/// late samples, resends and deletions leave every hour right; samples older than `history`
/// never arrive; HA away or restarted, healthgate restarted, HA's statistics lost: every value
/// comes out right; a wrong token is a failing sink whose records wait, and never in a log.
@Suite(.serialized) struct HomeAssistantHistoryTests {
    static let anna = "d_zsOZnTQUz_juWFVljuOOBQ"

    static func config(_ ha: DatabaseProcess, token: String, history: String = "2d", wrong: Bool = true) -> String {
        """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
        \(Vectors.phoneReceiver)
        routes:
          - {from: [phone], to: [history\(wrong ? ", wrong" : "")]}
        sinks:
          history:
            kind: homeassistant
            url: \(ha.url)
            token: \(token)
            history: \(history)
            names: {\(anna): "Anna"}
            timeout: 5s
            retry: {initial: 100ms, max: 1s}
            batch: {max_wait: 10ms}
        """
            + (wrong
                ? """

                  wrong:
                    kind: homeassistant
                    url: \(ha.url)
                    token: not-the-token-abcdef0123456789
                    retry: {initial: 100ms, max: 1s}
                """ : "")
    }

    static func q(_ uuid: String, _ type: String, _ value: Double, _ unit: String, at t: Int64) -> String {
        let start = Timestamp(seconds: t).rfc3339()
        return #"{"uuid":"\#(uuid)","type":"\#(type)","value":\#(value),"unit":"\#(unit)","start":"\#(start)","end":"\#(start)"}"#
    }

    static func post(_ serve: ServeProcess, _ samples: [String], deleted: [String] = []) throws {
        let body = Vectors.syncBody(samples: samples, deleted: deleted, delivery: UUID().uuidString.lowercased())
        let r = try serve.client().request("POST", "/hook", headers: LiveServeTests.signedHeaders(body), body: Array(body.utf8))
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
    }

    /// HA's hourly rows of a statistic since `since`: start (s) → its values.
    static func rows(_ c: HAConnection, _ id: String, since: Int64) -> [Int64: [String: Double]]? {
        guard
            let bytes = try? c.call(
                "recorder/statistics_during_period",
                { w in
                    w.key("start_time"); w.string(Timestamp(seconds: since).rfc3339())
                    w.key("statistic_ids"); w.beginArray(); w.string(id); w.endArray()
                    w.key("period"); w.string("hour")
                    w.key("types"); w.beginArray(); for t in ["sum", "mean", "min", "max"] { w.string(t) }; w.endArray()
                }),
            let json = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        else { return nil }
        var out: [Int64: [String: Double]] = [:]
        for row in json[id] as? [[String: Any]] ?? [] {
            guard let ms = row["start"] as? Double else { continue }
            out[Int64(ms / 1000)] = row.compactMapValues { $0 as? Double }.filter { $0.key != "start" && $0.key != "end" }
        }
        return out
    }

    static func id(_ type: String) -> String { HAStatisticIDs.id(device: anna, type: type) }

    /// Waits until HA shows `expected` for the statistic (every hour, every value); says what it has otherwise.
    static func expectRows(
        _ c: () -> HAConnection?, _ type: String, since: Int64, _ expected: [Int64: [String: Double]], within: Double = 90,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        var have: [Int64: [String: Double]] = [:]
        let same = ServeProcess.eventually(within) {
            guard let conn = c(), let r = rows(conn, id(type), since: since) else { return false }
            have = r
            return r.count == expected.count
                && expected.allSatisfy { hour, values in
                    values.allSatisfy { k, v in r[hour]?[k].map { abs($0 - v) < 1e-6 } ?? false }
                }
        }
        #expect(
            same, "\(type): HA has \(have.sorted { $0.key < $1.key }), not \(expected.sorted { $0.key < $1.key })",
            sourceLocation: sourceLocation)
    }

    @Test func historyReachesHomeAssistantsStatisticsAndStaysRightThroughEverything() throws {
        let broker = try DatabaseProcess.mosquitto()
        var ha: DatabaseProcess?
        let token: String
        (ha, token) = try DatabaseProcess.homeAssistant(brokerPort: broker.port, recorder: true)
        let url = ha!.url
        var reader: HAConnection? = try HAConnection(url: url, token: token)
        let conn: () -> HAConnection? = {
            if reader == nil { reader = try? HAConnection(url: url, token: token) }
            return reader
        }
        var serve = try ServeProcess(config: Self.config(ha!, token: token))
        let now = Int64(Date().timeIntervalSince1970)
        let h = HourlyBook.hour(now)
        let since = h - 3 * 86_400

        try Self.post(
            serve,
            [
                Self.q("s1", "steps", 100, "count", at: h - 5 * 3600 + 600), Self.q("s2", "steps", 50, "count", at: h - 5 * 3600 + 2400),
                Self.q("s3", "steps", 200, "count", at: h - 3 * 3600 + 300),
                Self.q("s-old", "steps", 999, "count", at: now - 3 * 86_400), // older than `history: 2d`
                Self.q("h1", "heart_rate", 60, "count/min", at: h - 2 * 3600 + 60),
                Self.q("h2", "heart_rate", 80, "count/min", at: h - 2 * 3600 + 120),
                Self.q("h3", "heart_rate", 70, "count/min", at: h - 2 * 3600 + 180),
                Self.q("h4", "heart_rate", 90, "count/min", at: h - 3600 + 300),
                Self.q("d1", "distance_walking_running", 1830, "m", at: h - 3 * 3600),
                Self.q("o1", "oxygen_saturation", 0.97, "%", at: h - 4 * 3600)
            ])
        Self.expectRows(conn, "steps", since: since, [h - 5 * 3600: ["sum": 150], h - 3 * 3600: ["sum": 350]])
        Self.expectRows(
            conn, "heart_rate", since: since, [h - 7200: ["mean": 70, "min": 60, "max": 80], h - 3600: ["mean": 90, "min": 90, "max": 90]])
        Self.expectRows(conn, "distance_walking_running", since: since, [h - 3 * 3600: ["sum": 1.83]])
        Self.expectRows(conn, "oxygen_saturation", since: since, [h - 4 * 3600: ["mean": 97]])
        // HA's own word on the units and the name.
        let metadata = String(
            decoding: try conn()!.call("recorder/list_statistic_ids") { w in
                w.key("statistic_type"); w.string("sum")
            }, as: UTF8.self)
        #expect(metadata.contains(#""statistic_id":"\#(Self.id("steps"))""#) && metadata.contains(#""name":"Steps (Anna)""#), "\(metadata)")
        #expect(metadata.contains(#""statistics_unit_of_measurement":"km""#), "\(metadata)")

        // A late sample, a resend, two deletions (the only sample of an hour among them).
        try Self.post(
            serve,
            [Self.q("s0", "steps", 25, "count", at: h - 6 * 3600 + 60), Self.q("s1", "steps", 100, "count", at: h - 5 * 3600 + 600)],
            deleted: [#"{"uuid":"h2","type":"heart_rate"}"#, #"{"uuid":"h4","type":"heart_rate"}"#])
        Self.expectRows(conn, "steps", since: since, [h - 6 * 3600: ["sum": 25], h - 5 * 3600: ["sum": 175], h - 3 * 3600: ["sum": 375]])
        Self.expectRows(conn, "heart_rate", since: since, [h - 7200: ["mean": 65, "min": 60, "max": 70], h - 3600: [:]])

        // The wrong token: a failing sink, its records waiting, the token in no log.
        var health: [String: Any] = [:]
        #expect(
            ServeProcess.eventually(20) {
                health = serve.healthz()
                return (health["sinks"] as? [String: String])?["wrong"] == "failing"
            }, "\(health)")
        var status = ""
        #expect(
            ServeProcess.eventually(10) { // status.json is written once a second
                status = (try? CLITests.run(["status", "--config", serve.configPath]))?.out ?? ""
                return status.contains("FAILING") && status.contains("refused the access token")
            }, "\(status)")
        #expect((FileIO.fileSize(serve.dataDir + "/sinks/wrong/dead-letters.ndjson") ?? 0) == 0)

        // Home Assistant away: the sample waits; back (its data kept), it arrives.
        let again = ha!.restartableHomeAssistant()
        reader = nil
        ha = nil
        try Self.post(serve, [Self.q("s4", "steps", 10, "count", at: h - 3600 + 60)])
        #expect(
            ServeProcess.eventually(20) {
                health = serve.healthz()
                return ["unreachable", "failing"].contains((health["sinks"] as? [String: String])?["history"] ?? "")
            }, "\(health)")
        ha = try again()
        Self.expectRows(
            conn, "steps", since: since,
            [h - 6 * 3600: ["sum": 25], h - 5 * 3600: ["sum": 175], h - 3 * 3600: ["sum": 375], h - 3600: ["sum": 385]])
        Self.expectRows(conn, "oxygen_saturation", since: since, [h - 4 * 3600: ["mean": 97]])

        // HA loses the steps (a backup from before them); healthgate restarts and keeps counting
        // from where it was: the sums go on, and what HA lost is written again.
        serve.stop()
        _ = try conn()!.call("recorder/clear_statistics") { w in
            w.key("statistic_ids"); w.beginArray(); w.string(Self.id("steps")); w.endArray()
        }
        Self.expectRows(conn, "steps", since: since, [:])
        serve = try ServeProcess(config: Self.config(ha!, token: token), dataDir: serve.dataDir)
        try Self.post(serve, [Self.q("s5", "steps", 5, "count", at: h - 5 * 3600 + 3000)])
        Self.expectRows(
            conn, "steps", since: since,
            [h - 6 * 3600: ["sum": 25], h - 5 * 3600: ["sum": 180], h - 3 * 3600: ["sum": 380], h - 3600: ["sum": 390]])
        #expect(!serve.stderrText.contains(token) && !serve.stderrText.contains("not-the-token"), "a token in the log")
        #expect(!serve.stderrText.contains("1830") && !serve.stderrText.contains("0.97"), "a health value in the log")
        serve.stop()
        _ = ha
    }

    /// The README's picture: four weeks a phone sent at its first sync, in Home Assistant's own
    /// Statistics graph cards, rendered by its frontend in headless Chromium.
    @Test func aBackfillFillsHomeAssistantsHistoryGraphs() throws {
        let broker = try DatabaseProcess.mosquitto()
        let dashboard = """
            title: Anna's health
            views:
              - title: History
                path: history
                type: panel
                cards:
                  - type: vertical-stack
                    cards:
                      - type: statistics-graph
                        title: Steps per day (Anna) — four weeks sent at the first sync
                        entities: [\(Self.id("steps"))]
                        stat_types: [change]
                        chart_type: bar
                        period: day
                        days_to_show: 28
                      - type: statistics-graph
                        title: Heart rate per day (Anna)
                        entities: [\(Self.id("heart_rate"))]
                        stat_types: [mean, min, max]
                        chart_type: line
                        period: day
                        days_to_show: 28
            """
        let (ha, token) = try DatabaseProcess.homeAssistant(brokerPort: broker.port, recorder: true, dashboard: dashboard)
        let serve = try ServeProcess(config: Self.config(ha, token: token, history: "30d", wrong: false))
        let now = Int64(Date().timeIntervalSince1970)
        let today = now / 86_400 * 86_400
        // Four weeks: steps in the waking hours, heart rate three times an hour; a day's figures
        // vary with the day as a person's do.
        var steps = 0.0
        for day in Int64(1)...27 {
            var samples: [String] = []
            for hour in Int64(0)..<24 {
                let t = today - day * 86_400 + hour * 3600
                if (7...22).contains(hour) {
                    let n = Double(150 + (day * 37 + hour * 53) % 500 + (day % 7 == 6 ? 400 : 0))
                    steps += n
                    samples.append(Self.q("st-\(day)-\(hour)", "steps", n, "count", at: t + 600))
                }
                for k in Int64(0)..<3 {
                    let bpm = Double((hour < 7 ? 54 : 68) + (day * 7 + hour * 3 + k * 5) % 25)
                    samples.append(Self.q("hr-\(day)-\(hour)-\(k)", "heart_rate", bpm, "count/min", at: t + k * 1200))
                }
            }
            try Self.post(serve, samples)
        }
        let conn = try HAConnection(url: ha.url, token: token)
        var have = 0.0
        #expect(
            ServeProcess.eventually(120) {
                let rows = Self.rows(conn, Self.id("steps"), since: today - 28 * 86_400) ?? [:]
                have = rows.values.compactMap { $0["sum"] }.max() ?? 0
                return rows.count == 27 * 16 && abs(have - steps) < 0.5
            }, "HA has a sum of \(have) steps, not \(steps)")

        let shot = serve.dataDir + "-ha-history.png"
        let (rc, out) = try DatabaseProcess.run(
            HomeAssistantVenv.path + "/bin/python",
            [HomeAssistantVenv.client, "screenshot", try ha.homeAssistantSignIn(path: "/lovelace/history"), shot, "1000", "1300", "12"],
            timeout: 90)
        #expect(rc == 0, "\(out)")
        let png = try Data(contentsOf: URL(fileURLWithPath: shot))
        // HEALTHGATE_HA_SCREENSHOT_TO=docs/sinks/homeassistant-history.png keeps it for the docs.
        if let to = ProcessInfo.processInfo.environment["HEALTHGATE_HA_SCREENSHOT_TO"] { try png.write(to: URL(fileURLWithPath: to)) }
        #expect(png.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]), "\(png.count) bytes")
        let (crc, colors) = try DatabaseProcess.run(HomeAssistantVenv.path + "/bin/python", [HomeAssistantVenv.client, "colors", shot])
        let pixels = (try? JSONSerialization.jsonObject(with: Data(colors.utf8)) as? [String: Int]) ?? [:]
        // The charts are drawn: the steps' bars (HA's first graph colour, #44739e, filled at half
        // strength) cover a good part of the page; "Loading statistics…" or a login page has none.
        #expect(crc == 0 && (pixels["#a2b9cf"] ?? 0) > 20_000, "\(pixels.sorted { $0.value > $1.value }.prefix(12))")
        #expect((pixels["#44739e"] ?? 0) > 2_000, "no line of HA's first graph colour")
        serve.stop()
    }
}

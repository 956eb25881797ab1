import Foundation
@testable import Gateway
import HealthgateCore
import HealthgateCrypto
@testable import HealthgateTesting
@testable import Pipeline
import Posix
import Testing

/// The status page (`GET /`) and its JSON (`GET /status`): rendered by a real headless Chromium
/// (Debian `chromium`, installed by `make test`), whose screenshot's QR code decodes (`zbarimg`,
/// zbar-tools) to exactly what `healthgate link` prints; answered on loopback only, not through a
/// proxy, unless an admin token is set, and then to that token alone.
@Suite(.serialized) struct StatusPageTests {
    static let config = """
        listen: 127.0.0.1:0
        data_dir: DATA_DIR
        receivers:
          my-iphone:
            kind: syncky
            path: /hook
            auth: {type: bearer, token: \(Vectors.token)}
            hmac: {secret: \(Vectors.secret)}
            name: "Anna's <iPhone> & co"
            public_url: https://gw.example.net/hook
        routes:
          - {from: [my-iphone], to: [archive, down]}
        sinks:
          archive: {kind: file, path: "archive/{device}.ndjson"}
          down: {kind: http, url: "http://127.0.0.1:9/nothing", retry: {initial: 100ms, max: 1s}}
        journal: {max_bytes: 64MB}
        """

    static func run(_ executable: String, _ args: [String]) throws -> (Int32, String) {
        try DatabaseProcess.run(executable, args, timeout: 60)
    }

    @Test func thePageRendersInChromiumAndItsQRCodeDecodesToTheLink() throws {
        // The links on this machine's own page without a token: turned on knowingly.
        let serve = try ServeProcess(config: Self.config + "\nadmin: {local_links: true}\n")
        let delivery = UUID().uuidString.lowercased()
        let body = Vectors.syncBody(
            samples: [PostgresSinkTests.q("s1", "steps", 1200, "count", at: PostgresSinkTests.base)], delivery: delivery)
        #expect(
            try serve.client().request(
                "POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
                body: Array(body.utf8)
            ).status == 200)
        #expect(ServeProcess.eventually { serve.metric("healthgate_sink_records_sent_total", sink: "archive") == 1 })

        let page = try serve.client().request("GET", "/")
        #expect(page.status == 200)
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(html.contains("my-iphone (syncky)") && html.contains("archive") && html.contains("<svg"))
        #expect(html.contains("Anna%27s%20%3CiPhone%3E") && !html.contains("<iPhone>"), "sender text is escaped")
        #expect(html.contains("of its budget of 61 MiB"))
        #expect(!html.contains("src=") && !html.contains("<link"), "no external asset")
        // Not to be framed by another page (clickjacking).
        #expect(page.headers.contains { $0.0.lowercased() == "content-security-policy" && $0.1.contains("frame-ancestors 'none'") })
        #expect(page.headers.contains { $0.0.lowercased() == "x-frame-options" && $0.1 == "DENY" })

        let shot = serve.dataDir + "-page.png"
        let (rc, out) = try Self.run(
            "/usr/bin/chromium",
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--window-size=1000,1400", "--screenshot=\(shot)",
                "http://127.0.0.1:\(serve.port)/"
            ])
        #expect(rc == 0, "\(out)")
        let png = try Data(contentsOf: URL(fileURLWithPath: shot))
        // The README's picture is this one: HEALTHGATE_SCREENSHOT_TO=docs/status-page.png.
        if let to = ProcessInfo.processInfo.environment["HEALTHGATE_SCREENSHOT_TO"] { try png.write(to: URL(fileURLWithPath: to)) }
        #expect(png.count > 10_000 && png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        let (zrc, decoded) = try Self.run("/usr/bin/zbarimg", ["-q", "--raw", shot])
        #expect(zrc == 0)
        let link = try CLITests.run(["link", "--config", serve.configPath])
        #expect(link.status == 0)
        #expect(decoded.trimmingCharacters(in: .whitespacesAndNewlines) == link.out.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(decoded.hasPrefix("syncky://webhook?v=1&name=Anna%27s"))
        // On a phone's width too.
        let narrow = serve.dataDir + "-phone.png"
        #expect(
            try Self.run(
                "/usr/bin/chromium",
                [
                    "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=390,1600", "--screenshot=\(narrow)",
                    "http://127.0.0.1:\(serve.port)/"
                ]
            ).0 == 0)
        #expect(try Self.run("/usr/bin/zbarimg", ["-q", "--raw", narrow]).1.contains("token=\(Vectors.token)"))

        // The JSON: receivers with their last request, sinks with their queue and last error.
        let j = try serve.client().request("GET", "/status")
        let status = try JSONSerialization.jsonObject(with: Data(j.body)) as? [String: Any] ?? [:]
        let receiver = (status["receivers"] as? [[String: Any]])?.first
        #expect(receiver?["last_status"] as? Int == 200 && receiver?["last_request"] is String)
        let down = (status["sinks"] as? [[String: Any]])?.first { $0["name"] as? String == "down" }
        #expect(
            ServeProcess.eventually {
                let s =
                    (try? serve.client().request("GET", "/status")).flatMap { try? JSONSerialization.jsonObject(with: Data($0.body)) }
                    as? [String: Any]
                let d = (s?["sinks"] as? [[String: Any]])?.first { $0["name"] as? String == "down" }
                return d?["waiting_records"] as? Int == 1 && d?["last_error"] is String && d?["lag_seconds"] is Int
            }, "\(String(describing: down))")
        #expect((status["journal"] as? [String: Any])?["max_bytes"] as? Int == 64_000_000)
        serve.stop()
    }

    /// Issue 47: a user pairing a phone could not see whether it got through. The page lists each
    /// phone (last seen, requests, records, its last refusal), each receiver's last refusal (401s
    /// included), what was set aside with its newest reason, and — where it may show secrets —
    /// what to enter in each app. It refreshes its live part in place (a script its CSP allows by
    /// hash alone), so what the user opened stays open; the log names each phone's first request
    /// and sums refusals up instead of a line each.
    @Test func thePageSaysWhoGetsThroughAndWhatToEnterInEachApp() throws {
        let hae = """
              hae-phone:
                kind: hae
                path: /api/data
                auth: {type: bearer, token: hae-token-0123456789abcdef}
            """
        let config = Self.config.replacingOccurrences(of: "\nroutes:", with: "\n" + hae + "\nroutes:")
        let serve = try ServeProcess(config: config + "\nadmin: {local_links: true}\n")
        let client = serve.client()
        let device = "d_pagetest_\(UInt32.random(in: 0...UInt32.max))"
        // A wrong token, then two deliveries, then twenty bodies that cannot be read.
        var wrong = LiveServeTests.signedHeaders("{}")
        wrong = LiveServeTests.replacing(wrong, "Authorization", "Bearer not-the-token")
        #expect(try client.request("POST", "/hook", headers: wrong, body: Array("{}".utf8)).status == 401)
        for n in 0..<2 {
            let delivery = UUID().uuidString.lowercased()
            let body = Vectors.syncBody(
                device: device, samples: [PostgresSinkTests.q("p\(n)", "steps", 100, "count", at: PostgresSinkTests.base)],
                delivery: delivery)
            #expect(
                try client.request(
                    "POST", "/hook", headers: LiveServeTests.signedHeaders(body, delivery: delivery),
                    body: Array(body.utf8)
                ).status == 200)
        }
        for n in 0..<20 {
            let junk = "{\"v\":1,\"type\":\"sync\",\"n\":\(n)" // cut short; each signed once
            let r = try client.request("POST", "/hook", headers: LiveServeTests.signedHeaders(junk), body: Array(junk.utf8))
            #expect(r.status == 400, "\(r.status) \(String(decoding: r.body, as: UTF8.self))")
        }

        let page = try client.request("GET", "/")
        let html = String(decoding: page.body, as: UTF8.self)
        // What to enter in each app, with the receiver's own URL and token.
        #expect(html.contains("What to enter in each app") && html.contains("Health Auto Export"), "\(html.suffix(3000))")
        #expect(html.contains("http://127.0.0.1:\(serve.port)/api/data") && html.contains("Bearer hae-token-0123456789abcdef"))
        #expect(html.contains("Signing secret") && html.contains(Vectors.secret))
        // The receiver's last refusal, the phone, and what was set aside.
        #expect(html.contains("from 127.0.0.1: "), "\(html)")
        let devices = try #require(html.range(of: "<h2>Devices</h2>").map { String(html[$0.upperBound...]) })
        #expect(devices.contains("<code>\(device)</code></td><td>my-iphone</td>"), "\(devices.prefix(1500))")
        #expect(devices.contains("<td class=\"n\">2</td><td class=\"n\">2</td>"), "two requests, two records")
        #expect(html.contains("quarantine of my-iphone</td><td class=\"n\">20 ("), "\(html)")
        // The one script is the one the CSP allows, by its hash.
        let script = try #require(
            html.range(of: "<script>").flatMap { a in html.range(of: "</script>").map { String(html[a.upperBound..<$0.lowerBound]) } })
        var hash = Crypto.base64url(Crypto.sha256(Array(script.utf8))).replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_", with: "/")
        while hash.count % 4 != 0 { hash += "=" }
        let csp = page.headers.first { $0.0.lowercased() == "content-security-policy" }?.1 ?? ""
        #expect(
            csp.contains("script-src 'sha256-\(hash)'") && csp.contains("connect-src 'self'") && !csp.contains("unsafe-inline'; script"),
            "\(csp)")
        #expect(
            !html.replacingOccurrences(of: "<noscript><meta http-equiv=\"refresh\" content=\"10\"></noscript>", with: "").contains(
                "http-equiv=\"refresh\""),
            "a page that reloads whole closes what the user opened")
        // In a real browser the script runs under that CSP and swaps the live part in place.
        let (rc, dom) = try Self.run(
            "/usr/bin/chromium",
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=25000",
                "--dump-dom", "http://127.0.0.1:\(serve.port)/"
            ])
        #expect(rc == 0 && dom.contains("id=\"live\" data-refreshed=\"1\""), "\(dom.prefix(600))")

        // The log: the phone's first request once; the twenty refusals in a few lines.
        let log = serve.stderrText
        #expect(log.components(separatedBy: "my-iphone: first request from device \(device)").count == 2, "\(log)")
        let refusalLines = log.split(separator: "\n").filter { $0.contains("my-iphone: refused") }
        #expect(refusalLines.count >= 1 && refusalLines.count <= 3, "\(refusalLines)")
        serve.stop()

        // Without the admin token or local_links, no token is on the page.
        let plain = try ServeProcess(config: config)
        let bare = String(decoding: try plain.client().request("GET", "/").body, as: UTF8.self)
        #expect(!bare.contains("What to enter") && !bare.contains("hae-token-0123456789abcdef") && bare.contains("<h2>Devices</h2>"))
        plain.stop()
    }

    @Test func onlyThisMachineOrTheAdminTokenOpensIt() throws {
        let serve = try ServeProcess(config: Self.config)
        #expect(try serve.client().request("GET", "/status").status == 200)
        // Issue 46: without an admin token, this machine's page holds no secret (a proxy here
        // that adds no header looks local), and says how to get the link.
        let local = String(decoding: try serve.client().request("GET", "/").body, as: UTF8.self)
        #expect(local.contains("Receivers") && local.contains("healthgate link --qr"))
        #expect(
            !local.contains(Vectors.token) && !local.contains(Vectors.secret) && !local.contains("syncky://") && !local.contains("<svg"))
        // Through a proxy on this machine the request is not this machine's own, whatever header says so.
        for header in [
            "X-Forwarded-For", "X-Real-IP", "X-Client-IP", "True-Client-IP", "CF-Connecting-IP", "Via", "X-Forwarded-Host",
            "Forwarded"
        ] {
            let proxied = try serve.client().request("GET", "/", headers: [(header, "203.0.113.9")])
            #expect(proxied.status == 403, "\(header)")
        }
        // DNS rebinding: a page on another name that resolves to 127.0.0.1.
        for host in ["attacker.example", "attacker.example:8080", "localhost.attacker.example", "127.0.0.1.nip.io"] {
            #expect(try serve.client().request("GET", "/", headers: [("Host", host)]).status == 403, "\(host)")
        }
        for host in ["localhost", "localhost:8080", "127.0.0.1", "[::1]:8080", "status.localhost"] {
            #expect(try serve.client().request("GET", "/status", headers: [("Host", host)]).status == 200, "\(host)")
        }
        #expect(try serve.client().request("POST", "/status").status == 405)
        serve.stop()

        let admin = "admin-token-0123456789abcdef"
        let guarded = try ServeProcess(config: Self.config + "\nadmin: {token: \(admin)}\n")
        let none = try guarded.client().request("GET", "/")
        #expect(none.status == 401 && none.headers.contains { $0.0.lowercased() == "www-authenticate" && $0.1.hasPrefix("Basic") })
        #expect(try guarded.client().request("GET", "/", headers: [("Authorization", "Bearer \(Vectors.token)")]).status == 401)
        #expect(try guarded.client().request("GET", "/status", headers: [("Authorization", "Bearer \(admin)")]).status == 200)
        let basic = Data("me:\(admin)".utf8).base64EncodedString()
        let opened = try guarded.client().request("GET", "/", headers: [("Authorization", "Basic \(basic)")])
        #expect(opened.status == 200)
        // Behind the token the page has the links, through a proxy and for any name too.
        #expect(String(decoding: opened.body, as: UTF8.self).contains("syncky://webhook"))
        #expect(
            try guarded.client().request(
                "GET", "/",
                headers: [
                    ("Authorization", "Bearer \(admin)"), ("Host", "gw.example.net"),
                    ("X-Forwarded-For", "203.0.113.9")
                ]
            ).status == 200)
        guarded.stop()
    }

    /// From another machine (an address that is not loopback), without an admin token: refused.
    @Test func anotherMachineIsRefusedWithoutTheAdminToken() throws {
        let t = try ConfigTests().load(Self.config.replacingOccurrences(of: "DATA_DIR", with: "/tmp/hg-status-unit"))
        let journal = try Journal(
            directory: ServeProcess.makeTempDir("status-journal"), logger: Logger(component: "t", sink: MemoryLogSink()))
        let endpoint = StatusEndpoint(topology: t, journal: journal, drainers: { [] }, clock: SystemClock())
        for address in ["192.168.1.20", "10.0.0.2", "2001:db8::1", "::ffff:192.168.1.20", ""] {
            let r = endpoint.handle(HTTPRequest(method: "GET", path: "/", remoteAddress: address), path: "/", receivers: [])
            #expect(r?.status == 403, "\(address)")
        }
        #expect(
            endpoint.handle(
                HTTPRequest(method: "GET", path: "/", headers: [(name: "Host", value: "[::1]:8080")], remoteAddress: "::1"),
                path: "/", receivers: [])?.status == 200)
        // HTTP/1.1 says a request names its host: one without is not answered the page.
        #expect(endpoint.handle(HTTPRequest(method: "GET", path: "/", remoteAddress: "::1"), path: "/", receivers: [])?.status == 403)
        journal.close()
    }

    @Test func theAdminTokenIsChecked() throws {
        #expect(throws: (any Error).self) { try ConfigTests().load(Self.config + "\nadmin: {token: short}\n") }
        #expect(throws: (any Error).self) { try ConfigTests().load(Self.config + "\nadmin: {}\n") }
        #expect(throws: (any Error).self) { try ConfigTests().load(Self.config + "\nadmin: {token: \(Vectors.token)}\n") }
    }
}

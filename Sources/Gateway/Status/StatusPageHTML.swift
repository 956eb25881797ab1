import HealthgateCore
import HealthgateCrypto
import Pipeline
import Posix

/// The status page as HTML: plain HTML and CSS, no external asset, readable on a phone. Every
/// 10 s one inline script (allowed by its hash alone) fetches the page again and swaps in its
/// live part, so what the user opened or scrolled to stays; without scripts, a meta refresh.
/// Every text in it goes through `HTMLText.text`.
enum StatusPageHTML {
    /// The figures a page shows besides the metrics: phones from the request log, and what was
    /// set aside (quarantines, dead letters) with its newest reason.
    struct Extras {
        var devices: [RequestLog.Device] = []
        var setAside: [(what: String, file: String, summary: NDJSONSummaries.Summary)] = []
        /// A fleet machine's: the fleet as `healthgate status` says it.
        var fleet: [String] = []
    }

    static let refreshScript = """
        setInterval(function(){fetch(location.href,{cache:"no-store",credentials:"same-origin"}).then(function(r){return r.ok?r.text():null})\
        .then(function(t){if(!t)return;var d=new DOMParser().parseFromString(t,"text/html");var n=d.getElementById("live"),o=document.getElementById("live");\
        if(!n||!o)return;var open=[];o.querySelectorAll("details[open]").forEach(function(e){if(e.id)open.push(e.id)});n.setAttribute("data-refreshed","1");o.replaceWith(n);\
        open.forEach(function(i){var e=document.getElementById(i);if(e)e.open=true})}).catch(function(){})},10000);
        """
    /// The Content-Security-Policy source of that script: its SHA-256, base64.
    static let refreshScriptSource: String = {
        let b64url = Crypto.base64url(Crypto.sha256(Array(refreshScript.utf8)))
        var b64 = String(b64url.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while b64.count % 4 != 0 { b64 += "=" }
        return "'sha256-\(b64)'"
    }()

    static func render(
        topology: Topology, journal: Journal, receivers: [ReceiverMetrics], drainers: [SinkDrainer],
        removed: [RemovedSink] = [], links: [(receiver: String, link: String)], linksHidden: Bool = false,
        setup: [SetupHelp] = [], extras: Extras = Extras(), now: Timestamp
    ) -> [UInt8] {
        var h = HTMLText()
        h.raw(
            """
            <!doctype html><html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1"><noscript><meta http-equiv="refresh" content="10"></noscript>
            <title>healthgate</title><style>
            body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:980px;padding:12px 16px;color:#1b1f24;background:#f6f7f9}
            h1{font-size:22px;margin:6px 0 2px}h2{font-size:17px;margin:22px 0 8px}
            .muted{color:#5b6470;font-size:13px}.card{background:#fff;border:1px solid #dde1e6;border-radius:10px;padding:12px 14px;margin:10px 0}
            table{border-collapse:collapse;width:100%;font-size:14px}th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #eceff2;vertical-align:top}
            th{font-weight:600;color:#3d4550;font-size:13px}td.n{text-align:right;font-variant-numeric:tabular-nums}
            .ok{color:#116329}.bad{color:#b42318}.warn{color:#9a6700}
            .qr{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.qr svg{width:260px;height:260px;background:#fff}
            .bar{height:10px;background:#eceff2;border-radius:5px;overflow:hidden;margin-top:6px}.bar>div{height:10px;background:#2f6feb}
            code{font-size:12px;word-break:break-all}.scroll{overflow-x:auto}
            @media (max-width:600px){body{padding:8px 10px}th,td{padding:5px 6px}.qr svg{width:220px;height:220px}table{font-size:13px}}
            </style><script>\(refreshScript)</script></head><body>
            """)
        h.raw("<h1>healthgate</h1><div class=\"muted\">")
        h.text("version \(CLI.version) (\(Healthgate.build.commit)) · data dir \(topology.dataDir)")
        h.raw("</div>")

        if linksHidden && topology.receivers.contains(where: { $0.config.kind == "syncky" }) {
            h.raw("<h2>Connect a phone</h2><div class=\"card\"><p>")
            h.text(
                "A setup link holds the receiver's token and secret, so this page shows none without the admin token: run "
                    + "`healthgate link --qr` in a terminal on this machine, or set admin: {token: …} (then the page asks for it) "
                    + "or admin: {local_links: true} (this machine's page shows them to whoever reaches it: a proxy here too).")
            h.raw("</p></div>")
        }
        if !links.isEmpty {
            h.raw("<h2>Connect a phone</h2>")
            for l in links {
                h.raw("<div class=\"card qr\">")
                if let svg = try? QRSVG.render(l.link) { h.raw(svg) }
                h.raw("<div><b>")
                h.text(l.receiver)
                h.raw(
                    "</b><p>In Syncky: Settings › Connections › + › Scan a setup link, and point the camera here. "
                        + "The code holds this receiver's token and secret: show it only to the phone's owner.</p>"
                        + "<details><summary>The link as text</summary><code>")
                h.text(l.link)
                h.raw("</code></details></div></div>")
            }
        }
        if !setup.isEmpty {
            h.raw(
                "<h2>What to enter in each app</h2><p class=\"muted\">These hold the receivers' tokens: show them only to "
                    + "the phone's owner.</p>")
            for s in setup {
                h.raw("<details class=\"card\" id=\"setup-"); h.text(s.receiver); h.raw("\"><summary><b>")
                h.text(s.app); h.raw("</b> — receiver "); h.text(s.receiver)
                h.raw("</summary><p class=\"muted\">"); h.text(s.whereInApp); h.raw("</p><table>")
                for f in s.fields {
                    h.raw("<tr><th>"); h.text(f.label); h.raw("</th><td><code>"); h.text(f.value); h.raw("</code></td></tr>")
                }
                h.raw("</table></details>")
            }
        }

        h.raw("<div id=\"live\"><p class=\"muted\">")
        h.text("as of \(Timestamp(seconds: now.seconds).rfc3339())")
        h.raw(
            "</p><h2>Receivers</h2><div class=\"card scroll\"><table><tr><th>receiver</th><th>path</th><th>last request</th>"
                + "<th class=\"n\">requests</th><th class=\"n\">records</th><th class=\"n\">refused</th><th>last refusal</th></tr>")
        for (r, m) in zip(topology.receivers, receivers) {
            h.raw("<tr><td>"); h.text("\(r.name) (\(r.config.kind))")
            h.raw("</td><td>"); h.text(r.receiver.paths.joined(separator: ", "))
            h.raw("</td><td>")
            let last = m.lastRequestNanos.load(ordering: .relaxed)
            if last == 0 {
                h.raw("<span class=\"muted\">none yet</span>")
            } else {
                let status = m.lastStatus.load(ordering: .relaxed)
                h.raw(status < 300 ? "<span class=\"ok\">" : status >= 500 ? "<span class=\"bad\">" : "<span class=\"warn\">")
                h.text("\(status)")
                h.raw("</span> ")
                h.text(ago(Double(now.unixNanoseconds - last) / 1e9))
            }
            h.raw("</td><td class=\"n\">"); h.text("\(m.requests.load(ordering: .relaxed))")
            h.raw("</td><td class=\"n\">"); h.text("\(m.accepted.load(ordering: .relaxed))")
            let refused = [
                ("auth", m.refused.load(ordering: .relaxed)), ("other device", m.wrongDevice.load(ordering: .relaxed)),
                ("unreadable", m.unreadable.load(ordering: .relaxed)),
                ("too large", m.tooLarge.load(ordering: .relaxed)), ("bad records", m.quarantined.load(ordering: .relaxed)),
                ("busy", m.unavailable.load(ordering: .relaxed))
            ].filter { $0.1 > 0 }
            h.raw("</td><td class=\"n\">")
            h.text(refused.isEmpty ? "0" : refused.map { "\($0.1) \($0.0)" }.joined(separator: ", "))
            h.raw("</td><td>")
            if let r = m.lastRefusal.withLock({ $0 }) {
                h.raw("<span class=\"warn\">"); h.text("\(r.status)"); h.raw("</span> ")
                h.text("\(ago(Double(now.unixNanoseconds - r.time.unixNanoseconds) / 1e9)) from \(r.address): \(r.why)")
            } else {
                h.raw("—")
            }
            h.raw("</td></tr>")
        }
        h.raw("</table></div>")

        h.raw("<h2>Devices</h2>")
        if extras.devices.isEmpty {
            h.raw("<div class=\"card muted\">No phone has sent anything yet.</div>")
        } else {
            h.raw(
                "<div class=\"card scroll\"><table><tr><th>device</th><th>receiver</th><th>last seen</th><th class=\"n\">requests</th>"
                    + "<th class=\"n\">records</th><th>last refusal</th></tr>")
            for d in extras.devices {
                h.raw("<tr><td><code>"); h.text(d.device); h.raw("</code></td><td>"); h.text(d.receiver)
                h.raw("</td><td>"); h.text(ago(Double(now.unixNanoseconds - d.lastSeen.unixNanoseconds) / 1e9))
                h.raw("</td><td class=\"n\">"); h.text("\(d.requests)")
                h.raw("</td><td class=\"n\">"); h.text("\(d.records)")
                h.raw("</td><td>")
                if let r = d.lastRefusal {
                    h.raw("<span class=\"warn\">"); h.text("\(r.status)"); h.raw("</span> ")
                    h.text(ago(Double(now.unixNanoseconds - r.time.unixNanoseconds) / 1e9) + (r.note.map { ": " + $0 } ?? ""))
                } else {
                    h.raw("—")
                }
                h.raw("</td></tr>")
            }
            h.raw("</table></div>")
        }

        if !extras.fleet.isEmpty {
            h.raw("<h2>Fleet</h2><div class=\"card scroll\"><pre>")
            h.text(extras.fleet.joined(separator: "\n"))
            h.raw("</pre><p class=\"muted\">In a fleet, the sinks are delivered by the deliver machines' workers from ")
            h.raw("the partition queues above, not from this machine's journal.</p></div>")
        }
        h.raw(
            "<h2>Sinks</h2><div class=\"card scroll\"><table><tr><th>sink</th><th>destination</th><th class=\"n\">waiting</th>"
                + "<th>oldest waiting</th><th class=\"n\">sent</th><th>last error</th><th>next try</th></tr>")
        for d in drainers {
            let m = d.metrics
            let b = journal.backlog(fromSeq: m.cursorSeq.load(ordering: .relaxed), skip: m.cursorSkip.load(ordering: .relaxed))
            h.raw("<tr><td>"); h.text(m.name)
            h.raw("</td><td>")
            if let p = m.paused {
                h.raw("<span class=\"bad\">paused</span> ")
                h.text(
                    "since \(p.since.rfc3339()): the process died on it \(p.crashes) starts in a row (\(p.signalName)) at journal "
                        + "entry \(p.from.seq), record \(p.from.skip). " + CrashGuard.howToResume(m.name) + ".")
            } else {
                switch m.reachability {
                case .unreachable(let why), .failing(let why):
                    h.raw("<span class=\"bad\">"); h.text(m.reachability.word); h.raw("</span> "); h.text(why)
                default:
                    h.raw("<span class=\"ok\">"); h.text(m.reachability.word); h.raw("</span>")
                }
            }
            h.raw("</td><td class=\"n\">"); h.text("\(b.records) (\(bytes(b.bytes)))")
            h.raw("</td><td>")
            if let ns = b.oldestNanos { h.text(ago(Double(now.unixNanoseconds - ns) / 1e9) + " (lag)") } else { h.raw("—") }
            h.raw("</td><td class=\"n\">"); h.text("\(m.sent.load(ordering: .relaxed))")
            h.raw("</td><td>")
            if let e = m.lastError { h.raw("<span class=\"bad\">"); h.text(e); h.raw("</span>") } else { h.raw("—") }
            h.raw("</td><td>")
            let next = m.nextRetryAt.load(ordering: .relaxed)
            if next > 0 && next > now.seconds { h.text("in " + span(Double(next - now.seconds))) } else { h.raw("—") }
            h.raw("</td></tr>")
        }
        h.raw("</table></div>")
        if !removed.isEmpty {
            h.raw("<h2>Removed from the config, still waiting</h2><div class=\"card\">")
            for r in removed {
                let b = journal.backlog(fromSeq: r.cursor.seq, skip: r.cursor.skip)
                h.raw("<p>");
                h.text(
                    "\(r.name): \(b.records) record(s) (\(bytes(b.bytes))) wait for it in the journal. Put it back in "
                        + "the config to deliver them, or `healthgate forget \(r.name)` to let them go.")
                h.raw("</p>")
            }
            h.raw("</div>")
        }

        if !extras.setAside.isEmpty {
            h.raw(
                "<h2>Set aside</h2><div class=\"card scroll\"><table><tr><th>what</th><th class=\"n\">entries</th><th>newest</th><th>file</th></tr>"
            )
            for s in extras.setAside {
                h.raw("<tr><td>"); h.text(s.what)
                h.raw("</td><td class=\"n\">"); h.text("\(s.summary.lines) (\(bytes(s.summary.bytes)))")
                h.raw("</td><td>")
                h.text([s.summary.newestTime, s.summary.newestReason].compactMap { $0 }.joined(separator: ": "))
                h.raw("</td><td><code>"); h.text(s.file); h.raw("</code></td></tr>")
            }
            h.raw(
                "</table><p class=\"muted\">Records a sink refused for good wait in its dead letters: "
                    + "<code>healthgate replay FILE</code> sends them again once the cause is mended.</p></div>")
        }

        h.raw("<h2>Journal</h2><div class=\"card\">")
        let used = journal.bytesOnDisk
        if let max = topology.journal.max_bytes.map({ Int($0.bytes) }), max > 0 {
            h.text("\(bytes(used)) of its budget of \(bytes(max)) (journal.max_bytes), \(journal.segmentFirstSeqs.count) segment(s)")
            let pct = min(100, used * 100 / max)
            h.raw("<div class=\"bar\"><div style=\"width:\(pct)%\"></div></div>")
        } else {
            h.text("\(bytes(used)) in \(journal.segmentFirstSeqs.count) segment(s); no budget set (journal.max_bytes)")
        }
        h.raw("</div></div><p class=\"muted\">The same as JSON: <code>/status</code> · metrics: <code>/metrics</code></p></body></html>\n")
        return h.bytes
    }

    static func ago(_ seconds: Double) -> String { seconds < 2 ? "just now" : span(seconds) + " ago" }

    static func span(_ seconds: Double) -> String {
        let s = max(0, Int(seconds))
        if s < 60 { return "\(s) s" }
        if s < 3600 { return "\(s / 60) min" }
        if s < 86_400 { return "\(s / 3600) h \(s % 3600 / 60) min" }
        return "\(s / 86_400) d"
    }

    static func bytes(_ n: Int) -> String {
        n < 1024 ? "\(n) B" : n < 1 << 20 ? "\(n >> 10) KiB" : n < 1 << 30 ? "\(n >> 20) MiB" : "\(n >> 30) GiB"
    }
}

/// HTML text, escaped in one place.
struct HTMLText {
    var bytes: [UInt8] = []

    mutating func raw(_ s: String) { bytes += s.utf8 }

    mutating func text(_ s: String) {
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "&"): bytes += "&amp;".utf8
            case UInt8(ascii: "<"): bytes += "&lt;".utf8
            case UInt8(ascii: ">"): bytes += "&gt;".utf8
            case UInt8(ascii: "\""): bytes += "&quot;".utf8
            case UInt8(ascii: "'"): bytes += "&#39;".utf8
            default: bytes.append(b)
            }
        }
    }
}

/// A QR code as inline SVG (libqrencode's modules), dark on white, with a quiet zone of four.
enum QRSVG {
    static func render(_ text: String) throws -> String {
        let grid = try TerminalQR.modules(text, quietZone: 4)
        var d = ""
        for (y, row) in grid.enumerated() {
            var x = 0
            while x < row.count {
                guard row[x] else { x += 1; continue }
                var run = 1
                while x + run < row.count && row[x + run] { run += 1 }
                d += "M\(x) \(y)h\(run)v1h-\(run)z"
                x += run
            }
        }
        let n = grid.count
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(n) \(n)\" shape-rendering=\"crispEdges\" role=\"img\" "
            + "aria-label=\"setup link QR code\"><rect width=\"\(n)\" height=\"\(n)\" fill=\"#fff\"/><path fill=\"#000\" d=\"\(d)\"/></svg>"
    }
}

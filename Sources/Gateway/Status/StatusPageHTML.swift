import HealthgateCore
import Pipeline
import Posix

/// The status page as HTML: plain HTML and CSS, no script and no external asset, readable on a
/// phone, refreshed every 10 s. Every text in it goes through `HTMLText.escape`.
enum StatusPageHTML {
    static func render(topology: Topology, journal: Journal, receivers: [ReceiverMetrics], drainers: [SinkDrainer],
                       removed: [RemovedSink] = [], links: [(receiver: String, link: String)], linksHidden: Bool = false,
                       now: Timestamp) -> [UInt8] {
        var h = HTMLText()
        h.raw("""
            <!doctype html><html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1"><meta http-equiv="refresh" content="10">
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
            </style></head><body>
            """)
        h.raw("<h1>healthgate</h1><div class=\"muted\">")
        h.text("version \(CLI.version) (\(Healthgate.build.commit)) · data dir \(topology.dataDir) · as of \(Timestamp(seconds: now.seconds).rfc3339())")
        h.raw("</div>")

        if linksHidden && topology.receivers.contains(where: { $0.config.kind == "syncky" }) {
            h.raw("<h2>Connect a phone</h2><div class=\"card\"><p>")
            h.text("A setup link holds the receiver's token and secret, so this page shows none without the admin token: run "
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
                h.raw("</b><p>In Syncky: Settings › Connections › + › Scan a setup link, and point the camera here. "
                      + "The code holds this receiver's token and secret: show it only to the phone's owner.</p>"
                      + "<details><summary>The link as text</summary><code>")
                h.text(l.link)
                h.raw("</code></details></div></div>")
            }
        }

        h.raw("<h2>Receivers</h2><div class=\"card scroll\"><table><tr><th>receiver</th><th>path</th><th>last request</th>"
              + "<th class=\"n\">requests</th><th class=\"n\">records</th><th class=\"n\">refused</th></tr>")
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
            let refused = [("auth", m.refused.load(ordering: .relaxed)), ("other device", m.wrongDevice.load(ordering: .relaxed)), ("unreadable", m.unreadable.load(ordering: .relaxed)),
                           ("too large", m.tooLarge.load(ordering: .relaxed)), ("bad records", m.quarantined.load(ordering: .relaxed)),
                           ("busy", m.unavailable.load(ordering: .relaxed))].filter { $0.1 > 0 }
            h.raw("</td><td class=\"n\">")
            h.text(refused.isEmpty ? "0" : refused.map { "\($0.1) \($0.0)" }.joined(separator: ", "))
            h.raw("</td></tr>")
        }
        h.raw("</table></div>")

        h.raw("<h2>Sinks</h2><div class=\"card scroll\"><table><tr><th>sink</th><th>destination</th><th class=\"n\">waiting</th>"
              + "<th>oldest waiting</th><th class=\"n\">sent</th><th>last error</th><th>next try</th></tr>")
        for d in drainers {
            let m = d.metrics
            let b = journal.backlog(fromSeq: m.cursorSeq.load(ordering: .relaxed), skip: m.cursorSkip.load(ordering: .relaxed))
            h.raw("<tr><td>"); h.text(m.name)
            h.raw("</td><td>")
            if let p = m.paused {
                h.raw("<span class=\"bad\">paused</span> ")
                h.text("since \(p.since.rfc3339()): the process died on it \(p.crashes) starts in a row (\(p.signalName)) at journal "
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
                h.raw("<p>"); h.text("\(r.name): \(b.records) record(s) (\(bytes(b.bytes))) wait for it in the journal. Put it back in "
                                    + "the config to deliver them, or `healthgate forget \(r.name)` to let them go.")
                h.raw("</p>")
            }
            h.raw("</div>")
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
        h.raw("</div><p class=\"muted\">The same as JSON: <code>/status</code> · metrics: <code>/metrics</code></p></body></html>\n")
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

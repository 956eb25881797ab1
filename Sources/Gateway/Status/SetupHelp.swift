import HealthgateCore

/// What to enter in each app for a receiver, field by field, as its settings screen names them:
/// the status page shows it beside the Syncky QR code (only where it may show secrets).
struct SetupHelp {
    var receiver: String
    var app: String
    /// Where the fields are in the app.
    var whereInApp: String
    var fields: [(label: String, value: String)]

    static func of(_ r: (name: String, config: ReceiverConfig, receiver: any Receiver), topology t: Topology) -> SetupHelp? {
        let c = r.config
        let path = r.receiver.paths.first ?? (c.path ?? "/")
        let url = SetupLink.publicURL(config: c, topology: t, host: nil, path: path)
        var auth: [(String, String)] = []
        let token = c.auth?.token ?? ""
        switch c.auth?.type ?? .none {
        case .none: auth = [("Authentication", "none")]
        case .bearer: auth = [("Header", "Authorization"), ("Value", "Bearer " + token)]
        case .header: auth = [("Header", c.auth?.header ?? ""), ("Value", token)]
        case .basic: auth = [("User", c.auth?.user ?? "any"), ("Password", token)]
        case .client_cert: auth = [("Authentication", "a TLS client certificate the config allows")]
        }
        switch c.kind {
        case "syncky":
            return SetupHelp(
                receiver: r.name, app: "Syncky Health, by hand", whereInApp: "Settings › Connections › + › Webhook",
                fields: [("URL", url), ("Format", "native")] + auth
                    + (c.hmac.map { [("Signing secret", $0.secret)] } ?? []))
        case "hae":
            return SetupHelp(
                receiver: r.name, app: "Health Auto Export",
                whereInApp: "Automations › + › REST API; Export Format JSON; the header under Headers",
                fields: [("URL", url)] + auth)
        case "healthsync":
            // The app takes the server's base URL and a token; it posts to its own fixed path.
            let base = path == "/api/apple-health/sync" ? String(url.dropLast(path.count)) : url
            return SetupHelp(
                receiver: r.name, app: "HealthSync", whereInApp: "Settings › Backend",
                fields: [("Backend URL", base), ("Auth token", token)]
                    + (path == "/api/apple-health/sync"
                        ? [] : [("Note", "the app posts to /api/apple-health/sync: set this receiver's path to it")]))
        case "influx":
            let base = path.hasSuffix("/api/v2/write") ? String(url.dropLast("/api/v2/write".count)) : url
            return SetupHelp(
                receiver: r.name, app: "InfluxDB clients (Syncky's influx format, Telegraf, scripts)",
                whereInApp: "the client's InfluxDB output: any org, bucket or database name",
                fields: [
                    ("URL", base), ("Token", token),
                    ("Header", "Authorization: Token " + token + " (v2), or u/p with the token as p (v1)")
                ])
        case "ingest":
            return SetupHelp(
                receiver: r.name, app: "The chunked ingest API (POST JSON with device_id)", whereInApp: "your client",
                fields: [("URL", url)] + auth)
        default:
            return nil
        }
    }
}
